"""PyTorch's OpInfo database as pt2rt's op-coverage test (issue 27).

For every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` that supports
autograd in float32 on the CPU (float64 where float32 is not supported for the forward or the
backward), each of its sample inputs (``op.sample_inputs("cpu", dtype, requires_grad=True)``,
generated from a fixed seed) becomes a one-op module, ``OneOp``: the sample's tensors are the
inputs of ``forward()`` (made contiguous, as the archive stores its examples and the capture
traces them; ``requires_grad`` as the sample has it), every non-tensor argument is baked into
the module, and ``forward()`` returns the tensors of
``output_process_fn_grad(gradcheck_wrapper(op, input, *args, **kwargs))`` — what OpInfo's own
gradient tests differentiate. Each module is exported as a user would
(``pt2rt.export(module, inputs, train=True)``, defaults otherwise: gradients bundled as
sketches; ``train=False`` where no output is differentiable), and the archive is checked
against eager PyTorch twice:

* the Python reader (``pt2rt.load(path)``): ``run_inference`` against eager eval-mode outputs,
  ``train_step`` (ones as the cotangents of the floating outputs that require grad, pt2rt's
  convention) against eager training outputs and input gradients, with
  ``torch.testing.assert_close``'s default tolerances for the dtype (``equal_nan``); a float32
  value outside them passes when it is as close to eager float64 as eager float32 is (the
  float64 rule of ``export-cli verify``);
* the C++ runtime: ``export-cli verify <archive>`` (exit 0 ok, 1 mismatch, 2 error).

Random ops (``bernoulli``, ``normal``, ``rrelu``, dropout, fractional max pooling, ...: the
eager forward moves the generator's state, or two seeds give different outputs) cannot be
compared by value: their outputs and gradients are checked by dtype, shape and finiteness on
the Python side (``verify`` applies its own random-op rule). OpInfo's ``wrapper_set_seed``
(a reseed inside the op, for OpInfo's own tests) is replaced by a plain call. Where OpInfo
expects torch's own gradient check to fail (``TestGradients.test_fn_grad`` an expected
failure, e.g. ``as_strided_scatter`` on 1.13), eager's gradient is no reference: gradients are
then compared by dtype, shape and finiteness.

Each (op, sample) is classified:

``ok``            the archive matches eager (both checks);
``verify-known``  ``verify`` fails where the Python reader passes, for a C++ problem issue 27
                  names (item 3: equal infinities / NaNs called different; item 2: random
                  ops) — reported, not counted as a mismatch;
``refused``       ``pt2rt.export`` raised ``CaptureError`` / ``ExportError`` /
                  ``ExportTypeError`` (``export: ...``), or the runtime refused an operator at
                  load (``pt2rt::OpResolutionError``: ``load: ...``);
``mismatch``      a check found a difference (``verify`` exit 1, or the Python comparison);
``crash``         any other exception, a signal, a timeout, another ``verify`` error;
``unusable``      eager PyTorch itself cannot run the sample in training mode, it returns no
                  tensor, or its tensors are not strided (the op has *no usable sample* when
                  none of its samples is usable).

An op's status is the worst of its samples' (crash > mismatch > refused > verify-known > ok).
Work runs in worker processes (``--jobs``), each sample with a timeout, so a crashing op
cannot take the sweep down; the op database is imported only in child processes.

Run it as a script (``scripts/opinfo_sweep.py`` wraps it; ``--help``); ``run_sweep`` is what
``tests/python/test_opinfo.py`` calls. What it cannot see: a value the capture bakes into a
graph (the check runs at the example inputs); the captures refuse those reads instead.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SAMPLE_SEED = 0

STATUS_ORDER = ["ok", "verify-known", "refused", "mismatch", "crash"]  # worse to the right
ALL_STATUSES = STATUS_ORDER + ["unusable", "not-run"]


# ---------------------------------------------------------------------------------------------
# Environment: torch's test utilities, the exporter


def prepare_imports() -> None:
    """Makes ``torch.testing._internal`` and ``pt2rt`` importable: the ``expecttest`` stub
    (``stubs/``) only where the real package is missing, and ``exporter/`` when ``pt2rt`` is
    not on the path already."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "stubs"))
    try:
        import pt2rt  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "exporter"))


def lane_name() -> str:
    """``torch1`` / ``torch2``: the torch major version (the baselines' file names)."""
    import torch
    return "torch" + torch.__version__.split(".")[0]


def op_key(op: Any) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def sweep_dtype(op: Any):
    """float32 where the op supports it forward and backward on the CPU, else float64, else
    None (not swept)."""
    import torch
    if not op.supports_autograd:
        return None
    fwd = op.supported_dtypes("cpu")
    bwd = op.supported_backward_dtypes("cpu")
    for dt in (torch.float32, torch.float64):
        if dt in fwd and dt in bwd:
            return dt
    return None


def eager_grad_unreliable(op: Any, dtype: Any) -> bool:
    """Whether OpInfo marks torch's own gradient check of ``op`` as an expected failure on the
    CPU for ``dtype`` (``TestGradients.test_fn_grad``, e.g. ``as_strided_scatter`` on torch
    1.13): eager's gradient is then no reference to compare an archive with."""
    import unittest
    for info in getattr(op, "decorators", ()) or ():
        if not hasattr(info, "is_active"):
            continue
        try:
            try:
                active = info.is_active("TestGradients", "test_fn_grad", "cpu", dtype, {})
            except TypeError:
                active = info.is_active("TestGradients", "test_fn_grad", "cpu", dtype)
        except Exception:
            continue
        if active and any(d is unittest.expectedFailure for d in info.decorators):
            return True
    return False


def _unseeded(op: Callable, *args: Any, **kwargs: Any) -> Any:
    return op(*args, **kwargs)


def swept_ops() -> Dict[str, Tuple[Any, Any]]:
    """``op key -> (OpInfo, dtype)`` for every op the sweep covers, in ``op_db`` order."""
    prepare_imports()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal import common_methods_invocations as cmi
    # Random ops of op_db call ``wrapper_set_seed`` (torch.manual_seed(42) around the op, so
    # that OpInfo's tests can compare two runs); inside a module that would be a reseed the
    # capture does not see. The sweep calls the ops unseeded and recognises them as random.
    if getattr(cmi, "wrapper_set_seed", None) is not None:
        cmi.wrapper_set_seed = _unseeded
    op_db = cmi.op_db
    out: Dict[str, Tuple[Any, Any]] = {}
    for op in op_db:
        dt = sweep_dtype(op)
        if dt is None:
            continue
        key = op_key(op)
        n = 2
        while key in out:  # no duplicates in torch 1.13 / 2.14; kept distinct if one appears
            key = f"{op_key(op)}#{n}"
            n += 1
        out[key] = (op, dt)
    return out


def list_ops() -> Dict[str, str]:
    """``op key -> dtype name`` of every swept op, computed in a child process: importing
    ``torch.testing._internal`` parses ``sys.argv`` and sets test-suite defaults, which must
    not reach the process that calls the sweep (pytest's)."""
    code = ("import json, sys; sys.path.insert(0, %r); import opinfo_sweep; "
            "print(json.dumps({k: str(v[1]).replace('torch.', '') "
            "for k, v in opinfo_sweep.swept_ops().items()}))" % HERE)
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise ImportError("torch's OpInfo database is not importable: "
                          + (p.stderr.strip().splitlines() or ["?"])[-1])
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# One sample -> one module


def _flatten_tensors(out: Any, acc: List[Any]) -> List[Any]:
    """The tensors of an op's result (tuples, lists, return-type structs, dicts), in order;
    anything else (ints, bools, None) is left out."""
    import torch
    if isinstance(out, torch.Tensor):
        acc.append(out)
    elif isinstance(out, (tuple, list)):
        for o in out:
            _flatten_tensors(o, acc)
    elif isinstance(out, dict):
        for k in out:
            _flatten_tensors(out[k], acc)
    return acc


def one_op_module(op: Any, sample: Any):
    """``(OneOp module, its example inputs)`` for one sample: every distinct tensor of
    ``(sample.input, sample.args, sample.kwargs)`` is a forward() input (detached, made
    contiguous, with the sample's ``requires_grad``); everything else is baked in."""
    import torch
    import torch.utils._pytree as pytree

    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    slots: List[int] = []        # leaf index -> input index (or -1: baked)
    inputs: List[torch.Tensor] = []
    seen: Dict[int, int] = {}
    consts: List[Any] = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            if id(leaf) not in seen:
                seen[id(leaf)] = len(inputs)
                # Contiguous, as the archive stores its example inputs and as the capture
                # traces them (non-contiguous samples would test the input-stride contract of
                # the readers, not the op).
                x = leaf.detach()
                if x.layout == torch.strided:
                    x = x.contiguous()
                if leaf.requires_grad and (x.is_floating_point() or x.is_complex()):
                    x.requires_grad_(True)
                inputs.append(x)
            slots.append(seen[id(leaf)])
            consts.append(None)
        else:
            slots.append(-1)
            consts.append(leaf)
    fn = op.op
    wrapper = getattr(op, "gradcheck_wrapper", None)
    if getattr(wrapper, "__name__", "") == "wrapper_set_seed":
        wrapper = _unseeded
    process = sample.output_process_fn_grad or (lambda o: o)

    class OneOp(torch.nn.Module):
        def forward(self, *xs):
            vals = [xs[s] if s >= 0 else c for s, c in zip(slots, consts)]
            inp, args, kwargs = pytree.tree_unflatten(vals, spec)
            if wrapper is not None:
                out = wrapper(fn, inp, *args, **kwargs)
            else:
                out = fn(inp, *args, **kwargs)
            return tuple(_flatten_tensors(process(out), []))

    OneOp.__qualname__ = OneOp.__name__ = "OneOp"
    return OneOp(), inputs


def _sample_text(sample: Any, limit: int = 160) -> str:
    import torch

    def show(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return f"{str(v.dtype).replace('torch.', '')}{list(v.shape)}"
        if isinstance(v, (list, tuple)):
            inner = ", ".join(show(e) for e in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner})"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}={show(e)}" for k, e in v.items()) + "}"
        return repr(v)

    parts = [show(sample.input)] + [show(a) for a in sample.args]
    parts += [f"{k}={show(v)}" for k, v in sample.kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Eager references


@dataclasses.dataclass
class Reference:
    eval_outputs: List[Any]
    train_outputs: List[Any]
    grads: Dict[int, Any]            # input index -> gradient (zeros where none reached it)
    random: bool
    diff: List[int]                  # outputs with a cotangent (floating, requiring grad)


def _run_eval(mod, xs):
    import torch
    with torch.no_grad():
        return [o.detach().clone() for o in mod.eval()(*[x.detach() for x in xs])]


def _equal(x, y) -> bool:
    """Bitwise-equal values (NaN equal to NaN)."""
    import torch
    if x.is_complex():
        x, y = torch.view_as_real(x), torch.view_as_real(y)
    if x.is_floating_point():
        return torch.equal(torch.isnan(x), torch.isnan(y)) and \
            torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
    return torch.equal(x, y)


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    import torch
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype or x.layout != y.layout:
            return False
        if x.layout != torch.strided:
            x, y = x.to_dense(), y.to_dense()
        if not _equal(x, y):
            return False
    return True


def eager_reference(mod, xs, dtype=None) -> Reference:
    """Eval outputs, training outputs and input gradients (ones as cotangents of every
    floating output that requires grad) of eager PyTorch; ``dtype``: run with floating inputs
    cast to it (the float64 references). Raises whatever the op raises."""
    import torch
    if dtype is not None:
        xs = [x.detach().to(dtype).requires_grad_(x.requires_grad)
              if x.is_floating_point() else x for x in xs]
    with torch.random.fork_rng(devices=[]):
        # Random: the op draws from the generator (its state moves), or two seeds give
        # different results.
        torch.manual_seed(0)
        state = torch.get_rng_state()
        ev = _run_eval(mod, xs)
        random = not torch.equal(state, torch.get_rng_state())
        torch.manual_seed(1)
        random = random or not _same(ev, _run_eval(mod, xs))
        torch.manual_seed(0)
        leaves = [x.detach().requires_grad_(x.requires_grad) for x in xs]
        with torch.enable_grad():
            outs = list(mod.train()(*leaves))
            random = random or not torch.equal(state, torch.get_rng_state())
            diff_idx = [i for i, o in enumerate(outs) if o.requires_grad and o.is_floating_point()]
            diff = [outs[i] for i in diff_idx]
            want = [i for i, x in enumerate(leaves) if x.requires_grad]
            grads: Dict[int, Any] = {}
            if diff and want:
                got = torch.autograd.grad(diff, [leaves[i] for i in want],
                                          [torch.ones_like(o) for o in diff], allow_unused=True)
                for i, g in zip(want, got):
                    grads[i] = torch.zeros_like(leaves[i]) if g is None else g.detach()
            else:
                grads = {i: torch.zeros_like(leaves[i]) for i in want}
    return Reference(ev, [o.detach() for o in outs], grads, random, diff_idx)


# ---------------------------------------------------------------------------------------------
# Comparison


def _close(actual, expected, expected64=None) -> Optional[str]:
    """None when ``actual`` passes against ``expected`` (assert_close defaults, equal_nan; for
    float32 outside them: no farther from eager float64 than eager float32 is, times 4 plus
    the default tolerance), else a short reason."""
    import torch
    if actual is None:
        return "missing"
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)} vs eager {list(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} vs eager {expected.dtype}"
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, check_stride=False)
        return None
    except AssertionError as e:
        first = str(e).strip().splitlines()
        why = "; ".join(line.strip() for line in first[:3] if line.strip())
    if expected64 is not None and expected.dtype == torch.float32 and expected.is_floating_point():
        a, e, r = actual.double(), expected.double(), expected64.double()
        ref_err = (e - r).abs()
        tol = 1e-5 + 1.3e-6 * r.abs()
        ok = ((a - r).abs() <= 4 * ref_err + tol) | (torch.isnan(a) & torch.isnan(r)) | (a == r)
        if bool(ok.all()):
            return None
        why += " (also outside the float64 rule)"
    return why


def _meta_only(actual, expected) -> Optional[str]:
    """Random results: same dtype and shape, finite wherever eager is all finite."""
    import torch
    if actual is None:
        return "missing"
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return (f"{actual.dtype}{list(actual.shape)} vs eager "
                f"{expected.dtype}{list(expected.shape)}")
    if actual.is_floating_point() and bool(torch.isfinite(expected).all()) and \
            not bool(torch.isfinite(actual).all()):
        return "non-finite values where eager's are finite"
    return None


def compare(ref: Reference, ref64: Optional[Reference], inf_out, train_out,
            grads: Dict[str, Any], grads_by_meta: bool = False) -> List[str]:
    """The problems found (empty: the archive matches eager). ``grads_by_meta``: compare the
    gradients by dtype, shape and finiteness only (eager's own gradient is known wrong)."""
    problems: List[str] = []
    meta = lambda a, e, e64: _meta_only(a, e)  # noqa: E731
    check = meta if ref.random else _close
    grad_check = meta if grads_by_meta else check

    def pairs(name, got, want, want64):
        if len(got) != len(want):
            problems.append(f"{name}: {len(got)} outputs vs eager {len(want)}")
            return
        for i, (a, e) in enumerate(zip(got, want)):
            why = check(a, e, None if want64 is None else want64[i])
            if why:
                problems.append(f"{name}[{i}]: {why}")

    pairs("output", inf_out, ref.eval_outputs, ref64.eval_outputs if ref64 else None)
    pairs("train output", train_out, ref.train_outputs, ref64.train_outputs if ref64 else None)
    for i, g in ref.grads.items():
        got = grads.get(f"input:{i}")
        if got is None:
            got = g.new_zeros(g.shape)  # no Grad output: no gradient path, eager's zeros
        why = grad_check(got, g, None if ref64 is None else ref64.grads.get(i))
        if why:
            problems.append(f"grad input:{i}: {why}")
    return problems


# ---------------------------------------------------------------------------------------------
# One sample, end to end


def _first_line(e: BaseException, limit: int = 300) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def run_verify(cli: str, path: str, timeout: float) -> Tuple[str, str]:
    """``export-cli verify``: (status, reason)."""
    try:
        # --trusted: the sweep made the archive; the run bounds for untrusted archives
        # (LoadOptions::run) would refuse a few large samples (conv_transpose3d: 36 MB).
        p = subprocess.run([cli, "verify", path, "--trusted"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "crash", f"verify: timed out after {timeout:.0f} s"
    if p.returncode == 0:
        return "ok", ""
    err = " ".join(p.stderr.split())
    if p.returncode == 1:
        fails = [" ".join(line.split()) for line in p.stdout.splitlines() if "FAIL" in line]
        return "mismatch", "verify: " + ("; ".join(fails[:3]) or err)[:300]
    if p.returncode == 2 and "OpResolutionError" in err:
        return "refused", "load: " + err.split("OpResolutionError: ", 1)[-1][:300]
    if p.returncode < 0:
        return "crash", f"verify: killed by signal {-p.returncode}"
    return "crash", f"verify: exit {p.returncode}: {err[:300]}"


_NON_FINITE = re.compile(r"(?<![A-Za-z])-?(nan|inf)(?![A-Za-z])", re.IGNORECASE)


def _known_verify_issue(verdict: Tuple[str, str], verdicts: List[Tuple[str, str]],
                        random: bool, bad_grad: bool = False) -> Tuple[str, str]:
    """A ``verify`` mismatch where the Python reader's check of the same archive passed and
    the failure is one of ``verify``'s own known problems (issue 27, C++ side) becomes
    ``verify-known``: item 3, every failing row compares non-finite values on both sides
    (``inf`` vs ``inf``, NaN vs NaN, which ``assert_close`` calls equal); item 2, the op draws
    random numbers (the reader compared it by dtype, shape and finiteness)."""
    status, reason = verdict
    reader_ok = ("ok", "") in verdicts
    if status != "mismatch" or not reason.startswith("verify") or not reader_ok:
        return verdict
    rows = [r for r in reason[len("verify: "):].split("; ")
            if "FAIL" in r and "checks differ" not in r]
    if rows and all(len(_NON_FINITE.findall(r)) >= 2 for r in rows):
        return "verify-known", f"verify (C++, issue 27 item 3: equal non-finite values): {reason}"
    if random:
        return "verify-known", f"verify (C++, issue 27 item 2: random op): {reason}"
    if bad_grad and rows and all(" grad " in f" {r} " for r in rows):
        return "ok", ""  # verify compares with eager's gradient, which OpInfo knows is wrong
    return verdict


def check_sample(op: Any, dtype: Any, sample: Any, cli: Optional[str], workdir: str,
                 timeout: float) -> Dict[str, Any]:
    """One (op, sample) through export and both checks; a result dict with ``status``,
    ``reason``, ``random``, ``sample`` (a short description)."""
    import torch
    import pt2rt
    res: Dict[str, Any] = {"sample": _sample_text(sample), "random": False}
    try:
        mod, xs = one_op_module(op, sample)
        ref = eager_reference(mod, xs)
    except Exception as e:
        return dict(res, status="unusable", reason=f"eager: {type(e).__name__}: {_first_line(e)}")
    if not ref.train_outputs:
        return dict(res, status="unusable", reason="returns no tensor")
    bad = [x for x in xs if x.layout != torch.strided] + \
        [o for o in ref.train_outputs if o.layout != torch.strided]
    if bad:
        return dict(res, status="unusable", reason=f"{bad[0].layout} tensors")
    res["random"] = ref.random
    bad_grad = eager_grad_unreliable(op, dtype)
    if bad_grad:
        res["eager_grad_unreliable"] = True
    ref64 = None
    if dtype == torch.float32 and not ref.random:
        try:
            ref64 = eager_reference(mod, xs, torch.float64)
        except Exception:
            ref64 = None
    path = os.path.join(workdir, "sample.pt2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # train=True needs something to differentiate (else export refuses, by design)
            train = bool(ref.diff) and any(x.requires_grad for x in xs)
            exported = pt2rt.export(mod, tuple(xs), train=train)
            exported.save(path)
        except (pt2rt.CaptureError, pt2rt.ExportError) as e:
            return dict(res, status="refused", reason=f"export: {_first_line(e)}")
        except Exception as e:
            return dict(res, status="crash",
                        reason=f"export raised {type(e).__name__}: {_first_line(e)}")
    verdicts: List[Tuple[str, str]] = []
    if cli:
        verdicts.append(run_verify(cli, path, timeout))
    try:
        loaded = pt2rt.load(path)
        plain = [x.detach() for x in xs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inf_out = loaded.run_inference(*plain)
            if train:
                # pt2rt's convention (and the references'): ones as the cotangents of the
                # floating outputs that require grad; a Tangent of any other output (a complex
                # one, lane 2) gets zeros.
                ones = [torch.ones_like(o) if i in ref.diff else None
                        for i, o in enumerate(ref.train_outputs)]
                step = loaded.train_step(*plain, grad_outputs=ones)
                train_out, grads = step.outputs, step.grads
            else:
                train_out, grads = ref.train_outputs, {}
        problems = compare(ref, ref64, inf_out, train_out, grads, grads_by_meta=bad_grad)
        verdicts.append(("mismatch", "reader: " + "; ".join(problems)[:300]) if problems
                        else ("ok", ""))
    except Exception as e:
        verdicts.append(("crash", f"reader raised {type(e).__name__}: {_first_line(e)}"))
    verdicts = [_known_verify_issue(v, verdicts, ref.random, bad_grad) for v in verdicts]
    worst = max(verdicts, key=lambda v: STATUS_ORDER.index(v[0]))
    reasons = [r for s, r in verdicts if s == worst[0] and r]
    return dict(res, status=worst[0], reason=" | ".join(reasons))


# ---------------------------------------------------------------------------------------------
# Workers


def _samples(op: Any, dtype: Any) -> Iterable[Any]:
    import torch
    torch.manual_seed(SAMPLE_SEED)
    return iter(op.sample_inputs("cpu", dtype, requires_grad=True))


def worker_main(conn, cli: Optional[str], timeout: float) -> None:
    """A worker process: receives ``(op key, first sample index, max samples, op budget s)``,
    sends ``("start", i)`` before and ``("result", i, dict)`` after each sample, then
    ``("done", n_samples_total_or_None)``."""
    import torch
    warnings.simplefilter("ignore")  # torch's and the ops' warnings are not results
    torch.set_num_threads(1)
    ops = swept_ops()
    with tempfile.TemporaryDirectory(prefix="pt2rt-opinfo-") as workdir:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                return
            if msg is None:
                return
            key, start, max_samples, op_budget = msg
            op, dtype = ops[key]
            t0 = time.monotonic()
            exhausted = True
            try:
                it = _samples(op, dtype)
                for i, sample in enumerate(it):
                    if max_samples is not None and i >= max_samples:
                        exhausted = False
                        break
                    if i < start:
                        continue
                    if i > 0 and op_budget is not None and time.monotonic() - t0 > op_budget:
                        exhausted = False
                        break
                    conn.send(("start", i))
                    s0 = time.monotonic()
                    with torch.random.fork_rng(devices=[]):
                        r = check_sample(op, dtype, sample, cli, workdir, timeout)
                    r["seconds"] = round(time.monotonic() - s0, 2)
                    conn.send(("result", i, r))
            except Exception as e:  # the sample generator itself failed
                conn.send(("result", -1, {"status": "crash", "sample": "(sample_inputs)",
                                          "reason": f"sample_inputs raised {type(e).__name__}: "
                                                    f"{_first_line(e)}", "random": False}))
            conn.send(("done", exhausted))


class Worker:
    def __init__(self, ctx, cli: Optional[str], timeout: float):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, cli, timeout), daemon=True)
        self.proc.start()
        child.close()
        self.job: Optional[Tuple[str, int]] = None
        self.deadline = 0.0
        self.current = -1

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
        self.proc.join(5)
        with contextlib.suppress(Exception):
            self.conn.close()


# ---------------------------------------------------------------------------------------------
# The sweep


@dataclasses.dataclass
class OpResult:
    op: str
    dtype: str
    samples: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    complete: bool = True      # every sample was run (False: stopped by --samples / budget)

    @property
    def status(self) -> str:
        run = [s for s in self.samples if s["status"] in STATUS_ORDER]
        if not run:
            if not self.samples:
                return "not-run"
            return "unusable"
        return max((s["status"] for s in run), key=STATUS_ORDER.index)

    @property
    def reason(self) -> str:
        st = self.status
        if st == "ok":
            notes = []
            if any(s.get("random") for s in self.samples if s["status"] == "ok"):
                notes.append("random: compared by dtype, shape and finiteness")
            if any(s.get("eager_grad_unreliable") for s in self.samples):
                notes.append("gradients compared by dtype, shape and finiteness: OpInfo "
                             "expects torch's own gradcheck to fail (TestGradients.test_fn_grad)")
            return "; ".join(notes)
        for s in self.samples:
            if s["status"] == st:
                return f"sample {s.get('index', 0)}: {s.get('reason', '')}"
        return ""


def run_sweep(ops: Optional[Sequence[str]] = None, *, max_samples: Optional[int] = 1,
              op_budget: Optional[float] = 30.0, budget: Optional[float] = None,
              cli: Optional[str] = None, jobs: int = 2, timeout: float = 120.0,
              progress: Optional[Callable[[str], None]] = None) -> Dict[str, OpResult]:
    """Runs the sweep over ``ops`` (keys; None: every swept op) and returns their results.

    ``max_samples``: samples per op (None: all); ``op_budget``: seconds after which an op's
    further samples are skipped; ``budget``: seconds after which no further op is started
    (those left are ``not-run``); ``timeout``: per sample (a sample past it is a crash);
    ``cli``: the ``export-cli`` to verify with (None: Python reader only)."""
    catalog = list_ops()
    keys = list(catalog) if ops is None else list(ops)
    unknown = [k for k in keys if k not in catalog]
    results = {k: OpResult(k, catalog[k]) for k in keys if k in catalog}
    for k in unknown:
        results[k] = OpResult(k, "-", [{"status": "unusable", "sample": "-", "random": False,
                                        "reason": "no such OpInfo with float32/float64 "
                                                  "autograd on this torch"}])
    queue = [(k, 0) for k in keys if k in catalog]
    ctx = mp.get_context("spawn")
    t0 = time.monotonic()
    workers: List[Worker] = []
    try:
        workers = [Worker(ctx, cli, timeout) for _ in range(max(1, min(jobs, len(queue))))]
        startup = 180.0  # importing torch + op_db in a fresh worker
        for w in workers:
            w.deadline = time.monotonic() + startup
        while queue or any(w.job for w in workers):
            for n, w in enumerate(workers):
                if w.job is None and queue:
                    if budget is not None and time.monotonic() - t0 > budget:
                        queue.clear()
                        break
                    key, start = queue.pop(0)
                    w.job, w.current = (key, start), start - 1
                    w.deadline = max(w.deadline, time.monotonic() + timeout)
                    w.conn.send((key, start, max_samples, op_budget))
            busy = [w for w in workers if w.job]
            if not busy:
                continue
            ready = mp.connection.wait([w.conn for w in busy] + [w.proc.sentinel for w in busy],
                                       timeout=5.0)
            for n, w in enumerate(workers):
                if w.job is None:
                    continue
                dead = not w.proc.is_alive()
                while not dead and w.conn in ready and w.conn.poll():
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        dead = True
                        break
                    key = w.job[0]
                    if msg[0] == "start":
                        w.current = msg[1]
                        w.deadline = time.monotonic() + timeout
                    elif msg[0] == "result":
                        results[key].samples.append(dict(msg[2], index=msg[1]))
                        w.deadline = time.monotonic() + timeout
                    elif msg[0] == "done":
                        results[key].complete = bool(msg[1])
                        if progress:
                            r = results[key]
                            progress(f"{key}: {r.status} ({len(r.samples)} samples) {r.reason}"
                                     .rstrip())
                        w.job = None
                        break
                if w.job is None:
                    continue
                timed_out = time.monotonic() > w.deadline
                if dead or timed_out:
                    key, _ = w.job
                    i = max(w.current, 0)
                    why = (f"timed out after {timeout:.0f} s" if timed_out and not dead else
                           f"the worker died (exit code {w.proc.exitcode})")
                    results[key].samples.append({"status": "crash", "index": i, "random": False,
                                                 "sample": f"#{i}", "reason": why})
                    w.kill()
                    nw = Worker(ctx, cli, timeout)
                    nw.deadline = time.monotonic() + startup
                    workers[n] = nw
                    queue.insert(0, (key, i + 1))  # the op's remaining samples
                    if progress:
                        progress(f"{key}: sample {i}: crash ({why})")
    finally:
        for w in workers:
            with contextlib.suppress(Exception):
                w.conn.send(None)
        for w in workers:
            w.proc.join(10)
            if w.proc.is_alive():
                w.kill()
    for r in results.values():
        r.samples.sort(key=lambda s: s.get("index", 0))
    return results


# ---------------------------------------------------------------------------------------------
# Reports


def summary(results: Dict[str, OpResult], lane: str) -> Dict[str, Any]:
    counts = {s: 0 for s in ALL_STATUSES}
    for r in results.values():
        counts[r.status] += 1
    usable = sum(counts[s] for s in STATUS_ORDER)
    samples = sum(len(r.samples) for r in results.values())
    pct = 100.0 * counts["ok"] / usable if usable else 0.0
    line = (f"summary {lane}: {len(results)} ops, {samples} samples: {counts['ok']} ok, "
            f"{counts['refused']} refused, {counts['mismatch']} mismatch, {counts['crash']} "
            f"crash, {counts['verify-known']} verify-known (C++ verify, issue 27 items 2-3), "
            f"{counts['unusable']} no usable sample"
            + (f", {counts['not-run']} not run" if counts["not-run"] else "")
            + f"; ok {counts['ok']}/{usable} = {pct:.1f} % of the ops with a usable sample")
    return dict(counts, usable=usable, ok_percent=pct, line=line, samples=samples)


def write_table(results: Dict[str, OpResult], path: str, lane: str, header: str) -> str:
    """The result table (one row per op: op, lane, dtype, samples run, status, reason) and
    the summary line; returns the summary line."""
    import torch
    s = summary(results, lane)
    lines = [f"# pt2rt OpInfo sweep ({header}); torch {torch.__version__}",
             "# op\tlane\tdtype\tsamples\tstatus\treason"]
    for key, r in results.items():
        n_ok = sum(1 for x in r.samples if x["status"] == "ok")
        counted = f"{n_ok}/{len(r.samples)}" + ("" if r.complete else "+")
        st = r.status if r.status not in ("refused",) else "refused"
        lines.append(f"{key}\t{lane}\t{r.dtype}\t{counted}\t{st}\t{r.reason}")
    lines.append(s["line"])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return s["line"]


def write_json(results: Dict[str, OpResult], path: str, lane: str) -> None:
    with open(path, "w") as f:
        json.dump({"lane": lane, "ops": {k: {"dtype": r.dtype, "status": r.status,
                                             "complete": r.complete, "samples": r.samples}
                                         for k, r in results.items()}}, f, indent=1)


def read_table(path: str) -> Tuple[str, Dict[str, Tuple[str, str]]]:
    """(lane, op -> (status, reason)) of a table written by ``write_table``."""
    lane, rows = "", {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("summary") or not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            lane = parts[1]
            rows[parts[0]] = (parts[4], parts[5] if len(parts) > 5 else "")
    return lane, rows


def merge_tables(paths: Sequence[str], out: str) -> None:
    """One op x lane table from per-lane tables."""
    lanes, tables = [], []
    for p in paths:
        lane, rows = read_table(p)
        lanes.append(lane)
        tables.append(rows)
    ops: List[str] = []
    for t in tables:
        ops += [k for k in t if k not in ops]
    with open(out, "w") as f:
        f.write("| op | " + " | ".join(lanes) + " |\n|---|" + "---|" * len(lanes) + "\n")
        for k in ops:
            cells = []
            for t in tables:
                st, why = t.get(k, ("-", ""))
                cells.append(st if st == "ok" or not why else f"{st} ({why.replace('|', '/')})")
            f.write(f"| {k} | " + " | ".join(cells) + " |\n")


def baseline_path(lane: str) -> str:
    return os.path.join(HERE, f"ok_{lane}.txt")


def read_baseline(lane: str) -> List[str]:
    path = baseline_path(lane)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def write_baseline(results: Dict[str, OpResult], lane: str) -> str:
    """Writes ``ok_<lane>.txt`` from a sweep's results (run it on the first samples of every
    op: what the CI test compares)."""
    path = baseline_path(lane)
    ok = [k for k, r in results.items() if r.status == "ok"]
    with open(path, "w") as f:
        f.write(f"# ops the OpInfo sweep finds ok on lane {lane} (first sample; "
                "tests/opinfo/opinfo_sweep.py\n# --update-baseline writes this file): "
                "tests/python/test_opinfo.py fails when one of them\n# that it runs is no "
                "longer ok\n")
        f.write("\n".join(ok) + "\n")
    return path


def regressions(results: Dict[str, OpResult], lane: str) -> List[str]:
    """Ops of the baseline that were run and are no longer ok."""
    return [k for k in read_baseline(lane) if k in results and
            results[k].status not in ("ok", "not-run", "verify-known")]


def default_cli() -> Optional[str]:
    build = os.environ.get("PT2RT_BUILD_DIR")
    cands = [os.path.join(build, "cli", "export-cli")] if build else []
    cands.append(os.path.join(REPO, "build" if lane_name() == "torch1" else "build-torch2",
                              "cli", "export-cli"))
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        description="Export every differentiable OpInfo of torch's op_db with pt2rt and check "
                    "the archive against eager PyTorch (tests/opinfo/opinfo_sweep.py)")
    ap.add_argument("--all-samples", action="store_true",
                    help="every sample input of each op (default: the first one only), "
                         "within --op-budget per op")
    ap.add_argument("--samples", type=int, default=None,
                    help="at most this many samples per op (default: 1, or all with "
                         "--all-samples)")
    ap.add_argument("--op-budget", type=float, default=60.0,
                    help="seconds per op after which its remaining samples are skipped "
                         "(default 60)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds after which no further op is started (default: none)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds per sample before it counts as a crash (default 120)")
    ap.add_argument("--ops", "-k", default=None,
                    help="regular expression: only ops whose name matches (re.search)")
    ap.add_argument("--op-list", default=None,
                    help="a file of op names, one per line (# comments)")
    ap.add_argument("--export-cli", default=None,
                    help="export-cli to verify with (default: $PT2RT_BUILD_DIR/cli/export-cli, "
                         "else the lane's build dir)")
    ap.add_argument("--no-cli", action="store_true", help="skip export-cli verify")
    ap.add_argument("--jobs", "-j", type=int, default=max(1, min(2, os.cpu_count() or 1)),
                    help="worker processes (default: min(2, CPUs))")
    ap.add_argument("--output", "-o", default=None,
                    help="result table (default: opinfo_<lane>.txt in the current directory)")
    ap.add_argument("--json", default=None, help="also write every sample's result as JSON")
    ap.add_argument("--update-baseline", action="store_true",
                    help="write tests/opinfo/ok_<lane>.txt from this run's ok ops")
    ap.add_argument("--merge", nargs="+", metavar="TABLE",
                    help="only merge per-lane tables into one op x lane markdown table "
                         "(--output)")
    ap.add_argument("--list", action="store_true", help="list the swept ops and exit")
    ap.add_argument("--quiet", "-q", action="store_true")
    a = ap.parse_args(argv)
    prepare_imports()
    if a.merge:
        merge_tables(a.merge, a.output or "opinfo_lanes.md")
        return 0
    catalog = list_ops()
    keys = list(catalog)
    if a.op_list:
        with open(a.op_list) as f:
            keys = [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]
    if a.ops:
        keys = [k for k in keys if re.search(a.ops, k)]
    if a.list:
        for k in keys:
            print(k, catalog.get(k, "-"))
        return 0
    lane = lane_name()
    cli = None if a.no_cli else (a.export_cli or default_cli())
    if not a.no_cli and cli is None:
        print("opinfo sweep: no export-cli found (--export-cli PATH or --no-cli)",
              file=sys.stderr)
        return 2
    max_samples = a.samples if a.samples is not None else (None if a.all_samples else 1)
    t0 = time.monotonic()
    results = run_sweep(keys, max_samples=max_samples, op_budget=a.op_budget, budget=a.budget,
                        cli=cli, jobs=a.jobs, timeout=a.timeout,
                        progress=None if a.quiet else lambda s: print(s, flush=True))
    out = a.output or f"opinfo_{lane}.txt"
    header = (f"lane {lane}, samples {'all' if max_samples is None else max_samples} per op, "
              f"export-cli {cli or 'not used'}, {time.monotonic() - t0:.0f} s")
    line = write_table(results, out, lane, header)
    if a.json:
        write_json(results, a.json, lane)
    print(line)
    print(f"table: {out}")
    regressed = regressions(results, lane)
    if regressed:
        print(f"regressed from ok (baseline {baseline_path(lane)}): {', '.join(regressed)}")
    if a.update_baseline:
        print(f"baseline written: {write_baseline(results, lane)}")
    bad = [k for k, r in results.items() if r.status in ("mismatch", "crash")]
    return 1 if bad or regressed else 0


if __name__ == "__main__":
    sys.exit(main())
