"""export-cli --cuda-graphs for training (LoadOptions::cuda_graphs, runtime/exec/
training_graphs.h): the usage rules everywhere; on a CUDA machine, `train --cuda-graphs` of a
model with dropout and BatchNorm trains exactly as without graphs — the replays draw the same
dropout masks (the CUDA generator's Philox offset advances per replay) and write the same
BatchNorm statistics — and `run --train --cuda-graphs` replays a training step."""
import re

import pytest
import torch

import pt2rt
import random_models
from conftest import save_tensors

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def dropout_archive(tmp_path_factory):
    work = tmp_path_factory.mktemp("cuda_graphs")
    model, args = random_models.build_dropout()
    path = work / "dropout.pt2"
    pt2rt.export(model, args).save(str(path))
    torch.manual_seed(4)
    data = save_tensors(work / "train.pt", (torch.randn(48, 8), torch.randint(0, 3, (48,))))
    return path, data


def test_cuda_graphs_needs_cuda(cli, dropout_archive):
    path, data = dropout_archive
    cli.usage_error("train", path, "--data", data, "--cuda-graphs", mentions=["--device cuda"])
    cli.usage_error("run", path, "--train", "--cuda-graphs", mentions=["--device cuda"])


@needs_cuda
def test_train_with_cuda_graphs_equals_train_without(cli, dropout_archive, tmp_path):
    path, data = dropout_archive
    args = ("train", path, "--data", data, "--device", "cuda", "--epochs", "3",
            "--batch-size", "6", "--lr", "0.05", "--seed", "3")
    plain = cli.ok(*args, "--save", tmp_path / "plain.pt2")
    graphed = cli.ok(*args, "--cuda-graphs", "--save", tmp_path / "graphed.pt2")
    # 24 steps of the archive's static batch: 2 warm-ups, one capture, replays from then on.
    assert re.search(r"forward captured, 22 replays", graphed.out), graphed.out
    assert re.search(r"backward .*: captured, 22 replays", graphed.out), graphed.out
    losses = [line for line in plain.out.splitlines() if line.startswith(("epoch", "final"))]
    got = [line for line in graphed.out.splitlines() if line.startswith(("epoch", "final"))]
    strip_time = [re.sub(r"\(.*\)", "", line) for line in losses]
    assert [re.sub(r"\(.*\)", "", line) for line in got] == strip_time
    wa = pt2rt.load(str(tmp_path / "graphed.pt2")).weights
    wb = pt2rt.load(str(tmp_path / "plain.pt2")).weights
    assert wa.keys() == wb.keys()
    for k in wb:  # same kernels, same draws: bit for bit
        assert torch.equal(wa[k], wb[k]), k


@needs_cuda
def test_run_train_with_cuda_graphs_replays_a_step(cli, dropout_archive):
    path, _ = dropout_archive
    r = cli.ok("run", path, "--train", "--device", "cuda", "--cuda-graphs")
    assert "forward captured, 2 replays" in r.out, r.out
    assert "gradients: " in r.out
