"""PyTorch's OpInfo database as pt2rt's op-coverage test (issue 27), on a sample subset.

``tests/opinfo/opinfo_sweep.py`` exports one-op modules made from torch's OpInfo samples and
checks each archive against eager PyTorch with the Python reader and ``export-cli verify``
(``$PT2RT_BUILD_DIR/cli/export-cli``; the Python reader only where there is none). This test
runs the first sample of a subset of the ops: the ops issue 27 names (and those the exporter
handles specially because of it) plus every op whose name hashes into one quarter, about 160
ops and 1.5 minutes per lane on two cores. It fails on

* any mismatch or crash (random ops — bernoulli, normal, rrelu, dropout — are compared by
  dtype, shape and finiteness, never by value);
* any op of the lane's baseline (``tests/opinfo/ok_torch<major>.txt``) that is no longer ok.

Refusals pass (``pt2rt.export`` raising CaptureError naming the op is the documented outcome);
``verify-known`` rows (``export-cli verify`` failing where the Python reader passes, on equal
non-finite values or a random op: issue 27 items 2 and 3, fixed in ``verify``) fail too. The result table is written
to ``$PT2RT_BUILD_DIR/opinfo_<lane>.txt`` (a build artifact).

Environment: ``PT2RT_OPINFO=full`` sweeps every op with all of its samples (within
``PT2RT_OPINFO_BUDGET`` seconds, default 3600; ``scripts/opinfo_sweep.py`` is the same as a
command); ``PT2RT_OPINFO=off`` skips the test.
"""
import os
import sys
import zlib

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "opinfo"))

import opinfo_sweep  # noqa: E402

# The ops issue 27 names, by item, and the ones the exporter treats specially because of it.
WATCHED = [
    # 1: empty gradients sketch to zeros
    "roll", "nn.functional.unfold", "nn.functional.pad.circular",
    "nn.functional.adaptive_avg_pool1d", "nn.functional.adaptive_avg_pool3d", "svd",
    "linalg.svd", "svd_lowrank", "pca_lowrank", "linalg.slogdet", "logdet",
    "linalg.pinv.singular", "cholesky_solve", "cholesky_inverse", "linalg.vecdot",
    # 2, 3: random ops, infinities
    "bernoulli", "normal", "normal.number_mean", "nn.functional.rrelu",
    "nn.functional.dropout", "nn.functional.multi_head_attention_forward", "__rpow__",
    # 4: refused at export, not at load; functional batch/instance norm with running stats
    "masked_select", "combinations", "masked_scatter", "repeat_interleave", "linalg.lstsq",
    "nn.functional.batch_norm", "nn.functional.instance_norm", "native_batch_norm",
    "_batch_norm_with_update", "to_sparse", "_unsafe_masked_index",
    # 5: torch 2's linear algebra checks
    "linalg.inv", "linalg.solve", "linalg.cholesky", "linalg.lu_factor", "linalg.tensorinv",
    "linalg.tensorsolve", "linalg.eig",
    # 6: data-dependent capture refusals (traceable forms: traceable_ops.py)
    "quantile", "nanquantile", "cov", "corrcoef", "istft", "nn.functional.gaussian_nll_loss",
    "index_reduce", "index_reduce.prod", "scatter_reduce.prod",
    # complex outputs (lane 2's tangents), conjugate views and zero-tensor gradients
    "complex", "view_as_complex", "fft.rfft", "fft.ifft", "sgn",
]
SHARE = 4  # one op in SHARE by name hash, besides WATCHED


def _subset(catalog):
    return [k for k in catalog
            if k in WATCHED or zlib.crc32(k.encode()) % SHARE == 0]


@pytest.fixture(scope="module")
def catalog():
    if os.environ.get("PT2RT_OPINFO", "") == "off":
        pytest.skip("PT2RT_OPINFO=off")
    try:
        return opinfo_sweep.list_ops()  # in a child process: op_db's import changes state
    except ImportError as e:  # a torch build without torch.testing._internal
        pytest.skip(str(e))


def test_opinfo_sweep(catalog, tmp_path):
    lane = opinfo_sweep.lane_name()
    full = os.environ.get("PT2RT_OPINFO", "") == "full"
    ops = list(catalog) if full else _subset(catalog)
    build = os.environ.get("PT2RT_BUILD_DIR")
    cli = opinfo_sweep.default_cli()
    results = opinfo_sweep.run_sweep(
        ops, max_samples=None if full else 1, op_budget=60.0 if full else None,
        budget=float(os.environ.get("PT2RT_OPINFO_BUDGET", "3600")) if full else None,
        cli=cli, jobs=min(2, os.cpu_count() or 1), timeout=180.0)
    out_dir = build if build and os.path.isdir(build) else str(tmp_path)
    table = os.path.join(out_dir, f"opinfo_{lane}.txt")
    header = (f"lane {lane}, {'all ops, all samples' if full else 'CI subset, first sample'}, "
              f"export-cli {cli or 'not used'}")
    line = opinfo_sweep.write_table(results, table, lane, header)
    print(line)
    print(f"table: {table}")
    bad = {k: f"{r.status}: {r.reason}" for k, r in results.items()
           if r.status in ("mismatch", "crash", "verify-known")}
    regressed = opinfo_sweep.regressions(results, lane)
    unknown = [k for k in ops if k not in catalog]
    problems = [f"{k}: {why}" for k, why in bad.items()]
    problems += [f"{k}: was ok ({opinfo_sweep.baseline_path(lane)}), now {results[k].status}: "
                 f"{results[k].reason}" for k in regressed if k not in bad]
    assert not problems and not unknown, (
        f"{line}\n(table: {table})\n" + "\n".join(problems + [f"{k}: not swept" for k in unknown]))


def test_watched_ops_exist(catalog):
    """The watched ops are OpInfo names of this torch (a rename would silently drop one)."""
    lane_only = {"torch1": {"_batch_norm_with_update", "_unsafe_masked_index",
                            "nn.functional.multi_head_attention_forward", "index_reduce.prod"},
                 "torch2": {"istft", "index_reduce"}}[opinfo_sweep.lane_name()]
    missing = [k for k in WATCHED if k not in catalog and k not in lane_only]
    assert not missing, missing


def test_baseline_ops_exist(catalog):
    """Every op of the lane's baseline is swept on this torch."""
    missing = [k for k in opinfo_sweep.read_baseline(opinfo_sweep.lane_name())
               if k not in catalog]
    assert not missing, missing
