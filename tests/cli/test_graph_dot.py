"""export-cli inspect --dot / --svg: Graphviz pictures of the graphs."""
import os
import re
import shutil
import subprocess

import pytest
import torch

import pt2rt


def test_dot_labels_and_saved_edges(cli, archives, tmp_path):
    a = archives.get("mlp")
    dot = tmp_path / "mlp.dot"
    assert f"wrote {dot}" in cli.ok("inspect", a.path, "--dot", dot).out
    text = dot.read_text()
    assert text.startswith("digraph pt2rt {") and text.rstrip().endswith("}")
    for role in ("inference", "forward", "backward"):
        assert f"subgraph cluster_{role}" in text
    # nodes: op overload and result shape; inputs/outputs: descriptors
    assert re.search(r'forward_n\d+ \[shape=box, label="aten::addmm\\n%\w+: float32\[4, 10\]"',
                     text)
    assert "ParamAOTInput(target='fc1.weight')" in text
    assert "PlainAOTInput(idx=0)" in text
    # every forward Saved(k) output is joined to the backward Saved(k) input, in red
    saved = re.findall(r'(forward_out\d+) -> (backward_in\d+) \[color=red.*label="Saved\((\d+)\)"',
                       text)
    n_saved = len(re.findall(r'SavedForBackwards\w*AOTOutput', text))
    assert saved and len(saved) == n_saved
    assert sorted(int(k) for _, _, k in saved) == list(range(n_saved))
    # --dot - prints the same text
    assert cli.ok("inspect", a.path, "--dot", "-").out == text


def test_archive_text_is_escaped(cli, tmp_path):
    class Quoted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_parameter('w"\\', torch.nn.Parameter(torch.ones(3)))

        def forward(self, x):
            return x * getattr(self, 'w"\\')

    path = tmp_path / "q.pt2"
    try:
        pt2rt.export(Quoted(), (torch.randn(3),)).save(str(path))
    except Exception as e:  # an exporter that refuses such a name is fine too
        pytest.skip(f"exporter refuses the parameter name: {e}")
    text = cli.ok("inspect", path, "--dot", "-").out
    # DOT escapes on top of the descriptor's own (pt2rt/text.h writes the backslash as \x5c)
    assert "target='w\\\"\\\\x5c'" in text
    assert '%w\\"\\\\\\n' in text  # the value name: \" and \\, then DOT's line break


def test_svg_with_graphviz(cli, archives, tmp_path):
    a = archives.get("cnn_bn")
    svg = tmp_path / "cnn.svg"
    if shutil.which("dot") is None:
        r = cli.usage_error("inspect", a.path, "--svg", svg, mentions=["graphviz"])
        assert not svg.exists()
        pytest.skip("Graphviz's dot is not installed (scripts/install-deps.sh installs it): "
                    "the DOT file was not rendered")
    dot = tmp_path / "cnn.dot"
    cli.ok("inspect", a.path, "--dot", dot, "--svg", svg)
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    # dot itself parses the file: canonical output lists the red Saved edges
    canon = subprocess.run(["dot", "-Tcanon", str(dot)], capture_output=True, text=True)
    assert canon.returncode == 0, canon.stderr
    assert "color=red" in canon.stdout


def test_one_graph_and_module_clusters(cli, archives):
    """--graph ROLE with --dot writes that graph only; nodes sit in one cluster per module FQN
    (cut to --module-depth components; 0: none)."""
    a = archives.get("cnn_bn")
    text = cli.ok("inspect", a.path, "--graph", "forward", "--dot", "-").out
    assert "subgraph cluster_forward {" in text
    assert "cluster_inference" not in text and "cluster_backward" not in text
    labels = re.findall(r'subgraph cluster_forward_m\d+ \{\s*label="([^"]*)"', text)
    assert labels and len(labels) == len(set(labels)), labels
    flat = cli.ok("inspect", a.path, "--graph", "forward", "--module-depth", "0",
                  "--dot", "-").out
    assert "cluster_forward_m" not in flat
    # the same boxes either way
    assert sorted(re.findall(r"forward_n\d+ \[", text)) == sorted(re.findall(r"forward_n\d+ \[", flat))
    cli.usage_error("inspect", a.path, "--module-depth", "-1", "--dot", "-",
                    mentions=["--module-depth"])


def test_failed_render_leaves_no_file(cli, archives, tmp_path):
    """A dot that fails (here a stand-in on PATH that exits 1) leaves neither the SVG nor a
    temporary file behind, and the error says how to get the DOT source."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dot").write_text("#!/bin/sh\necho partial\nexit 1\n")
    (fake / "dot").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    svg = out / "m.svg"
    path = f"{fake}:{os.environ.get('PATH', '')}"
    cli.usage_error("inspect", archives.get("mlp").path, "--svg", svg, env={"PATH": path},
                    mentions=["dot -Tsvg failed", "--dot FILE"])
    assert list(out.iterdir()) == []
