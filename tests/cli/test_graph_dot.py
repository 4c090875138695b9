"""export-cli inspect --dot / --svg: Graphviz pictures of the graphs."""
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
