"""The packaged world against the measured Sia profiles (needs the data directory; skipped without).

The world is judged on rows its fit has not seen: ``scripts/fidelity_report.py`` refits the step-time model on
a seeded split (whole placement shapes and batch sizes held out per model and GPU type) and the held-out error
must meet targets set from what the schedulers need (docs/fidelity.md, "Held-out error"): decisions compare
configurations whose goodput differs by about 20% or more (adjacent GPU types differ by 21-25% in relative
speed), so the typical error must stay well under half of that and few errors may reach it. The packaged
parameters stay fitted on every row, which ``test_packaged_summary_is_current`` checks.
"""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from dlsched.datadir import data_dir
from dlsched.world.efficiency import EfficiencyModel

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

pytestmark = pytest.mark.skipif(
    data_dir() is None or not (data_dir() / "sia" / "profiles").is_dir(),
    reason="measured Sia profiles not found (set DLSCHED_DATA to the data directory)")


def _report_module():
    spec = importlib.util.spec_from_file_location("fidelity_report", SCRIPTS / "fidelity_report.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def report():
    return _report_module()


@pytest.fixture(scope="module")
def errors(report):
    return report.step_time_errors()


def test_every_row_is_compared(errors):
    assert len(errors) > 20_000
    assert set(errors["model"]) == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3", "gpt_pmp"}
    assert set(errors["gpu"]) == {"t4", "v100", "a100", "quad", "rtx"}
    assert np.isfinite(errors["rel_err"]).all()


@pytest.fixture(scope="module")
def heldout(report):
    return report.heldout_errors()


def test_split_is_seeded_and_holds_out_whole_configurations(report):
    rows = _fit_rows(report)
    a, b = report.heldout_mask(rows), report.heldout_mask(rows)
    np.testing.assert_array_equal(a, b)
    assert 0.15 < a.mean() < 0.45
    assert not np.array_equal(a, report.heldout_mask(rows, seed=report.HOLDOUT_SEED + 1))
    for (_m, _g), g in rows.groupby(["model", "gpu"]):
        held, kept = g[a[g.index]], g[~a[g.index]]
        assert (kept["K"] == 1).any() or not (g["K"] == 1).any(), "a group keeps single-GPU rows to fit on"
        assert len(held) > 0
        # a held-out batch size is inside the kept range (the world never extrapolates beyond the largest)
        assert held["local_bsz"].max() <= kept["local_bsz"].max()


def test_heldout_error_meets_the_targets(report, heldout):
    e = heldout["rel_err"].to_numpy()
    assert len(e) > 5000
    assert np.median(e) < report.TARGET_MEDIAN
    assert np.percentile(e, 90) < report.TARGET_P90
    single = heldout[heldout["K"] == 1]["rel_err"].to_numpy()
    assert len(single) > 20 and np.median(single) < report.TARGET_MEDIAN


GROUPS = [(m, g) for m in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3", "gpt_pmp")
          for g in ("t4", "v100", "a100", "quad", "rtx")]


@pytest.mark.parametrize("model,gpu", [
    pytest.param(m, g, marks=pytest.mark.xfail(strict=True, reason=(
        "imagenet's v100 rows at 3-5 nodes contradict its 2-node rows (docs/world-fit.md); no smooth model fits "
        "both, so its held-out median is about 14%"))) if (m, g) == ("imagenet", "v100") else (m, g)
    for m, g in GROUPS])
def test_heldout_median_per_model_and_type(report, heldout, model, gpu):
    g = heldout[(heldout["model"] == model) & (heldout["gpu"] == gpu)]
    if g.empty:
        pytest.skip(f"{model} was not profiled on {gpu}")
    assert g["rel_err"].median() < report.TARGET_GROUP_MEDIAN


def _fit_rows(report):
    return report._fit_module().load_profile_rows().reset_index(drop=True)


def test_packaged_summary_is_current(errors):
    """throughput.json records the figures it was fitted to; a stale file or changed model form shows here."""
    params = json.loads(resources.files("dlsched").joinpath("world/params/throughput.json").read_text())
    e = errors["rel_err"].to_numpy()
    assert params["overall"]["rows"] == len(e)
    assert params["overall"]["median_rel_err"] == pytest.approx(np.median(e), rel=1e-3)
    assert params["overall"]["p90_rel_err"] == pytest.approx(np.percentile(e, 90), rel=1e-3)


def test_efficiency_reproduces_profiled_iterations(report):
    check = report.efficiency_check(EfficiencyModel.load(), data_dir() / "sia" / "profiles")
    assert check["table_err"].abs().max() < 0.03
