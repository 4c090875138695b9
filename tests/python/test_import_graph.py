"""The source tree's stages depend one way (issue 25).

Exporter (``exporter/pt2rt``): no module imports, at module level or inside a function, a module
that imports it back, directly or through others; and the subpackages form layers —
``ir`` < ``ops`` < ``passes`` < ``format`` < ``capture`` (with ``capture/torch1``,
``capture/torch2``) < the package's top (``pt2rt/__init__.py``, ``cli.py``) — each importing
only its own layer or lower ones (``errors``, ``version`` and the generated ``fb`` bindings are
below them all).

Runtime (``runtime/``): the stage folders form layers — ``core`` < ``kernels`` < ``plan`` <
``exec`` < ``model`` — and a file includes runtime headers of its own stage or lower ones
(``runtime/README.md``)."""
import ast
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PKG = os.path.join(ROOT, "exporter", "pt2rt")
RUNTIME = os.path.join(ROOT, "runtime")

PY_LAYERS = {"errors": 0, "version": 0, "fb": 0, "ir": 1, "ops": 2, "passes": 3, "format": 4,
             "capture": 5, "": 6}
CPP_LAYERS = {"core": 0, "kernels": 1, "plan": 2, "exec": 3, "model": 4}


def _modules():
    """Dotted module names under pt2rt (``capture.torch1.dynamic_torch1``; ``""`` for the
    package itself), each with its file."""
    out = {}
    for d, dirs, files in os.walk(PKG):
        dirs[:] = [x for x in dirs if x not in ("fb", "__pycache__")]
        pkg = os.path.relpath(d, PKG).replace(os.sep, ".").strip(".")
        pkg = "" if pkg == "." else pkg
        for f in files:
            if f.endswith(".py"):
                name = pkg if f == "__init__.py" else ".".join(x for x in (pkg, f[:-3]) if x)
                out[name] = (os.path.join(d, f), f == "__init__.py")
    return out


def _edges():
    mods = _modules()
    edges = {m: set() for m in mods}
    for m, (path, is_init) in mods.items():
        package = m if is_init else m.rpartition(".")[0]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)]
            elif (node.module or "").split(".")[0] == "pt2rt":
                base, node_module = [], node.module.split(".", 1)[1:]
            else:
                continue
            module = node.module if node.level else (node_module[0] if node_module else None)
            target = ".".join(base + (module.split(".") if module else []))
            for alias in node.names:  # `from . import x` names a module when x is one
                sub = ".".join(x for x in (target, alias.name) if x)
                edges[m].add(sub if sub in mods else target)
    return {m: {t for t in ts if t in mods and t != m} for m, ts in edges.items()}


def _cycles(edges):
    state, found = {}, []

    def visit(u, path):
        state[u] = "open"
        path.append(u)
        for v in sorted(edges[u]):
            if state.get(v) == "open":
                found.append(path[path.index(v):] + [v])
            elif v not in state:
                visit(v, path)
        path.pop()
        state[u] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m, [])
    return found


def _py_layer(module):
    head = module.split(".")[0]
    if module in ("cli", "__main__"):
        return PY_LAYERS[""]
    return PY_LAYERS[head] if head in PY_LAYERS else PY_LAYERS[""]


def test_no_import_circle():
    cycles = _cycles(_edges())
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_check_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_exporter_subpackages_are_layers():
    edges = _edges()
    assert "capture.torch1.symbolic_meta_torch1" in edges and "ir.graph_ir" in edges
    assert "ir.graph_ir" in edges["passes.annotate"]  # the check sees relative imports
    wrong = sorted(f"{m} imports {t}" for m, ts in edges.items() for t in ts
                   if _py_layer(t) > _py_layer(m))
    assert not wrong, "imports against the layers: " + "; ".join(wrong)


def _includes():
    """(file relative to runtime/, its stage, the stages of the runtime headers it includes)."""
    inc = re.compile(r'^#include "(\w+)/\w+\.h"', re.M)
    for stage in CPP_LAYERS:
        for f in sorted(os.listdir(os.path.join(RUNTIME, stage))):
            with open(os.path.join(RUNTIME, stage, f), encoding="utf-8") as fh:
                yield f"{stage}/{f}", stage, [s for s in inc.findall(fh.read()) if s in CPP_LAYERS]


def test_runtime_stages_are_layers():
    files = list(_includes())
    assert len(files) > 60 and any("kernels" in used for _, st, used in files if st == "plan")
    loose = [f for f in os.listdir(RUNTIME) if f.endswith((".h", ".cpp"))]
    assert not loose, f"runtime sources outside a stage folder: {loose}"
    wrong = sorted(f"{f} includes a {s}/ header" for f, stage, used in files for s in used
                   if CPP_LAYERS[s] > CPP_LAYERS[stage])
    assert not wrong, "includes against the stages: " + "; ".join(wrong)
