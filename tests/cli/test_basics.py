"""export-cli as a whole: usage, --help of every subcommand, unknown commands and options."""
import pytest

SUBCOMMANDS = ["save", "inspect", "run", "verify", "train"]


def test_no_arguments_prints_usage_and_exits_2(cli):
    r = cli()
    assert r.rc == 2
    for sub in SUBCOMMANDS:
        assert sub in r.err


def test_top_level_help(cli):
    r = cli.ok("--help")
    for sub in SUBCOMMANDS:
        assert sub in r.out
    assert "exit codes" in r.out


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(cli, sub):
    r = cli.ok(sub, "--help")
    assert f"export-cli {sub}" in r.out
    assert "--help" in r.out


@pytest.mark.parametrize("sub,option", [("inspect", "--json"), ("run", "--grad-outputs"),
                                        ("verify", "--device"), ("train", "--optimizer"),
                                        ("save", "--partitioner")])
def test_help_lists_the_options(cli, sub, option):
    assert option in cli.ok(sub, "--help").out


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_lists_verbose(cli, sub):
    """--verbose works after any subcommand (main takes it out): every --help says so."""
    assert "--verbose" in cli.ok(sub, "--help").out


def test_unknown_subcommand(cli):
    cli.usage_error("frobnicate", mentions=["frobnicate"])


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_unknown_option_is_a_usage_error(cli, sub):
    cli.usage_error(sub, "--no-such-option", mentions=["no-such-option"])


@pytest.mark.parametrize("sub", ["inspect", "run", "verify", "train"])
def test_missing_model_argument(cli, sub):
    cli.usage_error(sub, mentions=["model.pt2"])


@pytest.mark.parametrize("sub", ["inspect", "run", "verify", "train"])
def test_missing_model_file(cli, sub, tmp_path):
    missing = tmp_path / "nope.pt2"
    extra = ["--data", str(missing)] if sub == "train" else []
    cli.usage_error(sub, missing, *extra, mentions=[str(missing)])


@pytest.mark.parametrize("sub", ["inspect", "run", "verify", "train"])
def test_corrupt_model_file(cli, sub, tmp_path):
    bad = tmp_path / "garbage.pt2"
    bad.write_bytes(b"this is not a zip archive at all" * 10)
    if sub == "train":
        import torch
        data = tmp_path / "d.pt"
        torch.save((torch.zeros(4, 16), torch.zeros(4, dtype=torch.long)), str(data))
        cli.usage_error(sub, bad, "--data", data, mentions=["garbage.pt2"])
    else:
        cli.usage_error(sub, bad, mentions=["garbage.pt2"])


def test_truncated_archive(cli, archives, tmp_path):
    src = archives.get("mlp").path.read_bytes()
    for cut in (len(src) // 3, len(src) - 10):
        bad = tmp_path / f"cut{cut}.pt2"
        bad.write_bytes(src[:cut])
        cli.usage_error("inspect", bad, mentions=[f"cut{cut}.pt2", "truncated or damaged zip"])
        cli.usage_error("run", bad)


def test_other_pytorch_files_are_named(cli, tmp_path):
    """A TorchScript file or a torch.save file got "entry name 'ts/data/0' is outside the
    archive layout ..."; now the message says what the file is and what pt2rt reads."""
    import torch
    ts = tmp_path / "model.ts"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(ts))
    cli.usage_error("inspect", ts, mentions=["a TorchScript archive (torch.jit.save)",
                                             "written by pt2rt.export"])
    saved = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(3)}, str(saved))
    cli.usage_error("run", saved, mentions=["a torch.save file", "not a pt2rt archive"])


@pytest.mark.parametrize("argv, option, value", [
    (["run", "{m}", "--outputs", "--train"], "--outputs", "--train"),
    (["train", "{m}", "--data", "{data}", "--save", "--epochs", "2"], "--save", "--epochs"),
    (["inspect", "{m}", "--dot", "--graph", "forward"], "--dot", "--graph"),
    (["verify", "{m}", "--device", "-x"], "--device", "-x")])
def test_an_option_value_that_is_an_option_is_a_usage_error(cli, archives, tmp_path, argv,
                                                             option, value):
    """An option that takes a value swallowed the next flag (`run --outputs --train` wrote a
    file named --train and ran inference): now a usage error naming both; `--opt=--x` states
    such a value on purpose."""
    data = tmp_path / "d.pt"
    argv = [a.format(m=archives.get("mlp").path, data=data) for a in argv]
    cli.usage_error(*argv, mentions=[f"{option} needs a value", f"'{value}'"])
    assert not (tmp_path / value).exists()


def test_an_unexpected_word_is_a_usage_error(cli, archives):
    cli.usage_error("run", archives.get("mlp").path, "extra_word",
                    mentions=["unexpected argument 'extra_word'"])


def test_a_value_starting_with_a_dash_given_with_equals(cli, archives, tmp_path):
    out = tmp_path / "--odd.pt"
    cli.ok("run", archives.get("mlp").path, f"--outputs={out}")
    assert out.exists()
