"""export-cli profile: per-node and per-operator timing of inference and training calls."""
import json
import re
import statistics

import pytest
import torch

import pt2rt


class _Convs(torch.nn.Module):
    """Convolutions large enough that operator time dominates a call (~ms per op)."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def convs(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("profile") / "convs.pt2"
    pt2rt.export(_Convs(), (torch.randn(4, 3, 48, 48),)).save(str(path))
    return path


def _check_rows(r, iters):
    """Node rows: each node of each plan once per call; op rows: node rows summed per op."""
    plans = {p["graph"]: p["nodes_per_call"] for p in r["plans"]}
    per_call = [n for n in r["nodes"] if not n["prologue"]]
    for graph, count in plans.items():
        rows = [n for n in per_call if n["graph"] == graph]
        assert len(rows) == count, (graph, count, rows)
        assert sorted(n["position"] for n in rows) == list(range(count))
        assert len({n["name"] for n in rows}) == count  # FX names: one row per node
    assert set(plans) == {n["graph"] for n in per_call}
    for n in per_call:
        assert n["calls"] == iters, n
    ops = {}
    for n in r["nodes"]:
        o = ops.setdefault(n["op"], {"nodes": 0, "calls": 0, "total_us": 0.0})
        o["nodes"] += 1
        o["calls"] += n["calls"]
        o["total_us"] += n["total_us"]
    assert {o["op"] for o in r["ops"]} == set(ops)
    for o in r["ops"]:
        assert o["nodes"] == ops[o["op"]]["nodes"] and o["calls"] == ops[o["op"]]["calls"]
        assert o["total_us"] == pytest.approx(ops[o["op"]]["total_us"])
        assert o["mean_us"] == pytest.approx(o["total_us"] / o["calls"])
        assert o["share"] == pytest.approx(o["total_us"] / r["measured_us"])
    for n in r["nodes"]:
        assert n["mean_us"] == pytest.approx(n["total_us"] / n["calls"])
    assert sum(n["total_us"] for n in r["nodes"]) == pytest.approx(r["nodes_us"])
    assert len(r["per_call"]) == iters
    assert sum(c["wall_us"] for c in r["per_call"]) == pytest.approx(r["measured_us"])


def _check_coverage(r):
    """The node rows cover the interpreted call: per call, the nodes' times lie inside the
    plan segments' spans measured around them (so nodes <= interpreted <= wall), and the
    median call's nodes are within 10 % of its interpreted time. The gap is only the
    observer's bookkeeping between nodes — a ratio of two sums over the same intervals,
    which a loaded machine's preemption scales alike (no absolute time is asserted)."""
    for c in r["per_call"]:
        assert 0 < c["nodes_us"] <= c["interpreted_us"] <= c["wall_us"], c
    ratio = statistics.median(c["nodes_us"] / c["interpreted_us"] for c in r["per_call"])
    assert ratio >= 0.9, r["per_call"]


def test_json_node_and_op_rows(cli, convs):
    r = json.loads(cli.ok("profile", convs, "--json", "--iters", "5").out)
    assert r["mode"] == "inference" and r["iters"] == 5
    assert [p["graph"] for p in r["plans"]] == ["inference"]
    _check_rows(r, 5)
    _check_coverage(r)
    ops = {row["op"]: row for row in r["ops"]}
    assert ops["aten::convolution"]["calls"] == 2 * 5 and ops["aten::convolution"]["nodes"] == 2
    assert ops["aten::addmm"]["calls"] == 5
    conv = [n for n in r["nodes"] if n["op"] == "aten::convolution"]
    assert {n["outputs"] for n in conv} == {"float32[4, 32, 48, 48]"}
    assert all(n["total_us"] > 0 for n in conv)


def test_train_profiles_forward_and_backward(cli, convs):
    r = json.loads(cli.ok("profile", convs, "--train", "--json", "--iters", "3").out)
    assert {p["graph"] for p in r["plans"]} == {"forward", "backward"}
    _check_rows(r, 3)
    _check_coverage(r)
    ops = {row["op"] for row in r["ops"]}
    assert {"aten::convolution", "aten::convolution_backward"} <= ops
    backward = {n["op"] for n in r["nodes"] if n["graph"] == "backward"}
    assert "aten::convolution_backward" in backward


def test_table_and_top(cli, convs):
    out = cli.ok("profile", convs, "--iters", "2", "--top", "3").out
    assert re.search(r"inference, 2 calls, median \S+ ms per call, interpreted \S+ ms, "
                     r"nodes \S+ % of it", out)
    node_rows = re.findall(r"^inference\s+\d+\s+\S+\s+aten::\S+\s.*\s2\s+\S+\s+\S+\s+\S+%$",
                           out, re.M)
    assert len(node_rows) == 3, out
    m = re.search(r"^nodes \(3 of (\d+), by total time\)$", out, re.M)
    assert m and int(m.group(1)) > 3, out
    assert re.search(r"^aten::convolution\s+2\s+4\s+\S+\s+\S+\s+\S+%$", out, re.M), out
    everything = cli.ok("profile", convs, "--iters", "1", "--top", "0").out
    m = re.search(r"^nodes \((\d+) of (\d+), by total time\)$", everything, re.M)
    assert m and m.group(1) == m.group(2), everything


def test_columns_fit_op_names_and_onednn_benchmark(cli, convs, tmp_path):
    """Columns are as wide as their widest shown cell (up to 64 characters), so op names such
    as aten::max_pool2d_with_indices_backward are not cut; --onednn-benchmark profiles the
    tuned deployment load as run does, and is refused with --train."""
    torch.manual_seed(0)
    pooled = tmp_path / "pooled.pt2"
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(36, 2))
    pt2rt.export(model, (torch.randn(2, 3, 8, 8),)).save(str(pooled))
    out = cli.ok("profile", pooled, "--train", "--iters", "1", "--top", "0").out
    assert "aten::max_pool2d_with_indices_backward " in out and "..." not in out, out
    tuned = cli.ok("profile", convs, "--iters", "2", "--onednn-benchmark").out
    assert re.search(r"inference, 2 calls", tuned), tuned
    cli.usage_error("profile", convs, "--train", "--onednn-benchmark",
                    mentions=["--onednn-benchmark"])


def test_profile_errors(cli, convs, tmp_path):
    cli.usage_error("profile", convs, "--iters", "0", mentions=["--iters"])
    cli.usage_error("profile", convs, "--top", "-1", mentions=["--top"])
    inference_only = tmp_path / "inf.pt2"
    pt2rt.export(_Convs(), (torch.randn(1, 3, 8, 8),), train=False).save(str(inference_only))
    cli.usage_error("profile", inference_only, "--train", mentions=["no forward/backward"])
