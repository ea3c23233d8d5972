"""Table 3.4's Shockwave row under the port the Sia thesis ran (``--shockwave-variant sia-artifact``)."""

from __future__ import annotations

import pytest

from experiment_modules import import_experiments


@pytest.fixture(scope="module")
def table34():
    """experiments/sia_table34.py, imported without letting it change the environment."""
    (sia_table34,) = import_experiments("sia_table34")
    return sia_table34


def test_the_variant_runs_shockwave_with_the_artifacts_settings_and_names_its_row(table34):
    from dlsched.policies.markets.shockwave_artifact import SCRIPT_SETTINGS

    runs = table34.specs(1, ("sia-artifact",), ("shockwave", "gavel"), "sia-artifact")
    by_policy = {s["config"].policy: s for s in runs}
    assert by_policy["shockwave"]["config"].settings == SCRIPT_SETTINGS
    assert by_policy["shockwave"]["tag"] == "Shockwave+TJ (sia-artifact) [sia-artifact]"
    assert by_policy["gavel"]["config"].settings == {}  # only Shockwave changes
    paper = table34.specs(1, ("sia-artifact",), ("shockwave",))
    assert paper[0]["config"].settings == {} and paper[0]["tag"] == "Shockwave+TJ [sia-artifact]"


def test_the_variant_row_is_compared_with_the_thesiss_shockwave_row(table34):
    summary = {"avg_jct_s": 4.5 * 3600, "p99_jct_s": 30 * 3600, "makespan_s": 40 * 3600,
               "gpu_hours_per_job": 12.0, "restarts_per_job": 2.0}
    runs = table34.specs(1, ("sia-artifact",), ("shockwave",), "sia-artifact")
    data = {"runs": [{"tag": runs[0]["tag"], "summary": summary}],
            "configs": [runs[0]["config"].model_dump(mode="json")]}
    out = table34.tables(data)
    row = next(line for line in out["table"].splitlines() if "(sia-artifact)" in line)
    assert "3.6 / 32.8 / 35.0 / 12.5" in row  # the thesis's Shockwave+TJ figures beside it
    fidelity = [line for line in out["fidelity"].splitlines() if "avg JCT" in line]
    assert len(fidelity) == 1 and "Shockwave+TJ (sia-artifact)" in fidelity[0] and "+25% **" in fidelity[0]
