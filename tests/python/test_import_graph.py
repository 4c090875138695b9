"""The exporter package has no import circle (issue 25): no module imports, at module level or
inside a function, a module that imports it back, directly or through others."""
import ast
import os

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "exporter", "pt2rt")


def _edges():
    mods = {f[:-3] for f in os.listdir(PKG) if f.endswith(".py")}
    edges = {m: set() for m in mods}
    for m in mods:
        with open(os.path.join(PKG, m + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module.split(".")[0]] if node.module else \
                    [a.name for a in node.names]
                edges[m].update(t for t in targets if t in mods)
    return edges


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


def test_no_import_circle():
    cycles = _cycles(_edges())
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_check_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
