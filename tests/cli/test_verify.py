"""export-cli verify: pass on a fresh export, exit 1 on an altered reference, and the
"no references" path for archives whose weights were re-saved."""
import pytest
import torch

from pt2rt.format.archive import ArchiveReader, write_archive
from pt2rt.format.deserialize import read_program
from pt2rt.format.reader import tensor_of
from pt2rt.format.serialize import tensor_data, write_program


def rewrite_archive(src, dst, edit):
    """Copies archive `src` to `dst` through pt2rt's Python reader/writer, applying
    `edit(program)` to the decoded Program first."""
    with ArchiveReader(str(src)) as reader:
        program = read_program(reader.read("program.fb"))
        weights = [(w.entry, reader.read(w.entry)) for w in program.weights]
        extra = reader.extra()
    edit(program)
    write_archive(str(dst), write_program(program), weights, extra)


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "frozen", "two_io"])
def test_fresh_export_verifies(cli, archives, name):
    r = cli.ok("verify", archives.get(name).path)
    assert "OK:" in r.out
    assert "max |diff|" in r.out and "FAIL" not in r.out


def test_mapped_load_verifies_alike(cli, archives):
    """--map (LoadOptions::map_weights): the same checks pass on the memory-mapped weights."""
    path = archives.get("cnn_bn").path
    read, mapped = cli.ok("verify", path).out, cli.ok("verify", path, "--map").out
    assert "OK:" in mapped
    assert mapped.splitlines()[-1] == read.splitlines()[-1]


def test_table_lists_outputs_grads_and_buffers(cli, archives):
    a = archives.get("cnn_bn")
    out = cli.ok("verify", a.path).out
    assert "example0 output[0]" in out and "example0 train output[0]" in out
    for name, _ in a.model.named_parameters():
        assert f"grad {name} " in out
    for name, _ in a.model.named_buffers():
        assert f"buffer {name} " in out


def _bump_output(program):
    ref = program.examples[0].references
    t = tensor_of(ref.outputs[0])
    t.view(-1)[0] += 0.5
    ref.outputs[0] = tensor_data(t)


def _bump_grad(program):
    """A full gradient reference (full_references / archives before schema 1.2): one element."""
    ref = program.examples[0].references
    name, data = ref.grads[0]
    t = tensor_of(data)
    t.view(-1)[-1] *= 1.01
    ref.grads[0] = (name, tensor_data(t))


def _scale_grad_sketch(program):
    """The sketch of 1.01 x the gradient of features.0.weight (every statistic is homogeneous
    of degree 1 in the gradient)."""
    ref = program.examples[0].references
    s = next(s for s in ref.grad_sketches if s.name == "features.0.weight")
    s.norm, s.sum, s.abs_sum, s.max_abs = (1.01 * v for v in (s.norm, s.sum, s.abs_sum,
                                                               s.max_abs))
    s.projections = [1.01 * p for p in s.projections]


def _bump_buffer(program):
    ref = program.examples[0].references
    for i, (name, data) in enumerate(ref.buffers):
        if name.endswith("running_mean"):
            ref.buffers[i] = (name, tensor_data(tensor_of(data) + 1e-3))
            return
    raise AssertionError("no running_mean buffer")


@pytest.fixture(scope="module")
def full_refs(tmp_path_factory):
    """cnn_bn exported with full_references=True."""
    import models
    import pt2rt
    model, args = models.build("cnn_bn")
    path = tmp_path_factory.mktemp("full") / "cnn_bn_full.pt2"
    pt2rt.export(model, args, full_references=True).save(str(path))
    return path


@pytest.mark.parametrize("edit,row,full", [
    (_bump_output, "example0 output[0]", False),
    (_scale_grad_sketch, "example0 grad features.0.weight", False),
    (_bump_grad, "example0 grad features.0.weight", True),
    (_bump_buffer, "example0 buffer features.1.running_mean", False)])
def test_altered_reference_fails(cli, archives, full_refs, tmp_path, edit, row, full):
    src = full_refs if full else archives.get("cnn_bn").path
    bad = tmp_path / "altered.pt2"
    rewrite_archive(src, bad, edit)
    r = cli("verify", bad)
    assert r.rc == 1, str(r)
    failing = [line for line in r.out.splitlines() if "FAIL" in line and line.startswith("example")]
    assert len(failing) == 1 and failing[0].startswith(row), str(r)
    assert "FAILED: 1 of" in r.out
    # an unaltered copy through the same reader/writer still passes
    same = tmp_path / "same.pt2"
    rewrite_archive(src, same, lambda p: None)
    cli.ok("verify", same)


def test_wrong_gradient_caught_by_sketch_projections(cli, archives, tmp_path):
    """A gradient with every element right but in the wrong place (e.g. a transposed weight):
    the sketch's norm, sums and max match, its random projections do not. The reference is
    replaced by the sketch of the reference executor's gradient with its elements reversed."""
    import pt2rt
    from pt2rt.ir import grad_sketch
    a = archives.get("cnn_bn")
    loaded = pt2rt.load(str(a.path))
    g = loaded.train_step(*loaded.examples()[0].inputs).grads["features.0.weight"]
    wrong = g.flatten().flip(0).view_as(g)

    def permuted(program):
        ref = program.examples[0].references
        i = next(i for i, s in enumerate(ref.grad_sketches) if s.name == "features.0.weight")
        ref.grad_sketches[i] = grad_sketch.compute(ref.grad_sketches[i].name, wrong,
                                                   ref.grad_sketch_seed)
    bad = tmp_path / "permuted.pt2"
    rewrite_archive(a.path, bad, permuted)
    r = cli("verify", bad)
    assert r.rc == 1, str(r)
    failing = [line for line in r.out.splitlines() if "FAIL" in line and line.startswith("example")]
    assert len(failing) == 1 and "features.0.weight" in failing[0], str(r)
    assert "sketch projection" in failing[0], str(r)


def test_sketch_rows_and_full_references(cli, archives, full_refs):
    """Default archives check gradients by sketch, full_references ones element by element;
    both pass on a fresh export."""
    out = cli.ok("verify", archives.get("cnn_bn").path).out
    assert "grad features.0.weight" in out and "(sketch)" in out
    full = cli.ok("verify", full_refs).out
    assert "grad features.0.weight" in full and "(sketch)" not in full


def test_archive_before_schema_1_2_verifies(cli, full_refs, tmp_path):
    """An archive as pt2rt wrote it before gradient sketches (schema 1.1, full gradients)."""
    old = tmp_path / "old.pt2"

    def as_1_1(program):
        program.schema_minor = 1
    rewrite_archive(full_refs, old, as_1_1)
    out = cli.ok("verify", old).out
    assert "OK:" in out and "grad features.0.weight" in out
    bad = tmp_path / "old_bad.pt2"
    rewrite_archive(full_refs, bad, lambda p: (as_1_1(p), _bump_grad(p)))
    assert cli("verify", bad).rc == 1


def test_resaved_archive_has_no_references(cli, archives, tmp_path):
    a = archives.get("mlp")
    data = tmp_path / "train.pt"
    torch.manual_seed(3)
    torch.save((torch.randn(8, 16), torch.randint(0, 10, (8,))), str(data))
    tuned = tmp_path / "tuned.pt2"
    cli.ok("train", a.path, "--data", data, "--epochs", "1", "--save", tuned)
    r = cli.ok("verify", tuned)
    assert "no references" in r.out
    assert "matches signature float32[4, 10]" in r.out
    assert "no references" in cli.ok("inspect", tuned).out


def test_verify_without_training_graphs(cli, tmp_path):
    import models
    import pt2rt
    model, args = models.build("mlp")
    path = tmp_path / "infer.pt2"
    pt2rt.export(model, args, train=False).save(str(path))
    out = cli.ok("verify", path).out
    assert "example0 output[0]" in out and "train output" not in out


@pytest.fixture(scope="module")
def dropout_archive(tmp_path_factory):
    """A model with dropout active in training (tests/python/random_models.py)."""
    import pt2rt
    import random_models
    model, args = random_models.build_dropout()
    path = tmp_path_factory.mktemp("dropout") / "dropout.pt2"
    pt2rt.export(model, args).save(str(path))
    return path


def test_random_draws_are_replayed_exactly(cli, dropout_archive):
    """The exporter seeded its eager runs; verify seeds the runtime the same way, so on the
    LibTorch that exported it the dropout masks, outputs, gradients and BatchNorm statistics
    match exactly (no shape-only rows)."""
    r = cli.ok("verify", dropout_archive)
    assert "replayed the exporter's draws (seed 0" in r.out, r.out
    assert "random:" not in r.out and "FAIL" not in r.out, r.out
    assert "example0 grad fc1.weight" in r.out


def test_a_wrong_seed_fails(cli, dropout_archive, tmp_path):
    """The replay is what makes the references match: another seed draws other masks."""
    bad = tmp_path / "seed1.pt2"
    rewrite_archive(dropout_archive, bad,
                    lambda p: p.metadata.__setitem__("reference_rng_seed", "1"))
    r = cli(*["verify", bad])
    assert r.rc == 1, str(r)
    assert "FAIL" in r.out and "example0 train output[0]" in r.out


def test_unreplayable_draws_are_checked_by_dtype_shape_and_finiteness(cli, dropout_archive,
                                                                      tmp_path):
    """Exported by another torch version (here: a rewritten producer): results that depend on
    the dropout mask are checked by dtype, shape and finite values, the rest exactly."""
    other = tmp_path / "other_torch.pt2"

    def edit(program):
        program.producer.torch_version = "0.1.0"
    rewrite_archive(dropout_archive, other, edit)
    r = cli.ok("verify", other)
    assert "could not replay the exporter's draws (exported with torch 0.1.0" in r.out, r.out
    rows = {line.split()[0] + " " + line.split()[1] + (" " + line.split()[2]
            if line.split()[1] in ("grad", "buffer", "train") else ""): line
            for line in r.out.splitlines() if line.startswith("example0")}
    random_rows = [k for k, line in rows.items() if "random: dtype, shape, finite" in line]
    assert "example0 train output[0]" in random_rows
    assert "example0 grad fc1.weight" in random_rows
    assert "example0 buffer bn.running_mean" in random_rows
    # eval mode draws nothing, and num_batches_tracked does not depend on the mask
    assert "random" not in rows["example0 output[0]"]
    assert "random" not in rows["example0 buffer bn.num_batches_tracked"]


def test_no_examples_exits_1_unless_allowed(cli, tmp_path):
    import models
    import pt2rt
    model, args = models.build("mlp")
    path = tmp_path / "bare.pt2"
    pt2rt.export(model, args, bundle_examples=False).save(str(path))
    r = cli("verify", path)
    assert r.rc == 1 and "no bundled examples" in r.out and "--allow-no-examples" in r.out
    assert "nothing to verify" in cli.ok("verify", path, "--allow-no-examples").out


def _noisy_output(recorded_rmse):
    """Output 0's reference moved by ±1e-4 per element (RMSE 1e-4, over assert_close's atol of
    1e-5 for float32), recording eager float32's RMSE from float64 as `recorded_rmse`."""
    def edit(program):
        ref = program.examples[0].references
        t = tensor_of(ref.outputs[0])
        signs = torch.ones(t.numel())
        signs[1::2] = -1
        data = tensor_data(t + 1e-4 * signs.view_as(t))
        data.float64_rmse = recorded_rmse
        ref.outputs[0] = data
    return edit


@pytest.mark.parametrize("recorded, passes", [(1e-4, True), (2e-5, False), (None, False)])
def test_float64_rule(cli, archives, tmp_path, recorded, passes):
    """schema/README.md "The float64 rule": a result outside the tolerance passes when it is
    within 2 x eager float32's recorded distance from float64 (+ atol/10) of the reference."""
    path = tmp_path / "noisy.pt2"
    rewrite_archive(archives.get("mlp").path, path, _noisy_output(recorded))
    r = cli("verify", path)
    row = next(line for line in r.out.splitlines() if line.startswith("example0 output[0]"))
    if passes:
        assert r.rc == 0, str(r)
        assert "pass" in row and "float64 rule: rmse" in row and "<= 2.01e-04" in row, row
        assert "float64 rule: 1 check(s)" in r.out
    else:
        assert r.rc == 1, str(r)
        assert "FAIL" in row, row


def test_tolerance_options(cli, archives, tmp_path):
    bad = tmp_path / "bumped.pt2"
    rewrite_archive(archives.get("cnn_bn").path, bad, _bump_output)  # one element + 0.5
    assert cli("verify", bad).rc == 1
    r = cli.ok("verify", bad, "--atol", "0.6")
    assert "OK:" in r.out
    assert cli("verify", bad, "--rtol", "1e-3").rc == 1  # 0.5 is not within 1e-3 relative
    for option, value in (("--rtol", "-1"), ("--atol", "nan"), ("--atol", "inf")):
        r = cli("verify", bad, option, value)
        assert r.rc == 2 and len(r.err.strip().splitlines()) == 1, str(r)
        assert option in r.err or f"'{value}'" in r.err or f"‘{value}’" in r.err, str(r)


def test_tf32_is_off_while_verifying_unless_allowed(cli, archives):
    """verify's summary reads LibTorch's TF32 switches (at::Context, cuDNN and cuBLAS) while
    it runs: off by default — the references are full float32 — on with --allow-tf32. On a
    CPU the switches change nothing, but they are the same switches."""
    path = archives.get("mlp").path
    assert cli.ok("verify", path).out.splitlines()[-1].endswith("TF32 off)")
    assert cli.ok("verify", path, "--allow-tf32").out.splitlines()[-1].endswith("TF32 on)")


def test_cross_device_references_take_pytorchs_cross_device_tolerance(cli, archives, tmp_path):
    """References computed on another device type (Producer.capture_device): floating
    tolerances at least rtol = atol = 1e-3, PyTorch's CPU-vs-CUDA consistency tolerance. Here
    the archive says its references come from CUDA and one output is off by 5e-4."""
    def moved(device):
        def edit(program):
            program.producer.capture_device = device
            ref = program.examples[0].references
            t = tensor_of(ref.outputs[0])
            t.view(-1)[0] += 5e-4
            ref.outputs[0] = tensor_data(t)
        return edit
    same, cross = tmp_path / "same.pt2", tmp_path / "cross.pt2"
    rewrite_archive(archives.get("mlp").path, same, moved("cpu"))
    rewrite_archive(archives.get("mlp").path, cross, moved("cuda"))
    r = cli("verify", same)
    assert r.rc == 1 and "cross-device" not in r.out, str(r)
    r = cli.ok("verify", cross)
    assert "cross-device: the references were computed on cuda, this runs on cpu" in r.out
    assert cli("verify", cross, "--atol", "1e-5", "--rtol", "1.3e-6").rc == 1  # options win


def test_draws_in_another_order_than_eager_are_checked_by_dtype_shape_and_finiteness(
        cli, dropout_archive, tmp_path):
    """An archive whose exporter found that its graphs draw in another order or amount than
    eager did (metadata reference_draws = differ, capture.reference_draws): no seeding can
    replay the references, so the random results are checked by dtype, shape and finiteness
    even on the exporting LibTorch, and verify says why."""
    other = tmp_path / "differ.pt2"
    rewrite_archive(dropout_archive, other,
                    lambda p: p.metadata.__setitem__("reference_draws", "differ"))
    r = cli.ok("verify", other)
    assert "the graphs draw in another order than eager did, found at export" in r.out, r.out
    assert "random: dtype, shape, finite" in r.out


def test_quiet_prints_only_failures_and_the_summary(cli, archives, tmp_path):
    path = archives.get("cnn_bn").path
    r = cli.ok("verify", path, "--quiet")
    assert not [line for line in r.out.splitlines() if line.startswith("example0")]
    assert r.out.splitlines()[-1].startswith("OK:")
    bad = tmp_path / "bumped.pt2"
    rewrite_archive(path, bad, _bump_output)
    r = cli("verify", bad, "--quiet")
    rows = [line for line in r.out.splitlines() if line.startswith("example0")]
    assert r.rc == 1 and len(rows) == 1 and "FAIL" in rows[0], str(r)


def test_map_unchecked_needs_map(cli, archives):
    cli.usage_error("verify", archives.get("mlp").path, "--map-unchecked",
                    mentions=["--map-unchecked needs --map"])
    assert "OK:" in cli.ok("verify", archives.get("mlp").path, "--map", "--map-unchecked").out


def test_depthwise_convolution_backward_within_its_allocation_cap(cli, tmp_path):
    """convnext's 7×7 depthwise convolution on 1×1 maps: oneDNN's backward reorders the
    [768, 1, 7, 7] weight into a blocked layout padded to 16×16 channels per group (38.5 MB for
    a 150 kB weight); the runtime's allocation cap for a kernel without a Meta kernel foresees
    it (issue 24 item 1) instead of refusing the archive."""
    import pt2rt
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(768, 768, 7, padding=3, groups=768),
                                torch.nn.Flatten(), torch.nn.Linear(768, 4))
    path = tmp_path / "depthwise.pt2"
    pt2rt.export(model, (torch.randn(2, 768, 1, 1),), train=True).save(str(path))
    r = cli.ok("verify", path)
    assert "OK:" in r.out and "FAIL" not in r.out


class _DoublesItsInput(torch.nn.Module):
    """forward mutates its input in place (an InputMutation of a user input, written back)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)

    def forward(self, x):
        x.mul_(2.0)
        return self.a(x)


class _CachesInEval(torch.nn.Module):
    """Updates buffers in every mode: a ring of the last means and a step counter."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.register_buffer("cache", torch.zeros(3, 4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        h = self.a(x)
        with torch.no_grad():
            self.cache[1:] = self.cache[:-1].clone()
            self.cache[0] = h.detach().mean(0)
            self.steps += 1
        return h + self.cache.sum(0)


@pytest.mark.parametrize("model", [_DoublesItsInput, _CachesInEval])
def test_each_run_starts_from_the_exported_inputs_and_buffers(cli, tmp_path, model):
    """The references ran inference and the training step each on fresh copies of the example
    inputs and the exported buffers; so does verify (before, the training step saw the input
    the inference run had doubled, or the buffers it had updated, and failed)."""
    import pt2rt
    torch.manual_seed(0)
    path = tmp_path / "stateful.pt2"
    pt2rt.export(model(), (torch.randn(3, 4),)).save(str(path))
    out = cli.ok("verify", path).out
    assert "OK:" in out and "example0 train output[0]" in out


def test_verify_runs_with_the_exporters_thread_count(cli, archives, tmp_path):
    """ATen's CPU kernels choose algorithms by the intra-op thread count; the exporter records
    its count (metadata reference_threads) and verify runs with it, says so, and takes
    --threads instead; a count this machine lacks is capped, a malformed one ignored."""
    a = archives.get("mlp")
    with ArchiveReader(str(a.path)) as reader:
        recorded = read_program(reader.read("program.fb")).metadata["reference_threads"]
    assert int(recorded) >= 1
    out = cli.ok("verify", a.path).out
    assert f"threads: {recorded} intra-op (the exporter's, metadata reference_threads)" in out
    assert "threads: 1 intra-op (--threads)" in cli.ok("verify", a.path, "--threads", "1").out
    cli.usage_error("verify", a.path, "--threads", "0", mentions=["--threads"])
    huge = tmp_path / "huge.pt2"
    rewrite_archive(a.path, huge, lambda p: p.metadata.__setitem__("reference_threads", "4096"))
    assert "the references were computed with 4096, this machine has" in \
        cli.ok("verify", huge).out
    bad = tmp_path / "bad.pt2"
    rewrite_archive(a.path, bad, lambda p: p.metadata.__setitem__("reference_threads", "-3"))
    assert "threads:" not in cli.ok("verify", bad).out
