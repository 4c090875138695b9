"""export-cli inspect: text summary, --json keys and values, --graph node listing."""
import json

import pytest
import torch

from pt2rt import constants

SCHEMA = f"{constants.SCHEMA_MAJOR}.{constants.SCHEMA_MINOR}"


def test_text_summary(cli, archives):
    a = archives.get("cnn_bn")
    out = cli.ok("inspect", a.path).out
    assert "pt2rt archive v1" in out and f"schema {SCHEMA}" in out
    assert f"torch {torch.__version__}" in out
    assert "input 0 (x): float32[4, 1, 16, 16]" in out
    assert "output 0: float32[4, 10]" in out
    for role in ("inference", "forward", "backward"):
        assert f"graph {role}:" in out
    assert "aten::convolution" in out
    assert "ParamAOTInput(target='features.0.weight')" in out
    assert "BufferAOTInput(target='features.1.running_mean')" in out
    assert "GradAOTOutput(grad_of=ParamAOTInput(target='classifier.weight'))" in out
    assert "with eager references" in out


def test_json_has_the_documented_keys(cli, archives):
    a = archives.get("cnn_bn")
    j = json.loads(cli.ok("inspect", a.path, "--json").out)
    for key in ("archive_version", "schema_version", "producer", "graphs", "weights",
                "range_constraints", "signature", "examples"):
        assert key in j, key
    assert j["archive_version"] == "1"
    assert j["schema_version"] == {"major": constants.SCHEMA_MAJOR,
                                   "minor": constants.SCHEMA_MINOR}
    assert j["producer"]["torch_version"] == str(torch.__version__)
    roles = [g["role"] for g in j["graphs"]]
    assert sorted(roles) == ["backward", "forward", "inference"]
    for g in j["graphs"]:
        assert g["num_nodes"] > 0
        for io in g["inputs"] + g["outputs"]:
            assert "name" in io and "kind" in io["descriptor"]
    fwd = next(g for g in j["graphs"] if g["role"] == "forward")
    kinds = {io["descriptor"]["kind"] for io in fwd["outputs"]}
    assert {"Plain", "InputMutation", "Saved"} <= kinds
    bwd = next(g for g in j["graphs"] if g["role"] == "backward")
    grads = [io["descriptor"] for io in bwd["outputs"] if io["descriptor"]["kind"] == "Grad"]
    assert {g["of"]["fqn"] for g in grads} == {n for n, p in a.model.named_parameters()}


def test_json_weights_match_the_model(cli, archives):
    a = archives.get("frozen")
    j = json.loads(cli.ok("inspect", a.path, "--json").out)
    params = dict(a.model.named_parameters())
    buffers = dict(a.model.named_buffers())
    assert [w["fqn"] for w in j["weights"]] == list(params) + list(buffers)
    for w in j["weights"]:
        t = params.get(w["fqn"], buffers.get(w["fqn"]))
        assert w["shape"] == list(t.shape)
        assert w["dtype"] == str(t.dtype).replace("torch.", "")
        assert w["kind"] == ("parameter" if w["fqn"] in params else "buffer")
        assert w["requires_grad"] == (w["fqn"] in params and params[w["fqn"]].requires_grad)
    sig = j["signature"]
    assert sig["num_parameters"] == len(params)
    assert sig["num_trainable"] == sum(p.requires_grad for p in params.values())
    assert j["range_constraints"] == []


def test_two_inputs_two_outputs(cli, archives):
    a = archives.get("two_io")
    j = json.loads(cli.ok("inspect", a.path, "--json").out)
    ins, outs = j["signature"]["inputs"], j["signature"]["outputs"]
    assert [i["shape"] for i in ins] == [list(t.shape) for t in a.args]
    eager = a.model(*a.args)
    assert [o["dtype"] for o in outs] == [str(t.dtype).replace("torch.", "") for t in eager]


def test_graph_listing(cli, archives):
    a = archives.get("mlp")
    out = cli.ok("inspect", a.path, "--graph", "inference").out
    assert out.startswith("graph inference(")
    assert "= aten::addmm(%fc1.bias, %x, %" in out or "= aten::addmm(" in out
    assert "PlainAOTOutput(idx=0)" in out
    bwd = cli.ok("inspect", a.path, "--graph", "backward").out
    assert "TangentAOTInput(output=PlainAOTOutput(idx=0))" in bwd
    j = json.loads(cli.ok("inspect", a.path, "--graph", "forward", "--json").out)
    assert j["role"] == "forward" and len(j["nodes"]) == j["num_nodes"]


def test_bad_graph_role(cli, archives):
    cli.usage_error("inspect", archives.get("mlp").path, "--graph", "sideways",
                    mentions=["sideways"])


def test_missing_graph_role(cli, archives, tmp_path):
    model, args = __import__("models").build("mlp")
    import pt2rt
    path = tmp_path / "infer_only.pt2"
    pt2rt.export(model, args, train=False).save(str(path))
    cli.usage_error("inspect", path, "--graph", "backward", mentions=["backward"])
    assert "graph forward" not in cli.ok("inspect", path).out
