"""The dynamic-shape parity check of the exporter-level tests: one archive, run by the Python
reader (``pt2rt.load``) at several input sizes, against eager PyTorch."""
import copy

import torch
from torch.testing import assert_close

import pt2rt


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check_parity_at(tmp_path, model, examples, dynamic, input_sets, rtol=1e-5, atol=1e-6):
    """Exports ``model`` once on ``examples`` (a tuple of tensors) with ``dynamic`` and compares,
    for each tuple of ``input_sets``, the eval outputs and one training step (outputs, parameter
    gradients; the RNG seeded alike for both, so dropout draws the same masks) with eager."""
    path = str(tmp_path / "model.pt2")
    pt2rt.export(model, tuple(examples), dynamic_shapes=dynamic,
                 bundle_examples=False).save(path)
    loaded = pt2rt.load(path)
    for i, inputs in enumerate(input_sets):
        sizes = [tuple(t.shape) for t in inputs]
        with torch.no_grad():
            want = _outputs(copy.deepcopy(model).eval()(*inputs))
        got = loaded.run_inference(*inputs)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rtol=rtol, atol=atol, msg=lambda m: f"eval {k} at {sizes}: {m}")

        m = copy.deepcopy(model).train()
        torch.manual_seed(100 + i)
        outs = _outputs(m(*inputs))
        grads_out = [torch.randn_like(o) for o in outs]
        torch.autograd.backward(outs, grads_out)
        torch.manual_seed(100 + i)
        step = loaded.train_step(*inputs, grad_outputs=grads_out)
        for k, (g, w) in enumerate(zip(step.outputs, outs)):
            assert_close(g, w.detach(), rtol=rtol, atol=atol,
                         msg=lambda m: f"train output {k} at {sizes}: {m}")
        for n, p in m.named_parameters():
            assert_close(step.grads[n], p.grad, rtol=rtol, atol=atol,
                         msg=lambda m: f"grad {n} at {sizes}: {m}")


def check_parity(tmp_path, model, example, dynamic, shapes):
    """``check_parity_at`` for a model of one input: random inputs of each of ``shapes``."""
    input_sets = []
    for i, shape in enumerate(shapes):
        torch.manual_seed(10 + i)
        input_sets.append((torch.randn(*shape),))
    check_parity_at(tmp_path, model, (example,), dynamic, input_sets)
