"""BatchNorm in training: the running statistics are updated from what ``native_batch_norm``
already returned (save_mean, save_invstd; decompositions.running_stats_update), with no second
variance pass over the input — and still match eager PyTorch's running_mean / running_var /
num_batches_tracked after a training forward, for BatchNorm1d/2d/3d, other momentum and eps
values, and small per-channel counts."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import pt2rt
from pt2rt.ir.graph_ir import GraphRole

aten = torch.ops.aten


def _bn_model(kind: str):
    torch.manual_seed(0)
    if kind == "1d":
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6, momentum=0.3)), \
            (torch.randn(4, 5) * 3 + 1,)
    if kind == "2d":
        return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3, eps=1e-3)), \
            (torch.randn(2, 2, 5, 5) * 2,)
    if kind == "3d":
        return nn.Sequential(nn.Conv3d(1, 2, 2), nn.BatchNorm3d(2)), (torch.randn(2, 1, 3, 3, 3),)
    if kind == "n2":  # two elements per channel: unbiased = 2 x biased
        return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)), (torch.randn(2, 3),)
    raise KeyError(kind)


@pytest.mark.parametrize("kind", ["1d", "2d", "3d", "n2"])
def test_running_stats_match_eager_without_variance_pass(kind, tmp_path):
    model, args = _bn_model(kind)
    exported = pt2rt.export(copy.deepcopy(model), args, inference=False, bundle_examples=False)
    fwd = exported.graph(GraphRole.Forward).module.graph
    targets = [n.target for n in fwd.nodes if n.op == "call_function"]
    assert aten.var.correction not in targets and aten.var_mean.correction not in targets
    assert targets.count(aten.native_batch_norm.default) == 1

    path = str(tmp_path / "bn.pt2")
    exported.save(path)
    step = pt2rt.load(path).train_step(*args)
    eager = copy.deepcopy(model).train()
    eager(*args)
    for fqn, value in eager.named_buffers():
        torch.testing.assert_close(step.buffers[fqn], value, msg=f"{kind}: {fqn}")
