"""export-cli run: inference and training steps against eager PyTorch; input errors."""
import copy

import torch
from torch.testing import assert_close

from conftest import eager_train_step, save_tensors


def eval_outputs(model, args):
    m = copy.deepcopy(model).eval()
    with torch.no_grad():
        out = m(*args)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def test_bundled_example_inference(cli, archives, tmp_path):
    a = archives.get("cnn_bn")
    out_file = tmp_path / "out.pt"
    r = cli.ok("run", a.path, "--outputs", out_file)
    assert "bundled example" in r.out and "output 0 output: float32[4, 10]" in r.out
    assert "ms (inference)" in r.out
    outputs = torch.load(str(out_file))
    assert isinstance(outputs, list) and len(outputs) == 1
    assert_close(outputs[0], eval_outputs(a.model, a.args)[0])


def test_deployment_loads_match_eager(cli, archives, tmp_path):
    """--inference-only and --onednn-benchmark (each convolution on the faster of ATen's
    algorithm and oneDNN, timed at load): eager's eval outputs up to float rounding."""
    a = archives.get("cnn_bn")
    want = eval_outputs(a.model, a.args)[0]
    for flag in ("--inference-only", "--onednn-benchmark"):
        out_file = tmp_path / f"out{flag}.pt"
        cli.ok("run", a.path, flag, "--outputs", out_file)
        assert_close(torch.load(str(out_file))[0], want)
        cli.usage_error("run", a.path, flag, "--train", mentions=["--train", "--inference-only"])


def test_inputs_file_two_inputs_two_outputs(cli, archives, tmp_path):
    a = archives.get("two_io")
    torch.manual_seed(1)
    args = tuple(torch.randn_like(t) for t in a.args)
    inputs = save_tensors(tmp_path / "in.pt", args)  # a tuple, as torch.save writes it
    out_file = tmp_path / "out.pt"
    cli.ok("run", a.path, "--inputs", inputs, "--outputs", out_file)
    got = torch.load(str(out_file))
    want = eval_outputs(a.model, args)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert_close(g, w)
    # a list works as well as a tuple
    cli.ok("run", a.path, "--inputs", save_tensors(tmp_path / "in_list.pt", list(args)))
    # and a dict by input name (forward(self, x, y)), in any order
    by_name = save_tensors(tmp_path / "in_dict.pt", {"y": args[1], "x": args[0]})
    cli.ok("run", a.path, "--inputs", by_name, "--outputs", out_file)
    for g, w in zip(torch.load(str(out_file)), want):
        assert_close(g, w)
    cli.usage_error("run", a.path, "--inputs",
                    save_tensors(tmp_path / "only_x.pt", {"x": args[0]}), mentions=["'y'"])
    cli.usage_error("run", a.path, "--inputs",
                    save_tensors(tmp_path / "typo.pt", {"x": args[0], "z": args[1]}),
                    mentions=["'z'", "x, y"])


def test_outputs_printed_with_their_stored_names(cli, named_outputs, tmp_path):
    """forward(x, *, scale) -> {"logits", "hidden": (h, h.sum(-1))}: each output line names
    its place in the return value, in eval and training runs; before schema 1.4, "[i]"."""
    import signature_models
    shapes = ["float32[4, 4]", "float32[4, 8]", "float32[4]"]
    for mode in ([], ["--train"]):
        out = cli.ok("run", named_outputs.path, *mode).out
        for i, (name, shape) in enumerate(zip(signature_models.OUTPUT_NAMES, shapes)):
            assert f"output {i} {name}: {shape}" in out, out
    out = cli.ok("run", named_outputs.path_1_3).out
    assert "output 0 [0]: float32[4, 4]" in out and "output 2 [2]: float32[4]" in out, out


def test_training_step_grads_and_buffers_match_eager(cli, archives, tmp_path):
    a = archives.get("cnn_bn")
    torch.manual_seed(2)
    grad_out = torch.randn(4, 10)
    files = {k: tmp_path / f"{k}.pt" for k in ("out", "grads", "buffers", "g")}
    save_tensors(files["g"], [grad_out])
    r = cli.ok("run", a.path, "--train", "--grad-outputs", files["g"], "--outputs", files["out"],
               "--grads", files["grads"], "--buffers", files["buffers"])
    assert "(training)" in r.out
    outs, grads, buffers = eager_train_step(a.model, a.args, [grad_out])
    assert_close(torch.load(str(files["out"]))[0], outs[0])
    got_grads = torch.load(str(files["grads"]))
    assert list(got_grads) == list(grads)
    for name, g in grads.items():
        assert_close(got_grads[name], g, msg=name)
    got_buffers = torch.load(str(files["buffers"]))
    assert list(got_buffers) == list(buffers)
    for name, b in buffers.items():
        assert_close(got_buffers[name], b, msg=name)


def test_frozen_parameters_get_no_grads(cli, archives, tmp_path):
    a = archives.get("frozen")
    grads_file = tmp_path / "grads.pt"
    cli.ok("run", a.path, "--train", "--grads", grads_file)
    got = torch.load(str(grads_file))
    trainable = [n for n, p in a.model.named_parameters() if p.requires_grad]
    assert list(got) == trainable
    _, want, _ = eager_train_step(a.model, a.args, [])
    for n in trainable:
        assert_close(got[n], want[n], msg=n)


def test_single_element_list_and_dict_files(cli, archives, tmp_path):
    """Python pickles a one-element list / one-entry dict with APPEND / SETITEM, opcodes
    LibTorch 1.13's unpickler lacks; export-cli reads them anyway (cli/pickle_compat.h)."""
    a = archives.get("mlp")
    x = torch.randn(4, 16)
    out_file = tmp_path / "out.pt"
    cli.ok("run", a.path, "--inputs", save_tensors(tmp_path / "one.pt", [x]), "--outputs",
           out_file)
    assert_close(torch.load(str(out_file))[0], eval_outputs(a.model, (x,))[0])
    many = [torch.randn(4, 16) for _ in range(1001)]  # APPENDS x1000, then one APPEND
    cli.usage_error("run", a.path, "--inputs", save_tensors(tmp_path / "many.pt", many),
                    mentions=["1001"])


def test_wrong_input_shape_names_the_input(cli, archives, tmp_path):
    a = archives.get("mlp")
    bad = save_tensors(tmp_path / "bad.pt", (torch.randn(4, 17),))
    r = cli.usage_error("run", a.path, "--inputs", bad, mentions=["input 0"])
    assert "[4, 17]" in r.err and "[4, 16]" in r.err


def test_wrong_input_dtype_and_count(cli, archives, tmp_path):
    a = archives.get("mlp")
    cli.usage_error("run", a.path, "--inputs",
                    save_tensors(tmp_path / "f64.pt", (torch.randn(4, 16, dtype=torch.float64),)),
                    mentions=["input 0", "float64"])
    cli.usage_error("run", a.path, "--inputs",
                    save_tensors(tmp_path / "two.pt", (torch.randn(4, 16), torch.randn(4, 16))),
                    mentions=["2"])


def test_bad_inputs_files(cli, archives, tmp_path):
    a = archives.get("mlp")
    cli.usage_error("run", a.path, "--inputs", tmp_path / "missing.pt", mentions=["missing.pt"])
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x00\x01not a pickle")
    cli.usage_error("run", a.path, "--inputs", junk, mentions=["junk.pt", "torch.save"])
    as_dict = save_tensors(tmp_path / "dict.pt", {"x": [torch.randn(4, 16)]})
    cli.usage_error("run", a.path, "--inputs", as_dict, mentions=["dict.pt", "is a list"])
    nested = save_tensors(tmp_path / "nested.pt", [[torch.randn(4, 16)]])
    cli.usage_error("run", a.path, "--inputs", nested, mentions=["element 0", "is a list"])
    mixed = save_tensors(tmp_path / "mixed.pt", (torch.randn(4, 16), 3))
    cli.usage_error("run", a.path, "--inputs", mixed, mentions=["element 1"])


def test_option_errors(cli, archives, tmp_path):
    a = archives.get("mlp")
    cli.usage_error("run", a.path, "--grads", tmp_path / "g.pt", mentions=["--train"])
    cli.usage_error("run", a.path, "--device", "tpu", mentions=["tpu"])
    if not torch.cuda.is_available():
        cli.usage_error("run", a.path, "--device", "cuda", mentions=["CUDA is not available"])
    cli.usage_error("run", a.path, "--train", "--grad-outputs",
                    save_tensors(tmp_path / "go.pt", [torch.ones(4, 10), torch.ones(4, 10)]),
                    mentions=["--grad-outputs"])
    cli.usage_error("run", a.path, "--train", "--grad-outputs",
                    save_tensors(tmp_path / "go2.pt", [torch.ones(3, 10)]),
                    mentions=["grad output 0"])
    # CUDA graphs record CUDA kernels (LoadOptions::cuda_graphs)
    cli.usage_error("run", a.path, "--cuda-graphs", mentions=["--cuda-graphs needs --device cuda"])
    cli.usage_error("profile", a.path, "--cuda-graphs", mentions=["--cuda-graphs needs --device"])
    cli.usage_error("profile", a.path, "--cuda-graphs", "--train",
                    mentions=["--cuda-graphs needs --device"])


def test_input_gradients(cli, tmp_path):
    """An input exported with requires_grad gets a Grad(of=Plain(0)): --grads has input:0."""
    import models
    import pt2rt
    model, (x,) = models.build("mlp")
    path = tmp_path / "input_grad.pt2"
    pt2rt.export(model, (x.clone().requires_grad_(),)).save(str(path))
    grads_file = tmp_path / "grads.pt"
    cli.ok("run", path, "--train", "--grads", grads_file)
    got = torch.load(str(grads_file))
    assert list(got)[-1] == "input:0"
    xe = x.clone().requires_grad_()
    model(xe).backward(torch.ones(4, 10))
    assert_close(got["input:0"], xe.grad)
    assert "grad input:0" in cli.ok("verify", path).out


def test_print_shows_the_output_values(cli, archives):
    r = cli.ok("run", archives.get("mlp").path, "--print")
    assert "[ CPUFloatType{4,10} ]" in r.out or "CPUFloatType{4,10}" in r.out, r.out


def test_seed_repeats_the_random_draws_of_a_training_run(cli, tmp_path):
    import pt2rt
    import random_models
    model, args = random_models.build_dropout()
    path = tmp_path / "dropout.pt2"
    pt2rt.export(model, args).save(str(path))
    runs = []
    for seed in ("7", "7", "8"):
        out = tmp_path / f"out{len(runs)}.pt"
        cli.ok("run", path, "--train", "--seed", seed, "--outputs", out)
        runs.append(torch.load(str(out))[0])
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])


def test_inputs_file_with_a_list_and_a_dict(cli, tmp_path):
    """A model exported with forward(images: [a, b], batch: {"scale", "bias"}) (schema 1.6):
    --inputs takes the arguments as forward() did — a tuple of them, or a dict by parameter
    name — and a value of another structure is one usage line naming its path."""
    import signature_models as sm
    path = tmp_path / "list_dict.pt2"
    model = sm.export_list_dict(str(path))
    images, batch = sm.list_dict_example(batch=4, seed=3)
    with torch.no_grad():
        want = model.eval()(images, batch)
    out_file = tmp_path / "out.pt"
    for name, value in (("tuple", (images, batch)), ("dict", {"batch": batch, "images": images})):
        cli.ok("run", path, "--inputs", save_tensors(tmp_path / f"{name}.pt", value),
               "--outputs", out_file)
        assert_close(torch.load(str(out_file))[0], want, msg=name)
    r = cli.ok("run", path, "--train", "--inputs", save_tensors(tmp_path / "t.pt", (images, batch)))
    assert "(training)" in r.out
    r = cli.ok("inspect", path)
    assert "forward(images: list[Tensor, Tensor], batch: dict['scale': Tensor, 'bias': Tensor])" \
        in r.out, r.out
    assert "input 3 (batch['bias']): float32[4]" in r.out, r.out
    cli.usage_error("run", path, "--inputs",
                    save_tensors(tmp_path / "short.pt", ([images[0]], batch)),
                    mentions=["'images'", "list[Tensor, Tensor]", "list of 1"])
    cli.usage_error("run", path, "--inputs",
                    save_tensors(tmp_path / "keys.pt", (images, {"scale": batch["scale"]})),
                    mentions=["'batch'", "'bias'"])
