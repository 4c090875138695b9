"""The dynamic-shape parity check of the exporter-level tests: one archive, run by the Python
reader (``pt2rt.load``) at several input sizes, against eager PyTorch."""
import contextlib
import copy

import torch
from torch.testing import assert_close

import pt2rt


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@contextlib.contextmanager
def _copy(model):
    """A copy of ``model`` to run eager steps on: ``copy.deepcopy``, or — where it refuses
    (``nn.utils.weight_norm``'s non-leaf weight) — ``model`` itself, its state, gradients and
    mode put back afterwards."""
    try:
        copied = copy.deepcopy(model)
    except RuntimeError:
        copied = None
    if copied is not None:
        yield copied
        return
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    training = model.training
    try:
        yield model
    finally:
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        model.train(training)


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
        with torch.no_grad(), _copy(model) as m:
            want = _outputs(m.eval()(*inputs))
        got = loaded.run_inference(*inputs)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rtol=rtol, atol=atol, msg=lambda m: f"eval {k} at {sizes}: {m}")

        with _copy(model) as m:
            m.train()
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
