"""Dynamic shapes end to end: pt2rt.Dim / dynamic_shapes= at export, export-cli run at sizes
across the range (inference and a training step vs eager), InputError outside it; the spec
errors of pt2rt.export. Both lanes; on torch 1.13 an op without a symbolic-shape rule is refused
by name."""
import copy
import json
import re

import pytest
import torch
from torch.testing import assert_close

import pt2rt
from conftest import eager_train_step, save_tensors

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
needs_torch2 = pytest.mark.skipif(not TORCH2, reason="symbolic capture: torch >= 2.9 lane")


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 3))


BATCH = pt2rt.Dim("batch", min=1, max=64)


@pytest.fixture(scope="module")
def mlp_archive(tmp_path_factory):
    model = mlp()
    path = tmp_path_factory.mktemp("dyn") / "mlp_dyn.pt2"
    pt2rt.export(model, (torch.randn(5, 2, 4),),
                 dynamic_shapes={"input": {0: BATCH}}).save(str(path))
    return model, path


def test_program_carries_symbol_and_range(mlp_archive):
    _, path = mlp_archive
    p = pt2rt.load(str(path)).program
    assert [(s.name, s.hint) for s in p.symbols] == [("batch", 5)]
    assert [(r.symbol, r.min, r.max) for r in p.range_constraints] == [(0, 1, 64)]


def test_inspect_prints_symbolic_shapes_and_ranges(cli, mlp_archive):
    _, path = mlp_archive
    r = cli.ok("inspect", path)
    assert "input 0 (input): float32[batch, 2, 4]" in r.out, r.out
    assert re.search(r"^  output 0 output \(\w+\): float32\[batch, 3\]$", r.out, re.M), r.out
    assert "1 <= batch <= 64" in r.out, r.out
    # the structured graph keeps the symbolic dims by name, on inputs, nodes and outputs
    j = json.loads(cli.ok("inspect", path, "--graph", "forward", "--json").out)
    plain = [io for io in j["inputs"] if io["descriptor"]["kind"] == "Plain"]
    assert [(io["type"], io["shape"]) for io in plain] == [("float32[batch, 2, 4]",
                                                            ["batch", 2, 4])]
    out = next(io for io in j["outputs"] if io["descriptor"]["kind"] == "Plain")
    assert out["shape"] == ["batch", 3]
    addmm = [n for n in j["nodes"] if n["op"] == "aten::addmm"]
    assert len(addmm) == 2 and [n["outputs"][0]["shape"] for n in addmm] == [["batch", 16],
                                                                             ["batch", 3]]


@pytest.fixture(scope="module")
def cnn_archive(tmp_path_factory):
    """The digits-style CNN with BatchNorm (tests/python/models.py cnn_bn), dynamic batch."""
    import models
    model, args = models.build("cnn_bn")
    path = tmp_path_factory.mktemp("dyn") / "cnn_dyn.pt2"
    pt2rt.export(model, args, dynamic_shapes=({0: BATCH},)).save(str(path))
    return model, path, tuple(args[0].shape[1:])


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_cnn_bn_parity_at_sizes_in_range(cli, cnn_archive, tmp_path, batch):
    model, path, rest = cnn_archive
    # batch 64: conv weight grads ~30 differ from eager by ~1e-4 (summation order), exactly
    # as the static archive's do at that batch
    check_train_and_eval_parity(cli, model, path, tmp_path, batch, rest, 10, tol=1e-4)


def check_train_and_eval_parity(cli, model, path, tmp_path, batch, rest, classes, tol):
    """export-cli run at ``batch``: eval outputs, then one training step (outputs, parameter
    gradients, buffers) vs eager."""
    torch.manual_seed(batch)
    x = torch.randn(batch, *rest)
    files = {k: tmp_path / f"{k}.pt" for k in ("in", "out", "g", "grads", "buffers")}
    save_tensors(files["in"], [x])
    cli.ok("run", path, "--inputs", files["in"], "--outputs", files["out"])
    with torch.no_grad():
        assert_close(torch.load(str(files["out"]))[0], copy.deepcopy(model).eval()(x),
                     rtol=tol, atol=tol)
    g = torch.randn(batch, classes)
    cli.ok("run", path, "--train", "--inputs", files["in"], "--outputs", files["out"],
           "--grad-outputs", save_tensors(files["g"], [g]), "--grads", files["grads"],
           "--buffers", files["buffers"])
    outs, grads, buffers = eager_train_step(model, (x,), [g])
    assert_close(torch.load(str(files["out"]))[0], outs[0], rtol=tol, atol=tol)
    got = torch.load(str(files["grads"]))
    assert list(got) == list(grads)
    for n in grads:
        assert_close(got[n], grads[n], rtol=tol, atol=tol, msg=n)
    got = torch.load(str(files["buffers"]))
    for n in buffers:
        assert_close(got[n], buffers[n], rtol=tol, atol=tol, msg=n)


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_run_inference_and_training_at_sizes_in_range(cli, mlp_archive, tmp_path, batch):
    model, path = mlp_archive
    torch.manual_seed(batch)
    x = torch.randn(batch, 2, 4)
    out = tmp_path / "out.pt"
    cli.ok("run", path, "--inputs", save_tensors(tmp_path / "in.pt", [x]), "--outputs", out)
    with torch.no_grad():
        assert_close(torch.load(str(out))[0], copy.deepcopy(model).eval()(x))
    g = torch.randn(batch, 3)
    grads = tmp_path / "grads.pt"
    cli.ok("run", path, "--train", "--inputs", tmp_path / "in.pt", "--grad-outputs",
           save_tensors(tmp_path / "g.pt", [g]), "--outputs", out, "--grads", grads)
    outs, want, _ = eager_train_step(model, (x,), [g])
    assert_close(torch.load(str(out))[0], outs[0])
    got = torch.load(str(grads))
    assert list(got) == list(want)
    for n in want:
        assert_close(got[n], want[n], msg=n)


@pytest.mark.parametrize("batch", [0, 65])
def test_out_of_range_is_input_error(cli, mlp_archive, tmp_path, batch):
    _, path = mlp_archive
    r = cli("run", path, "--inputs", save_tensors(tmp_path / "in.pt", [torch.randn(batch, 2, 4)]))
    assert r.rc != 0
    assert f"input 0 (input) dim 0: batch = {batch} is outside [1, 64]" in r.err, str(r)


class Wide(torch.nn.Module):
    """relu(x * w) on [batch, 4096]: 16 KiB per batch row per tensor, little work per byte."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 4096))

    def forward(self, x):
        return torch.relu(x * self.w)


@pytest.fixture(scope="module")
def wide_archive(tmp_path_factory):
    model = Wide()
    path = tmp_path_factory.mktemp("dyn") / "wide_dyn.pt2"
    pt2rt.export(model, (torch.randn(4, 4096),),
                 dynamic_shapes={"x": {0: pt2rt.Dim("batch", min=1, max=2048)}}).save(str(path))
    return model, path


def test_call_over_the_run_bounds_is_refused_before_running(cli, wide_archive, tmp_path):
    """Over the default 32 MiB at batch 2048, within them at batch 1: the archive loads and each
    call is bounded at its own size (rounded up to 3 significant bits: 2000 -> 2048)."""
    model, path = wide_archive
    small = torch.randn(4, 4096)
    out = tmp_path / "out.pt"
    cli.ok("run", path, "--inputs", save_tensors(tmp_path / "small.pt", [small]), "--outputs", out)
    with torch.no_grad():
        assert_close(torch.load(str(out))[0], model(small))
    big = torch.randn(2000, 4096)
    save_tensors(tmp_path / "big.pt", [big])
    for train in ([], ["--train"]):
        cli.usage_error("run", path, "--inputs", tmp_path / "big.pt", *train,
                        mentions=["a call with batch=2000 is over the run bounds",
                                  "checked at batch=2048", "--max-run-bytes", "--trusted"])
    cli.ok("run", path, "--inputs", tmp_path / "big.pt", "--outputs", out,
           "--max-run-bytes", "1000000000")
    with torch.no_grad():
        assert_close(torch.load(str(out))[0], model(big))


def test_specialised_dim_is_refused():
    class Fixed(torch.nn.Module):
        def forward(self, x):
            return x.view(6, 2).sum(0)
    with pytest.raises(pt2rt.ExportError, match=r"input 'x' dim 0 \(n\).*specialises"):
        pt2rt.export(Fixed(), (torch.randn(3, 4),), train=False,
                     dynamic_shapes={"x": {0: pt2rt.Dim("n", min=2, max=10)}})


def test_branch_on_a_dynamic_size_is_refused_unless_the_range_allows_it():
    class Branch(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] > 3 else x
    with pytest.raises(pt2rt.ExportError, match=r"input 'x' dim 0 \(n\): the model only works "):
        pt2rt.export(Branch(), (torch.randn(5, 4),), train=False,
                     dynamic_shapes={"x": {0: pt2rt.Dim("n", min=2, max=10)}})
    pt2rt.export(Branch(), (torch.randn(5, 4),), train=False,
                 dynamic_shapes={"x": {0: pt2rt.Dim("n", min=4, max=10)}})


def test_example_size_one_is_refused_by_name():
    with pytest.raises(pt2rt.ExportError, match=r"input 'input' dim 0 \(batch\).*example size "
                                                r"1 is specialised"):
        pt2rt.export(mlp(), (torch.randn(1, 2, 4),), train=False,
                     dynamic_shapes={"input": {0: BATCH}})


@pytest.mark.skipif(TORCH2, reason="torch 1.13 lane: its symbolic-shape rules are pt2rt's")
def test_torch1_op_without_symbolic_rule_is_refused_by_name():
    class Rows(torch.nn.Module):
        def forward(self, x):
            return x.unbind(0)[0]   # as many results as rows: no rule over a dynamic dim
    with pytest.raises(pt2rt.ExportError, match=r"aten\.unbind\.int has no symbolic-shape rule"
                                                r".*exported with static shapes"):
        pt2rt.export(Rows(), (torch.randn(5, 4),), train=False,
                     dynamic_shapes={"x": {0: pt2rt.Dim("n")}})


@pytest.mark.parametrize("spec, message", [
    ({"y": {0: BATCH}}, "unknown argument 'y'; forward\\(\\) takes input"),
    ({"input": {3: BATCH}}, "dim 3 is out of range for input 'input' of shape \\[5, 2, 4\\]"),
    ({"input": {0: pt2rt.Dim("b", min=6, max=9)}}, "example size 5 is outside b's range \\[6, 9\\]"),
    (({0: BATCH}, {0: BATCH}), "2 entries but the model takes 1"),
    ({"input": {0: BATCH, 1: BATCH}}, "differs from input 'input' dim 0's 5"),
    ({"input": {1: BATCH + 1}}, "derived dim's root 'batch' marks no input dim"),
])
def test_spec_errors_name_argument_dim_and_reason(spec, message):
    with pytest.raises(pt2rt.ExportError, match=message):
        pt2rt.export(mlp(), (torch.randn(5, 2, 4),), dynamic_shapes=spec)


def test_dim_min_greater_than_max():
    with pytest.raises(pt2rt.ExportError, match="min = 5 > max = 4"):
        pt2rt.Dim("b", min=5, max=4)


def test_cli_dynamic_syntax():
    from pt2rt.capture.dynamic import DerivedDim, parse_cli
    spec = parse_cli(["x:0=batch[1,512]", "y:0=batch", "y:1=2*batch+1", "z:1=n[2,]"])
    b = spec["x"][0]
    assert (b.name, b.min, b.max) == ("batch", 1, 512) and spec["y"][0] is b
    assert isinstance(spec["y"][1], DerivedDim) and spec["y"][1].value(3) == 7
    assert spec["z"][1].max == 2 ** 63 - 1
    with pytest.raises(pt2rt.ExportError, match="declared by an earlier"):
        parse_cli(["x:0=batch+1"])
    with pytest.raises(pt2rt.ExportError, match="expected ARG:DIM=NAME"):
        parse_cli(["x=batch[1,2]"])


def test_export_cli_save_dynamic(cli, tmp_path):
    out = tmp_path / "m.pt2"
    cli.ok("save", "tests/cli/test_dynamic.py:mlp_with_inputs", out,
           "--dynamic", "input:0=batch[1,64]")
    p = pt2rt.load(str(out)).program
    assert [(r.min, r.max) for r in p.range_constraints] == [(1, 64)]


def mlp_with_inputs():
    return mlp(), (torch.randn(5, 2, 4),)


class Shifted(torch.nn.Module):
    """y has x's size + 1 (a derived dim the model itself relates: x + y[1:])."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.lin(x + y[1:])


def test_derived_dim_parity_and_relation_error(cli, tmp_path):
    n = pt2rt.Dim("n", min=2, max=32)
    model = Shifted()
    path = tmp_path / "derived.pt2"
    pt2rt.export(model, (torch.randn(5, 4), torch.randn(6, 4)),
                 dynamic_shapes={"x": {0: n}, "y": {0: n + 1}}).save(str(path))
    for size in (2, 9, 32):
        x, y = torch.randn(size, 4), torch.randn(size + 1, 4)
        out = tmp_path / "out.pt"
        cli.ok("run", path, "--inputs", save_tensors(tmp_path / "in.pt", [x, y]), "--outputs", out)
        with torch.no_grad():
            assert_close(torch.load(str(out))[0], model(x, y))
    r = cli("run", path, "--inputs", save_tensors(tmp_path / "bad.pt",
                                                  [torch.randn(5, 4), torch.randn(7, 4)]))
    assert r.rc != 0 and "input 1 (y) dim 0: expected (1 + n) = 6, got 7" in r.err, str(r)


@needs_torch2  # torch 1.13 traces a derived dim as its expression: the relation is declared
def test_unrelated_derived_dim_is_refused():
    class Independent(torch.nn.Module):
        def forward(self, x, y):
            return x.sum(0) + y.sum(0)
    n = pt2rt.Dim("n", min=2, max=32)
    with pytest.raises(pt2rt.ExportError, match=r"input 'y' dim 0 \(n \+ 1\)"):
        pt2rt.export(Independent(), (torch.randn(5, 4), torch.randn(6, 4)), train=False,
                     dynamic_shapes={"x": {0: n}, "y": {0: n + 1}})


def eager_sgd_all_batches(model, x, y, epochs, batch, lr, seed):
    """export-cli train on a dynamic batch, in eager PyTorch: per-epoch randperm from one
    generator seeded once, every batch including the last partial one, cross_entropy."""
    m = copy.deepcopy(model).train()
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=gen)
        total, steps = 0.0, 0
        for s in range(0, len(y), batch):
            idx = perm[s:s + batch]
            loss = torch.nn.functional.cross_entropy(m(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + loss.item(), steps + 1
        losses.append(total / steps)
    return m, losses


def test_train_other_batch_size_with_partial_last_batch_matches_eager(cli, mlp_archive, tmp_path):
    """Exported at batch 5; trained at --batch-size 4 on 10 samples: 3 steps per epoch (4, 4, 2),
    12 SGD steps, each epoch ending with a partial batch, vs eager."""
    model, path = mlp_archive
    torch.manual_seed(3)
    x, y = torch.randn(10, 2, 4), torch.randint(0, 3, (10,))
    data = save_tensors(tmp_path / "train.pt", (x, y))
    tuned = tmp_path / "tuned.pt2"
    r = cli.ok("train", path, "--data", data, "--epochs", "4", "--batch-size", "4", "--lr", "0.1",
               "--seed", "7", "--eval-data", data, "--save", tuned)
    assert "3 batches of 4 per epoch (the last one of 2)" in r.out, r.out
    eager, losses = eager_sgd_all_batches(model, x, y, 4, 4, 0.1, 7)
    import re
    got = [float(v) for v in re.findall(r"^epoch \d+/\d+  loss (\S+)", r.out, re.M)]
    assert_close(torch.tensor(got), torch.tensor(losses), rtol=1e-3, atol=1e-4)
    loaded = pt2rt.load(str(tuned))
    for name, p in eager.named_parameters():
        assert_close(loaded.weights[name], p.detach(), rtol=1e-4, atol=1e-5, msg=name)


class TokenMLP(torch.nn.Module):
    """Linear layers on [batch, seq, features] (ATen's 3-D addmm path, and the matmul fold
    without bias)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_linear_on_3d_input_with_dynamic_batch_and_seq(cli, tmp_path):
    model, path = TokenMLP(), tmp_path / "tokens.pt2"
    pt2rt.export(model, (torch.randn(3, 5, 4),),
                 dynamic_shapes={"x": {0: pt2rt.Dim("batch", min=1, max=8),
                                       1: pt2rt.Dim("seq", min=2, max=16)}}).save(str(path))
    for batch, seq in ((1, 2), (4, 7), (8, 16)):
        x, g = torch.randn(batch, seq, 4), torch.randn(batch, seq, 3)
        files = {k: tmp_path / f"{k}.pt" for k in ("in", "out", "g", "grads")}
        save_tensors(files["in"], [x])
        cli.ok("run", path, "--train", "--inputs", files["in"], "--outputs", files["out"],
               "--grad-outputs", save_tensors(files["g"], [g]), "--grads", files["grads"])
        outs, grads, _ = eager_train_step(model, (x,), [g])
        assert_close(torch.load(str(files["out"]))[0], outs[0])
        got = torch.load(str(files["grads"]))
        for n in grads:
            assert_close(got[n], grads[n], msg=f"{n} at {batch}x{seq}")


@pytest.mark.parametrize("batch", [1, 5, 64])
def test_optimize_inference_with_dynamic_batch(cli, tmp_path, batch):
    """BatchNorm folded into the convolutions (optimize_inference) keeps the dynamic batch: the
    folded convolution's declared sizes stay symbolic, so the C++ meta check at the range
    maximum accepts the archive and every batch in the range matches eager's eval output."""
    import models
    model, args = models.build("cnn_bn")
    with torch.no_grad():  # non-trivial running statistics (a fresh BatchNorm is the identity)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 1.5)
    path = tmp_path / "folded_dyn.pt2"
    exported = pt2rt.export(copy.deepcopy(model), args, train=False, optimize_inference=True,
                            dynamic_shapes=({0: BATCH},))
    assert exported.captured.metadata["inference_passes"] == "fold_batch_norm:2"
    exported.save(str(path))
    x = torch.randn(batch, *args[0].shape[1:])
    out_file = tmp_path / "out.pt"
    cli.ok("run", path, "--inputs", save_tensors(tmp_path / "x.pt", [x]), "--outputs", out_file)
    with torch.no_grad():
        want = copy.deepcopy(model).eval()(x)
    assert_close(torch.load(str(out_file))[0], want)


@pytest.mark.parametrize("batch", [1, 64])
def test_min_cut_partitioner_with_dynamic_batch(cli, tmp_path, batch):
    """partitioner="min_cut" with a dynamic batch: the cut weighs symbolic sizes at their
    example values (torch 1.13 raised on them), and every batch in the range trains like eager."""
    import models
    model, args = models.build("cnn_bn")
    path = tmp_path / "cnn_min_cut.pt2"
    pt2rt.export(copy.deepcopy(model), args, partitioner="min_cut",
                 dynamic_shapes=({0: BATCH},)).save(str(path))
    check_train_and_eval_parity(cli, model, path, tmp_path, batch, tuple(args[0].shape[1:]), 10,
                                tol=1e-4)


def test_export_warns_when_the_range_maxima_exceed_the_default_bounds(cli, tmp_path):
    """Issue 25 item 4: at batch 2048 Wide needs more than the runtime's default 32 MiB; the
    exporter says so, naming the flags that let a call at the maxima run; a range within the
    bounds exports silently."""
    import warnings
    model = Wide()
    path = tmp_path / "wide.pt2"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pt2rt.export(model, (torch.randn(4, 4096),),
                     dynamic_shapes={"x": {0: pt2rt.Dim("batch", min=1, max=2048)}}).save(
                         str(path))
    texts = [str(w.message) for w in caught if "range maxima" in str(w.message)]
    assert len(texts) == 1, [str(w.message) for w in caught]
    assert "batch=2048" in texts[0] and "--trusted" in texts[0], texts[0]
    assert "--max-run-bytes" in texts[0], texts[0]
    big = save_tensors(tmp_path / "big.pt", [torch.randn(2048, 4096)])
    cli.usage_error("run", path, "--inputs", big, "--train", mentions=["--max-run-bytes"])
    cli.ok("run", path, "--inputs", big, "--train", "--trusted")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pt2rt.export(model, (torch.randn(4, 4096),),
                     dynamic_shapes={"x": {0: pt2rt.Dim("batch", min=1, max=64)}})
    assert not [w for w in caught if "range maxima" in str(w.message)]
