"""experiments/gimbal_ablation.py: every figure-12 step runs in both sharing worlds, only Gimbal's share
limits are repeated per isolation share, and gains are per-seed ratios against the base scheduler."""

from __future__ import annotations

import pytest

from experiment_modules import import_experiments

(ablation,) = import_experiments("gimbal_ablation")


def test_the_runs_cover_every_step_world_and_isolation_share_once_per_seed():
    runs = ablation.configs(2)
    per_seed = 2 * (3 * 4 + 3 * 2)  # worlds x (objectives x steps + objectives x the two other shares)
    assert len(runs) == 2 * per_seed
    labels = [r.label for r in runs]
    assert len(set(labels)) == per_seed  # each label once per seed
    gimbal = [r for r in runs if r.coordination == "gimbal"]
    assert all(r.settings["objective"] in ablation.OBJECTIVES for r in gimbal)
    assert {r.world.mps_isolation for r in runs if "+LGRR" not in r.label} == {0.5}
    assert {r.world.sharing_world for r in runs} == {"old-gpus", "h200"}
    assert {r.world_seed for r in runs} == {1, 2}


def test_tables_give_per_seed_gains_with_their_spread():
    runs = ablation.configs(2)
    # the base's JCT 2 h on seed 1 and 4 h on seed 2; every other step half of it: 2.00x on both seeds
    runs_out = []
    for r in runs:
        seed = r.world_seed
        base = r.label.endswith("| base")
        summary = {"avg_jct_s": 3600.0 * (2 * seed if base else seed), "makespan_s": 7200.0,
                   "deadline_met_frac": 0.2 if base else 0.3}
        runs_out.append({"summary": summary})
    data = {"seeds": 2, "runs": runs_out, "configs": [{"label": r.label, "data": {}} for r in runs]}
    out = ablation.tables(data)
    assert set(out) == {"fig12_jct", "fig12_makespan", "fig12_deadline", "sensitivity", "worlds"}
    jct = out["fig12_jct"].splitlines()
    assert jct[2].startswith("| lucid | 3.00 ± 1.41 | 1.00 ± 0.00x")
    assert "| +LGRR | 1.50 ± 0.71 | 2.00 ± 0.00x" in out["fig12_jct"] and "| 1.28x |" in jct[5]
    assert "| 1.50 ± 0.00x" in out["fig12_deadline"]
    assert "| h200 | 1 | 2.00 ± 0.00x | 1.00 ± 0.00x | 1.50 ± 0.00x |" in out["sensitivity"]


@pytest.mark.parametrize("objective", ["jct", "makespan", "deadline"])
def test_the_paper_column_is_figure_12(objective):
    assert list(ablation.PAPER[objective]) == ["unequal packing", "+LISS", "+LGRR"]
