"""export-cli inspect: the concise summary, --json keys and values, --graph listings and
--graph --json structured nodes (checked against the Python reader's decoding)."""
import json
import os
import re
import zipfile

import pytest
import torch

import pt2rt
from pt2rt.ir import constants, dtypes
from pt2rt.ir.graph_ir import GraphRole

SCHEMA = f"{constants.SCHEMA_MAJOR}.{constants.SCHEMA_MINOR}"


def reader_program(path):
    """The archive's Program as the Python reader decodes it (an independent decoder)."""
    return pt2rt.load(str(path)).program


def dtype_name(code: int) -> str:
    return str(dtypes.to_dtype(code)).replace("torch.", "")


def test_text_summary_is_concise(cli, archives):
    a = archives.get("cnn_bn")
    out = cli.ok("inspect", a.path).out
    assert "pt2rt archive v1" in out and f"schema {SCHEMA}" in out
    assert f"torch {torch.__version__}" in out
    # the signature: user inputs and outputs with name, dtype and shape
    assert "input 0 (x): float32[4, 1, 16, 16]" in out
    # output 0 with its stored name (a lone tensor: "output") and its graph value's name
    assert re.search(r"^  output 0 output \(\w+\): float32\[4, 10\]$", out, re.M), out
    assert "range constraints: none" in out
    params = dict(a.model.named_parameters())
    buffers = dict(a.model.named_buffers())
    numel = sum(p.numel() for p in params.values())
    assert (f"weights: {len(params) + len(buffers)} tensors, " in out and
            f": {len(params)} parameters ({len(params)} trainable, {numel} of {numel} elements), "
            f"{len(buffers)} buffers, 0 constants\n" in out), out
    # every graph with its node count (as the Python reader decodes the archive)
    prog = reader_program(a.path)
    for g in prog.graphs:
        line = next(s for s in out.splitlines() if s.startswith(f"  {g.role.name.lower()}: "))
        assert line.startswith(f"  {g.role.name.lower()}: {len(g.nodes)} nodes; inputs: "), line
    fwd = next(s for s in out.splitlines() if s.startswith("  forward: "))
    assert f"{len(params)} Param" in fwd and f"{len(buffers)} Buffer" in fwd
    assert "Saved" in fwd and "InputMutation" in fwd
    assert "with eager references" in out
    assert out.splitlines()[-1] == "training state: none"
    # no listing: no node, no graph input or output, no op histogram
    assert "aten::" not in out and not re.search(r"^\s*%", out, re.M)
    assert "AOTInput(" not in out and "AOTOutput(" not in out
    assert len(out.splitlines()) < 40, out


def test_summary_size_breakdown(cli, archives):
    a = archives.get("cnn_bn")
    out = cli.ok("inspect", a.path).out
    size = os.path.getsize(a.path)
    assert f"({size} bytes, " in out
    j = json.loads(cli.ok("inspect", a.path, "--json").out)
    assert j["archive_bytes"] == size
    parts = {p["part"]: p for p in j["size"]}
    assert sum(p["bytes"] for p in j["size"] if not p["within_program"]) == size
    weights = sum(t.numel() * t.element_size() for t in
                  list(a.model.parameters()) + list(a.model.buffers()))
    assert parts["weights/"]["bytes"] == weights == j["weights_total_bytes"]
    with zipfile.ZipFile(a.path) as z:
        assert parts["program.fb"]["bytes"] == z.getinfo("program.fb").compress_size
    examples = parts["bundled examples"]
    assert examples["within_program"]
    # the example's input is inside program.fb, and the references hold eval outputs at least
    x_bytes = sum(t.numel() * t.element_size() for t in a.args)
    assert x_bytes < examples["bytes"] < parts["program.fb"]["bytes"]
    for name in ("weights/", "program.fb", "bundled examples", "zip structure"):
        assert re.search(rf"^ +{re.escape(name)} +[0-9.]+ (B|KiB|MiB)  ", out, re.M), name


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


def test_output_names(cli, named_outputs):
    """Schema 1.4 output names next to the index, in text and JSON (signature and graphs);
    an archive written before 1.4 shows the positional names Model::signature() gives."""
    import signature_models
    out = cli.ok("inspect", named_outputs.path).out
    shapes = ["float32[4, 4]", "float32[4, 8]", "float32[4]"]
    for i, (name, shape) in enumerate(zip(signature_models.OUTPUT_NAMES, shapes)):
        line = rf"^  output {i} {re.escape(name)} \(\w+\): {re.escape(shape)}$"
        assert re.search(line, out, re.M), out
    j = json.loads(cli.ok("inspect", named_outputs.path, "--json").out)
    outs = j["signature"]["outputs"]
    assert [o["output_name"] for o in outs] == signature_models.OUTPUT_NAMES
    assert all(o["name"] and o["name"] != o["output_name"] for o in outs)  # the value names
    assert "output_name" not in j["signature"]["inputs"][0]
    for role in ("inference", "forward"):
        g = json.loads(cli.ok("inspect", named_outputs.path, "--graph", role, "--json").out)
        plain = [o for o in g["outputs"] if o["descriptor"]["kind"] == "Plain"]
        assert [o["output_name"] for o in plain] == signature_models.OUTPUT_NAMES, role
        assert all("output_name" not in o for o in g["outputs"]
                   if o["descriptor"]["kind"] != "Plain")
    old = cli.ok("inspect", named_outputs.path_1_3).out
    assert "schema 1.3" in old
    for i in range(3):
        assert re.search(rf"^  output {i} \[{i}\] \(\w+\): ", old, re.M), old


def test_graph_listing(cli, archives):
    a = archives.get("mlp")
    out = cli.ok("inspect", a.path, "--graph", "inference").out
    assert out.startswith("graph inference(")
    assert "= aten::addmm(" in out
    assert "PlainAOTOutput(idx=0)" in out
    g = reader_program(a.path).graph(GraphRole.Inference)
    assert sum(line.lstrip().startswith("%") and " = " in line
               for line in out.splitlines()) == len(g.nodes)
    assert out.splitlines()[-1].startswith(f"{len(g.nodes)} nodes; ops: ")
    bwd = cli.ok("inspect", a.path, "--graph", "backward").out
    assert "TangentAOTInput(output=PlainAOTOutput(idx=0))" in bwd
    assert "GradAOTOutput(grad_of=ParamAOTInput(target='fc1.weight'))" in bwd


@pytest.mark.parametrize("role", ["inference", "forward", "backward"])
def test_graph_json_has_structured_nodes(cli, archives, role):
    a = archives.get("cnn_bn")
    j = json.loads(cli.ok("inspect", a.path, "--graph", role, "--json").out)
    prog = reader_program(a.path)
    g = prog.graph(GraphRole[role.capitalize()])
    assert j["role"] == role
    assert j["num_nodes"] == len(j["nodes"]) == len(g.nodes)
    assert [n["op"] for n in j["nodes"]] == [prog.operators[n.op].qualified() for n in g.nodes]
    assert sum(j["op_histogram"].values()) == len(g.nodes)
    # graph inputs and outputs: names, descriptors, dtypes and shapes as decoded in Python
    for io, ref in zip(j["inputs"] + j["outputs"], g.inputs + g.outputs):
        assert io["descriptor"]["repr"] == str(ref.descriptor)
        if ref.value < 0:
            assert io["name"] is None and io["kind"] == "None"
            continue
        v = g.values[ref.value]
        assert io["name"] == v.name
        if v.meta is not None:
            assert io["dtype"] == dtype_name(v.meta.dtype)
            assert io["shape"] == v.meta.static_sizes()
    assert len(j["inputs"]) == len(g.inputs) and len(j["outputs"]) == len(g.outputs)
    # each node: its outputs' names and metadata; every value it reads defined before it
    defined = {io["name"] for io in j["inputs"]}
    for n, ref in zip(j["nodes"], g.nodes):
        assert [o["name"] for o in n["outputs"]] == [g.values[i].name for i in ref.outputs]
        for o, i in zip(n["outputs"], ref.outputs):
            meta = g.values[i].meta
            if meta is not None:
                assert o["dtype"] == dtype_name(meta.dtype) and o["shape"] == meta.static_sizes()
        assert [arg["arg"] for arg in n["inputs"]] == [arg.name for arg in ref.args]
        for arg in n["inputs"]:
            assert sum(k in arg for k in ("value", "values", "constant")) == 1, arg
            reads = [arg["value"]] if "value" in arg else arg.get("values", [])
            for name in reads:
                assert name is None or isinstance(name, int) or name in defined, (n, name)
        defined.update(o["name"] for o in n["outputs"])
    # the graph's outputs are produced by it
    assert {o["name"] for o in j["outputs"] if o["name"] is not None} <= defined


def test_graph_json_constants(cli, archives):
    a = archives.get("cnn_bn")
    j = json.loads(cli.ok("inspect", a.path, "--graph", "inference", "--json").out)
    conv = next(n for n in j["nodes"] if n["op"] == "aten::convolution")
    args = {arg["arg"]: arg for arg in conv["inputs"]}
    assert args["input"]["value"] == "x"
    assert args["weight"]["value"] == "features.0.weight"
    conv_module = a.model.features[0]
    assert args["stride"]["constant"] == list(conv_module.stride)
    assert args["padding"]["constant"] == list(conv_module.padding)
    assert args["transposed"]["constant"] is False
    assert args["groups"]["constant"] == conv_module.groups


def test_bad_graph_role(cli, archives):
    cli.usage_error("inspect", archives.get("mlp").path, "--graph", "sideways",
                    mentions=["sideways"])


def test_missing_graph_role(cli, archives, tmp_path):
    model, args = __import__("models").build("mlp")
    path = tmp_path / "infer_only.pt2"
    pt2rt.export(model, args, train=False).save(str(path))
    cli.usage_error("inspect", path, "--graph", "backward", mentions=["backward"])
    cli.usage_error("inspect", path, "--graph", "forward", "--json", mentions=["forward"])
    out = cli.ok("inspect", path).out
    assert "  inference: " in out and "  forward: " not in out


def test_summary_cuts_long_metadata(cli, tmp_path):
    """Metadata is the archive's: long values are cut and many keys left to --json."""
    from pt2rt.format.serialize import write_program
    model, args = __import__("models").build("mlp")
    exported = pt2rt.export(model, args, train=False)
    exported.program.metadata.update({f"key{i:02d}": "v" * 300 for i in range(40)})
    exported.program_bytes = write_program(exported.program)
    path = tmp_path / "meta.pt2"
    exported.save(str(path))
    out = cli.ok("inspect", path).out
    meta = json.loads(cli.ok("inspect", path, "--json").out)["metadata"]
    assert meta["key39"] == "v" * 300 and len(meta) > 40
    assert "  key00: " + "v" * 100 + "... (300 bytes)\n" in out
    assert f"  ... {len(meta) - 16} more (--json lists all)\n" in out
    assert "key39" not in out
    assert len(out.splitlines()) < 45, out
