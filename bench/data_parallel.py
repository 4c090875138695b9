"""Data-parallel `export-cli train` on this machine: samples/s with 1 and 2 processes, and the
gradient all-reduce's exposed time (not hidden by the backward) with the buckets launched
during the backward (default) and after it (--no-grad-overlap) (issue 13). Prints figures;
not a test.

    /usr/bin/python3 bench/data_parallel.py [--cli build/cli/export-cli] [--batch 16]
                                            [--samples 512] [--epochs 2]

Model: torchvision resnet18 (10 classes) at 3x32x32, exported by pt2rt at --batch (the per
process batch), trained with SGD on random data. Runs, interleaved twice each:
  1 process,  intra-op threads = all cores (OMP_NUM_THREADS unset)
  1 process,  1 intra-op thread
  2 processes (--nproc-per-node 2), 1 intra-op thread each (the same cores, split), the
    all-reduce overlapped with the backward, then after it (--no-grad-overlap)
Samples/s is what export-cli prints for the last epoch (global: every rank's samples); the
exposed all-reduce is rank 0's time in DataParallel::average_gradients() (launching the
buckets left, waiting, averaging) as a share of the whole training time.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "exporter"), os.path.join(ROOT, "tests", "python")]
import models  # noqa: E402
import pt2rt  # noqa: E402


def run(cli, archive, data, batch, epochs, nproc, threads, extra):
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    args = [cli, "train", archive, "--data", data, "--batch-size", str(batch), "--epochs",
            str(epochs), "--lr", "0.01", "--seed", "0"]
    if nproc > 1:
        args += ["--nproc-per-node", str(nproc), *extra]
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"export-cli failed:\n{r.stdout}\n{r.stderr}")
    rates = [float(x) for x in re.findall(r"\(\S+ s, (\S+) samples/s\)", r.stdout)]
    share = re.search(r"gradient all-reduce \(rank 0\): (\S+) s of (\S+) s", r.stdout)
    return rates[-1], (float(share.group(1)) / float(share.group(2)) if share else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "cli", "export-cli"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model, _ = models.build("resnet18")
        archive = os.path.join(work, "resnet18.pt2")
        pt2rt.export(model, (torch.randn(a.batch, 3, 32, 32),), bundle_examples=False).save(
            archive)
        data = os.path.join(work, "train.pt")
        torch.manual_seed(0)
        torch.save((torch.randn(a.samples, 3, 32, 32), torch.randint(0, 10, (a.samples,))), data)
        configs = [("1 process, all cores", 1, None, []), ("1 process, 1 thread", 1, 1, []),
                   ("2 processes, overlapped", 2, 1, []),
                   ("2 processes, after backward", 2, 1, ["--no-grad-overlap"])]
        results = {name: [] for name, _, _, _ in configs}
        for _ in range(2):
            for name, nproc, threads, extra in configs:
                results[name].append(
                    run(a.cli, archive, data, a.batch, a.epochs, nproc, threads, extra))
        print(f"resnet18 3x32x32, batch {a.batch} per process, {a.samples} samples, SGD; "
              f"{os.cpu_count()} cores; torch {torch.__version__}")
        base = max(r[0] for r in results["1 process, 1 thread"])
        for name, _, _, _ in configs:
            rate = max(r[0] for r in results[name])
            shares = [r[1] for r in results[name] if r[1] is not None]
            share = f"  exposed all-reduce {100 * min(shares):.1f}% of train time" if shares else ""
            print(f"  {name:28s} {rate:8.1f} samples/s  x{rate / base:.2f} vs 1 process, "
                  f"1 thread{share}")


if __name__ == "__main__":
    main()
