"""export-cli train, data-parallel (issue 13), on loopback: --nproc-per-node, joining a job
with --rank/--world-size/--master-addr/--master-port or torchrun's variables, and faults
(a killed rank, a port in use, an unreachable master)."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest
import torch

import models
import pt2rt
from conftest import save_tensors

LR = "0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """models.MLP with the same weights exported at batch 4 and 8, and 40 samples."""
    work = tmp_path_factory.mktemp("ddp")
    for b in (4, 8):
        torch.manual_seed(0)
        pt2rt.export(models.MLP(), (torch.randn(b, 16),), bundle_examples=False).save(
            str(work / f"mlp_b{b}.pt2"))
    torch.manual_seed(5)
    data = save_tensors(work / "train.pt", (torch.randn(40, 16), torch.randint(0, 10, (40,))))
    return work, data


def train_args(archive, data, batch, save, *extra):
    return ["train", archive, "--data", data, "--batch-size", batch, "--lr", LR,
            "--momentum", "0.9", "--seed", "3", "--save", save, *extra]


def max_rel_diff(a: str, b: str) -> float:
    wa, wb = pt2rt.load(a).weights, pt2rt.load(b).weights
    assert wa.keys() == wb.keys()
    return max(((wa[k] - wb[k]).abs().max() / wb[k].abs().max().clamp_min(1e-12)).item()
               for k in wa)


def final_loss(out: str) -> float:
    return float(re.search(r"^final: train_loss (\S+)", out, re.M).group(1))


@pytest.fixture(scope="module")
def single(cli, mlp):
    """1 process, batch 8: 5 SGD steps (one epoch of 40)."""
    work, data = mlp
    out = work / "single.pt2"
    r = cli.ok(*train_args(work / "mlp_b8.pt2", data, 8, out))
    return out, final_loss(r.out)


def test_nproc_per_node_2_equals_one_process_with_twice_the_batch(cli, mlp, single, tmp_path):
    work, data = mlp
    out = tmp_path / "ddp.pt2"
    r = cli.ok(*train_args(work / "mlp_b4.pt2", data, 4, out, "--nproc-per-node", "2"))
    assert "data-parallel: 2 processes" in r.out
    assert "5 batches of 4 per epoch" in r.out
    assert r.out.count("saved ") == 1  # rank 0 alone prints and saves
    assert "gradient all-reduce (rank 0):" in r.out
    assert abs(final_loss(r.out) - single[1]) < 1e-5
    assert max_rel_diff(str(out), str(single[0])) <= 1e-5


def test_joined_ranks_by_flags_and_by_torchrun_variables(cli, mlp, single, tmp_path):
    work, data = mlp
    port = str(free_port())
    out = tmp_path / "joined.pt2"
    args = [cli.path, *map(str, train_args(work / "mlp_b4.pt2", data, 4, out))]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    rank0 = subprocess.Popen(args + ["--rank", "0", "--world-size", "2", "--master-addr",
                                     "127.0.0.1", "--master-port", port],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    rank1 = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**env, "RANK": "1", "WORLD_SIZE": "2",
                                  "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
    out0, err0 = rank0.communicate(timeout=120)
    out1, err1 = rank1.communicate(timeout=120)
    assert rank0.returncode == 0 and rank1.returncode == 0, err0 + err1
    assert out1 == ""  # only rank 0 prints
    assert max_rel_diff(str(out), str(single[0])) <= 1e-5


def children_of(pid: int):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def rank_of(pid: int) -> int:
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return int(env[b"RANK"])


@pytest.fixture(scope="module")
def long_data(mlp):
    work, _ = mlp
    torch.manual_seed(6)
    return save_tensors(work / "long.pt", (torch.randn(4000, 16), torch.randint(0, 10, (4000,))))


def test_killed_rank_fails_the_job_and_leaves_the_target_untouched(cli, mlp, long_data, tmp_path):
    work, _ = mlp
    target = tmp_path / "target.pt2"
    target.write_bytes(b"previous model")
    launcher = subprocess.Popen(
        [cli.path, *map(str, train_args(work / "mlp_b4.pt2", long_data, 4, target,
                                         "--nproc-per-node", "2", "--epochs", "1000",
                                         "--dist-timeout", "10"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Rank 0 prints "epoch 1/1000 ..." once the first epoch is done: both ranks train.
        line = ""
        while not line.startswith("epoch 1/"):
            line = launcher.stdout.readline()
            assert line, launcher.stderr.read()
        ranks = {rank_of(c): c for c in children_of(launcher.pid)}
        start = time.monotonic()
        os.kill(ranks[1], signal.SIGKILL)
        _, err = launcher.communicate(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode != 0
    assert f"rank 1 (pid {ranks[1]}) was killed by signal 9" in err, err
    assert "rank 0: gradient all-reduce failed: lost rank 1" in err or \
           "rank 0: train loss all-reduce failed: lost rank 1" in err or \
           "rank 0: broadcast of buffers failed: lost rank 1" in err, err
    assert elapsed < 10 + 5, err
    assert target.read_bytes() == b"previous model"


def test_port_in_use_is_a_usage_error(cli, mlp, tmp_path):
    work, data = mlp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        cli.usage_error(*train_args(work / "mlp_b4.pt2", data, 4, tmp_path / "o.pt2", "--rank",
                                    "0", "--world-size", "2", "--master-addr", "127.0.0.1",
                                    "--master-port", port, "--dist-timeout", "5"),
                        mentions=[f"rank 0 of 2: cannot serve TCPStore 127.0.0.1:{port}"])
    assert not (tmp_path / "o.pt2").exists()


def test_unreachable_master_is_a_usage_error_within_the_timeout(cli, mlp, tmp_path):
    work, data = mlp
    port = free_port()
    start = time.monotonic()
    cli.usage_error(*train_args(work / "mlp_b4.pt2", data, 4, tmp_path / "o.pt2", "--rank", "1",
                                "--world-size", "2", "--master-addr", "127.0.0.1",
                                "--master-port", port, "--dist-timeout", "3"),
                    mentions=[f"rank 1 of 2: cannot reach TCPStore 127.0.0.1:{port}"])
    assert time.monotonic() - start < 30


def test_option_errors(cli, mlp, tmp_path):
    work, data = mlp
    cli.usage_error(*train_args(work / "mlp_b4.pt2", data, 4, tmp_path / "o.pt2",
                                "--nproc-per-node", "0"), mentions=["--nproc-per-node"])
    cli.usage_error(*train_args(work / "mlp_b4.pt2", data, 4, tmp_path / "o.pt2",
                                "--nproc-per-node", "2", "--world-size", "4"),
                    mentions=["--nproc-per-node starts a one-machine job"])
    cli.usage_error(*train_args(work / "mlp_b4.pt2", data, 4, tmp_path / "o.pt2",
                                "--rank", "2", "--world-size", "2", "--master-addr", "127.0.0.1",
                                "--master-port", free_port()),
                    mentions=["RANK='2'"])
    if "MASTER_ADDR" not in os.environ:  # flags without an address: named with its flag
        cli.usage_error(*train_args(work / "mlp_b4.pt2", data, 4, tmp_path / "o.pt2",
                                    "--rank", "1", "--world-size", "2"),
                        mentions=["MASTER_ADDR is not set", "--master-addr"])
