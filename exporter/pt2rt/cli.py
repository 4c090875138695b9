"""``python -m pt2rt``: export from the command line, and inspect archives.

    python -m pt2rt save <file.py|module>:<callable> <out.pt2> [--inputs in.pt]
                         [--no-train] [--no-inference] [--no-examples] [--full-references]
                         [--partitioner default|min_cut] [--optimize-inference]
                         [--dynamic ARG:DIM=NAME[MIN,MAX] ...]
    python -m pt2rt inspect <model.pt2>

``save``: the callable (no arguments) returns ``(model, example_args)`` — ``example_args`` a
tensor or a tuple/list of tensors — or just a model, whose example inputs then come from
``--inputs``: a file written by ``torch.save`` holding a tuple/list of tensors (loaded with
``weights_only=True``). Prints a summary of the archive. Exit status 0 on success, 1 when the
export fails (the message names why), 2 on bad command-line usage.

Failures print one line on stderr (``pt2rt: error: ...``); ``--verbose`` (before or after the
subcommand: ``python -m pt2rt --verbose save ...``) prints the whole message and the Python
traceback. ``--version`` prints the pt2rt, archive format, schema, torch and Python versions.
``--full-references`` bundles every gradient reference in full instead of a sketch
(``grad_sketch.py``).

``--dynamic`` (repeatable) marks a dynamic dim (``pt2rt.Dim``): ``x:0=batch[1,512]`` makes dim
0 of argument ``x`` the Dim ``batch`` in [1, 512] (``batch[1,]``: unbounded); a later
``y:0=batch`` reuses it (equal sizes), ``y:0=batch+1`` / ``2*batch`` derive from it
(``dynamic.parse_cli``).
"""
from __future__ import annotations

import argparse
import logging
import importlib
import importlib.util
import os
import sys
from typing import Optional, Sequence, Tuple

import torch


class UsageError(Exception):
    """Bad command-line arguments (exit status 2)."""


def resolve_callable(spec: str):
    """``path/to/file.py:name`` or ``package.module:name`` -> the object ``name``."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise UsageError(f"expected <file.py or module>:<callable>, got {spec!r}")
    if target.endswith(".py") or os.sep in target:
        if not os.path.isfile(target):
            raise UsageError(f"no such file: {target}")
        name = "_pt2rt_user_" + os.path.splitext(os.path.basename(target))[0]
        mod_spec = importlib.util.spec_from_file_location(name, target)
        module = importlib.util.module_from_spec(mod_spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        try:
            mod_spec.loader.exec_module(module)
        finally:
            sys.path.pop(0)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise UsageError(f"cannot import module {target!r}: {e}") from e
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UsageError(f"{target} has no attribute {attr!r}") from None


def load_inputs(path: str) -> Tuple[torch.Tensor, ...]:
    """A ``torch.save`` file holding a tensor or a tuple/list of tensors."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise UsageError(f"cannot read --inputs {path}: {type(e).__name__}: {e}") from e
    if isinstance(obj, torch.Tensor):
        obj = (obj,)
    if not isinstance(obj, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in obj):
        raise UsageError(f"--inputs {path} must hold a tensor or a tuple/list of tensors, got "
                         f"{type(obj).__name__}")
    return tuple(obj)


def _model_and_args(spec: str, inputs: Optional[str]) -> Tuple[torch.nn.Module, Tuple]:
    fn = resolve_callable(spec)
    result = fn() if callable(fn) and not isinstance(fn, torch.nn.Module) else fn
    if isinstance(result, torch.nn.Module):
        if inputs is None:
            raise UsageError(f"{spec} returned a model without example inputs; pass --inputs")
        return result, load_inputs(inputs)
    if isinstance(result, (tuple, list)) and len(result) == 2:
        model, args = result
        if inputs is not None:
            args = load_inputs(inputs)
        if isinstance(args, torch.Tensor):
            args = (args,)
        return model, tuple(args) if isinstance(args, (list, tuple)) else args
    raise UsageError(f"{spec} must return (model, example_args) or a model, got "
                     f"{type(result).__name__}")


def cmd_save(ns: argparse.Namespace) -> int:
    import pt2rt
    from .capture.dynamic import parse_cli
    dynamic = parse_cli(ns.dynamic) if ns.dynamic else None
    model, args = _model_and_args(ns.target, ns.inputs)
    _show_progress()
    exported = pt2rt.export(model, args, train=not ns.no_train, inference=not ns.no_inference,
                            partitioner=ns.partitioner, bundle_examples=not ns.no_examples,
                            full_references=ns.full_references,
                            optimize_inference=ns.optimize_inference, dynamic_shapes=dynamic)
    exported.save(ns.out)
    print(f"wrote {ns.out} ({os.path.getsize(ns.out)} bytes)")
    print(exported.summary())
    return 0


def _show_progress() -> None:
    """The exporter's progress (logger "pt2rt.export", INFO) on stdout, with the elapsed time,
    so a long export is not silent (stderr stays for the one-line error)."""
    log = logging.getLogger("pt2rt.export")
    if any(getattr(h, "pt2rt_progress", False) for h in log.handlers):
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("pt2rt save: %(message)s"))
    handler.pt2rt_progress = True
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def cmd_inspect(ns: argparse.Namespace) -> int:
    import pt2rt
    print(pt2rt.load(ns.archive).summary())
    return 0


def _version_text() -> str:
    """``python -m pt2rt --version``: pt2rt, archive format and schema, torch and Python (the
    first line matches ``export-cli --version``'s)."""
    from .ir import constants
    from .version import __version__
    return (f"pt2rt {__version__}\narchive format {constants.ARCHIVE_FORMAT} "
            f"{constants.ARCHIVE_VERSION}, schema {constants.SCHEMA_MAJOR}."
            f"{constants.SCHEMA_MINOR}\ntorch {torch.__version__}, Python "
            f"{sys.version.split()[0]}")


class _VersionAction(argparse.Action):
    """``--version`` (argparse's own "version" action would re-wrap the lines)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pt2rt", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action=_VersionAction, nargs=0,
                   help="print the pt2rt, archive format, schema, torch and Python versions")
    p.add_argument("--verbose", action="store_true",
                   help="on failure, print the whole message and the Python traceback")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save", help="export a model to a .pt2 archive")
    s.add_argument("target", help="<file.py or module>:<callable>")
    s.add_argument("out", help="output archive path (.pt2)")
    s.add_argument("--inputs", help="torch.save file with a tuple/list of example tensors")
    s.add_argument("--no-train", action="store_true", help="skip the forward/backward graphs")
    s.add_argument("--no-inference", action="store_true", help="skip the inference graph")
    s.add_argument("--no-examples", action="store_true", help="do not bundle example references")
    s.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                   help="on failure, print the whole message and the Python traceback")
    s.add_argument("--full-references", action="store_true",
                   help="bundle every gradient reference in full (default: compact sketches)")
    s.add_argument("--partitioner", choices=["default", "min_cut"], default="default")
    s.add_argument("--optimize-inference", action="store_true",
                   help="fold BatchNorm into the convolution/linear before it in the inference "
                        "graph (pt2rt.passes.inference_passes)")
    s.add_argument("--dynamic", action="append", metavar="ARG:DIM=NAME[MIN,MAX]",
                   help="a dynamic dim, e.g. x:0=batch[1,512] (repeatable; y:0=batch reuses "
                        "it, y:0=batch+1 derives from it)")
    s.set_defaults(func=cmd_save)
    i = sub.add_parser("inspect", help="print a summary of an archive")
    i.add_argument("archive")
    i.set_defaults(func=cmd_inspect)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    from .errors import ExportError, FormatError
    try:
        return ns.func(ns)
    except UsageError as e:
        parser.print_usage(sys.stderr)
        print(f"pt2rt: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 — every failure: one line, or in full with --verbose
        known = isinstance(e, (ExportError, FormatError, OSError))
        if getattr(ns, "verbose", False):
            import traceback
            traceback.print_exc()
            print(f"pt2rt: error: {e}", file=sys.stderr)
        else:
            lines = [line for line in str(e).splitlines() if line.strip()]
            what = lines[0] if lines else ""
            what = what if known else f"{type(e).__name__}: {what}"
            more = " ..." if len(lines) > 1 else ""
            print(f"pt2rt: error: {what}{more} (--verbose: the full message and traceback)",
                  file=sys.stderr)
        return 1
