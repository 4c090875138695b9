"""export-cli strip --inference-only: a smaller deployment copy that runs and verifies like
the original in eval mode, and that train refuses clearly."""
import json

import torch
from torch.testing import assert_close

import pt2rt
from conftest import save_tensors


def test_strip_inference_only(cli, archives, tmp_path):
    a = archives.get("cnn_bn")  # BatchNorm: inference and training graphs differ
    out = tmp_path / "deploy.pt2"
    r = cli.ok("strip", a.path, out, "--inference-only")
    assert f"wrote {out}" in r.out
    assert out.stat().st_size < a.path.stat().st_size
    facts = json.loads(cli.ok("inspect", out, "--json").out)
    assert [g["role"] for g in facts["graphs"]] == ["inference"]
    assert facts["examples"] and all(e["has_references"] for e in facts["examples"])
    # the stripped copy runs the same inference as the original ...
    x = save_tensors(tmp_path / "in.pt", (torch.randn(*a.args[0].shape),))
    outs = []
    for path in (a.path, out):
        cli.ok("run", path, "--inputs", x, "--outputs", tmp_path / "o.pt")
        outs.append(torch.load(str(tmp_path / "o.pt"))[0])
    assert_close(outs[0], outs[1], rtol=0, atol=0)
    # ... verifies against the eval-mode references it kept ...
    v = cli.ok("verify", out)
    assert "OK:" in v.out
    # ... and cannot train, or take a training step
    data = save_tensors(tmp_path / "d.pt", (torch.randn(8, *a.args[0].shape[1:]),
                                             torch.randint(0, 10, (8,))))
    cli.usage_error("train", out, "--data", data, mentions=["no forward/backward graphs"])
    assert pt2rt.load(str(out)) is not None  # the Python reader reads it too


def test_strip_errors(cli, archives, tmp_path):
    a = archives.get("mlp")
    cli.usage_error("strip", a.path, tmp_path / "o.pt2", mentions=["--inference-only"])
    cli.usage_error("strip", a.path, mentions=["<out.pt2>"])
    cli.usage_error("strip", tmp_path / "none.pt2", tmp_path / "o.pt2", "--inference-only",
                    mentions=["none.pt2"])
    train_only = tmp_path / "train_only.pt2"
    pt2rt.export(a.model, a.args, inference=False).save(str(train_only))
    cli.usage_error("strip", train_only, tmp_path / "o.pt2", "--inference-only",
                    mentions=["no inference graph"])
    assert not (tmp_path / "o.pt2").exists()


def _operators(path):
    from pt2rt.format.archive import ArchiveReader
    from pt2rt.format.deserialize import read_program
    with ArchiveReader(str(path)) as reader:
        return {o.qualified() for o in read_program(reader.read("program.fb")).operators}


def test_strip_drops_the_operators_only_training_graphs_call(cli, archives, tmp_path):
    """Loading resolves every operator of the table, so the deployment copy keeps only the
    inference graph's: it then loads on a LibTorch that lacks a backward kernel (a custom op's
    backward)."""
    a = archives.get("cnn_bn")
    out = tmp_path / "deploy.pt2"
    cli.ok("strip", a.path, out, "--inference-only")
    before, after = _operators(a.path), _operators(out)
    assert "aten::convolution_backward" in before and "aten::convolution" in after
    assert not [o for o in after if "backward" in o], after
    assert after < before
    assert "OK:" in cli.ok("verify", out).out
