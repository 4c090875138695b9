"""The Program: FlatBuffer round trip, flatc decoding, enums equal to the schema's, op table
and argument conventions, value metadata, debug info, bundled examples, extra files."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile

import pytest
import torch

import models
import pt2rt
from pt2rt.ir import constants, dtypes
from pt2rt.format.deserialize import read_program
from pt2rt.ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from pt2rt.ir.graph_ir import GraphRole, WeightKind
from pt2rt.ir.program_ir import ArgKind, ValueKind
from pt2rt.format.serialize import write_program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "schema", "pt2rt.fbs")


def _fb_enum(name):
    import importlib
    cls = getattr(importlib.import_module(f"pt2rt.fb.{name}"), name)
    return {k: v for k, v in vars(cls).items() if not k.startswith("_")}


@pytest.mark.parametrize("py,fb", [(InputKind, "InputKind"), (OutputKind, "OutputKind"),
                                   (GraphRole, "GraphRole"), (WeightKind, "WeightKind"),
                                   (ArgKind, "ArgumentValue"), (ValueKind, "ValueKind")])
def test_python_enums_equal_schema(py, fb):
    expected = {k: v for k, v in _fb_enum(fb).items() if k != "NONE"}
    assert {m.name: int(m) for m in py} == expected


def test_scalar_type_numbering_is_c10s():
    st = _fb_enum("ScalarType")
    names = {"Byte": torch.uint8, "Char": torch.int8, "Short": torch.int16, "Int": torch.int32,
             "Long": torch.int64, "Half": torch.float16, "Float": torch.float32,
             "Double": torch.float64, "Bool": torch.bool, "BFloat16": torch.bfloat16,
             "ComplexFloat": torch.complex64, "ComplexDouble": torch.complex128}
    for name, dtype in names.items():
        assert dtypes.scalar_type(dtype) == st[name], name


def test_descriptor_spelling():
    p = InputDescriptor.param("fc.weight")
    assert str(p) == "ParamAOTInput(target='fc.weight')"
    assert str(OutputDescriptor.grad(p)) == \
        "GradAOTOutput(grad_of=ParamAOTInput(target='fc.weight'))"
    assert str(InputDescriptor.tangent(OutputDescriptor.plain(1))) == \
        "TangentAOTInput(output=PlainAOTOutput(idx=1))"
    assert {p: 1}[InputDescriptor.param("fc.weight")] == 1  # hashable by value


@pytest.mark.parametrize("name", ["cnn_bn", "two_io"])
def test_flatbuffer_round_trip(exports, name):
    e = exports.get(name).exported
    decoded = read_program(e.program_bytes)
    assert decoded == e.program
    assert write_program(decoded) == e.program_bytes


def test_flatc_decodes_program(exports, tmp_path):
    flatc = shutil.which("flatc")
    assert flatc, "flatc (flatbuffers-compiler) is required"
    with zipfile.ZipFile(exports.get("mlp").path) as z:
        z.extract(constants.PROGRAM_ENTRY, tmp_path)
    proc = subprocess.run([flatc, "--json", "--strict-json", "--raw-binary", SCHEMA, "--",
                           constants.PROGRAM_ENTRY], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "program.json") as f:
        doc = json.load(f)
    assert doc["schema_version"]["major"] == constants.SCHEMA_MAJOR
    assert [g.get("role", "Inference") for g in doc["graphs"]] == \
        ["Inference", "Forward", "Backward"]
    assert doc["producer"]["torch_version"] == str(torch.__version__)
    assert any(o["name"] == "aten::addmm" for o in doc["operators"])


def test_tensor_data_is_64_byte_aligned(exports):
    from pt2rt.fb.Program import Program
    buf = exports.get("cnn_bn").exported.program_bytes
    p = Program.GetRootAs(buf, 0)
    ex = p.Examples(0)
    tds = [ex.Inputs(i) for i in range(ex.InputsLength())]
    r = ex.References()
    tds += [r.Grads(i).Tensor() for i in range(r.GradsLength())]
    assert tds
    for t in tds:
        pos = t._tab.Vector(t._tab.Offset(8))
        assert pos % constants.DATA_ALIGNMENT == 0


# ---------------------------------------------------------------------------- conventions

class _Var(torch.nn.Module):
    def forward(self, x):
        return x.var(dim=1, unbiased=True)


def test_op_table_and_arguments(exports):
    prog = exports.get("cnn_bn").loaded.program
    keys = [(o.name, o.overload) for o in prog.operators]
    assert len(keys) == len(set(keys))
    assert ("aten::convolution", "") in keys and ("aten::add", "Tensor") in keys
    assert all(o.name.startswith(("aten::", "prim::")) for o in prog.operators)
    names = {o.qualified() for o in prog.operators}
    assert {"aten::native_batch_norm_backward", "aten::convolution_backward"} <= names
    assert "aten::copy_" not in names  # functionalized: mutations are InputMutation outputs
    for g in prog.graphs:
        for n in g.nodes:
            op = prog.operators[n.op]
            schema = pt2rt.format.executor.resolve_op(op)._schema
            assert len(n.outputs) == len(schema.returns), op.qualified()
            positional = [a.name for a in schema.arguments if not a.kwarg_only]
            given = [a.name for a in n.args if not a.kwarg_only]
            assert given == positional[:len(given)], op.qualified()
            kw = {a.name for a in schema.arguments if a.kwarg_only}
            assert {a.name for a in n.args if a.kwarg_only} <= kw
    fw = prog.graph(GraphRole.Forward)
    ops = [prog.operators[n.op].qualified() for n in fw.nodes]
    # Keyword-only arguments are stored by name (BatchNorm no longer has one: a variance).
    var_prog = pt2rt.export(_Var(), (torch.randn(3, 4),), train=False).program
    var = next(n for n in var_prog.graph(GraphRole.Inference).nodes
               if var_prog.operators[n.op].qualified() == "aten::var.correction")
    # the exporting torch's schema decides the kind: int? on 1.13, Scalar? on 2.x
    correction = next(a for a in torch.ops.aten.var.correction._schema.arguments
                      if a.name == "correction")
    kind = ArgKind.IntArg if "int" in str(correction.type) else ArgKind.ScalarArg
    assert [(a.name, a.kind, a.kwarg_only) for a in var.args][-1] == ("correction", kind, True)
    # num_batches_tracked + 1: a Python number for a Tensor argument -> ScalarArg
    add = next(n for n, o in zip(fw.nodes, ops) if o == "aten::add.Tensor"
               and n.args[1].kind is ArgKind.ScalarArg)
    assert add.args[1].value == 1
    bn = fw.nodes[ops.index("aten::native_batch_norm")]
    assert [a.kind for a in bn.args[3:5]] == [ArgKind.NoneArg, ArgKind.NoneArg]


def test_value_metadata(exports):
    c = exports.get("two_io")
    fw = c.loaded.graph(GraphRole.Forward)
    by_desc = {gi.descriptor: fw.values[gi.value] for gi in fw.inputs}
    x = by_desc[InputDescriptor.plain(0)]
    assert x.name == "x" and x.meta.static_sizes() == [4, 8]
    assert x.meta.static_strides() == [8, 1] and x.meta.storage_offset.value == 0
    assert x.meta.device.type == "cpu" and x.meta.dtype == dtypes.scalar_type(torch.float32)
    w = by_desc[InputDescriptor.param("a.weight")]
    assert w.name == "a.weight" and w.meta.requires_grad
    outs = {go.descriptor: fw.values[go.value] for go in fw.outputs}
    argmax = outs[OutputDescriptor.plain(1)]
    assert argmax.meta.dtype == dtypes.scalar_type(torch.int64) and not argmax.meta.requires_grad
    assert outs[OutputDescriptor.plain(0)].meta.requires_grad


def test_debug_info(exports):
    prog = exports.get("cnn_bn").loaded.program
    for role in (GraphRole.Forward, GraphRole.Backward, GraphRole.Inference):
        g = prog.graph(role)
        bn = [n for n in g.nodes if prog.operators[n.op].name.startswith("aten::native_batch_norm")]
        assert bn, role
        for n in bn:
            assert n.debug.module_fqn in ("features.1", "features.5"), (role, n.debug)
            assert n.debug.nn_module_stack[0] == "features: Sequential"
            assert "batchnorm.py" in n.debug.stack_trace
            assert n.debug.fx_name


def test_producer_and_metadata(exports):
    prog = exports.get("mlp", "min_cut").loaded.program
    assert prog.producer.torch_version == str(torch.__version__)
    assert prog.producer.exporter_version == pt2rt.__version__
    assert prog.producer.capture == pt2rt.capture.capture.select_backend().CAPTURE_NAME
    assert prog.producer.python_version
    assert prog.metadata["partitioner"] == "min_cut"
    assert (prog.schema_major, prog.schema_minor) == (constants.SCHEMA_MAJOR,
                                                      constants.SCHEMA_MINOR)


def test_archive_entries_are_only_known_kinds(exports):
    with zipfile.ZipFile(exports.get("cnn_bn").path) as z:
        names = z.namelist()
    n_weights = len(exports.get("cnn_bn").loaded.program.weights)
    assert names == [constants.ARCHIVE_FORMAT_ENTRY, constants.ARCHIVE_VERSION_ENTRY,
                     constants.PROGRAM_ENTRY] + [f"weights/{i}" for i in range(n_weights)]


def test_extra_files_and_options(tmp_path):
    model, args = models.build("mlp")
    e = pt2rt.export(model, args, train=False, bundle_examples=False)
    assert [g.role for g in e.program.graphs] == [GraphRole.Inference]
    assert e.program.examples == []
    path = str(tmp_path / "inf.pt2")
    e.save(path, extra={"labels.txt": b"cat\ndog\n"})
    loaded = pt2rt.load(path)
    assert loaded.extra == {"labels.txt": b"cat\ndog\n"}
    from pt2rt.format.archive import ArchiveReader
    with ArchiveReader(path) as ar:
        ar.check_layout("extra/labels.txt")
    with pytest.raises(KeyError, match="Forward"):
        loaded.run_forward(*args)
    e2 = pt2rt.export(model, args, inference=False)
    assert [g.role for g in e2.program.graphs] == [GraphRole.Forward, GraphRole.Backward]
    assert e2.program.examples[0].references.outputs == []
