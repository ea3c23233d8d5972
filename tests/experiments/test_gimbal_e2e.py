"""experiments/gimbal_e2e.py: every end-to-end row runs in both sharing worlds with the world seeded by the
trace seed, the tables give mean ± standard deviation with gains as per-seed ratios, and the verdict line
per world is computed from the result file (its pair sums and packed shares), never typed in."""

from __future__ import annotations

from typing import Any

from experiment_modules import import_experiments

(e2e,) = import_experiments("gimbal_e2e")


def test_every_row_runs_in_both_worlds_once_per_seed_with_the_world_seeded_by_the_trace_seed():
    runs = e2e.configs(2)
    assert len(runs) == 2 * 2 * 2 * len(e2e.E2E)  # worlds x traces x seeds x rows
    assert {r.world.sharing_world for r in runs} == {"old-gpus", "h200"}
    for r in runs:
        assert r.trace.endswith(f":seed={r.world_seed}")
        assert r.label.split(" | ")[1] == r.world.sharing_world
    assert len({(r.label, r.world_seed) for r in runs}) == len(runs)


def _data(gimbal_jct_h: dict[str, tuple[float, float]], h200_sums: float) -> dict[str, Any]:
    """A result file for two seeds: Lucid's JCT 2 h, Lucid+Gimbal's per world the two given values; every
    other row 3 h. Pairs: old-gpus sums 1.5 (measured), h200 sums ``h200_sums`` (measured)."""
    runs, configs, shared = [], [], []
    for r in e2e.configs(2):
        world, row = r.label.split(" | ")[1], r.label.split(" | ")[3]
        jct = {"lucid": 2.0, "lucid+gimbal": gimbal_jct_h[world][r.world_seed - 1]}.get(row, 3.0)
        runs.append({"summary": {"avg_jct_s": 3600 * jct, "avg_wait_s": 1800 * jct, "makespan_s": 36000.0,
                                 "deadline_met_frac": 0.4 if row == "gandiva" else 0.5, "jobs": 150}})
        configs.append({"label": r.label})
        shared.append(0.25 if row == "lucid+gimbal" else 0.1)
    pairs = {"old-gpus": {"a+b": {"sum": 1.5, "kind": "measured"}, "a+a": {"sum": 1.7, "kind": "rule"}},
             "h200": {"a+b": {"sum": h200_sums, "kind": "measured"}, "a+a": {"sum": 0.92, "kind": "rule"}}}
    return {"seeds": 2, "runs": runs, "configs": configs, "shared_gpu_frac": shared, "pairs": pairs}


def test_tables_show_both_worlds_with_the_spread_of_per_seed_gains():
    # Lucid+Gimbal: old-gpus 1 h and 2 h (gains 2x and 1x), h200 2 h on both seeds
    out = e2e.tables(_data({"old-gpus": (1.0, 2.0), "h200": (2.0, 2.0)}, 0.9))
    assert set(out) == {"e2e", "makespan", "deadline", "verdict"}
    jct = out["e2e"]
    assert "| old-gpus | philly | lucid+gimbal | 1.50 ± 0.71 |" in jct
    assert "| 1.50 ± 0.71x |" in jct  # the mean and spread of the per-seed ratios, not a ratio of means
    assert "| h200 | alibaba | lucid+gimbal | 2.00 ± 0.00 |" in jct and "| 1.28x, 1.87x |" in jct
    assert "| old-gpus | philly | gavel-packing+gimbal (eq. 5) |" in out["makespan"]
    assert "| h200 | alibaba | gandiva+gimbal | 75.0 ± 0.0 | 0.500 ± 0.000 | 1.25 ± 0.00x | 177 vs 233 of 300 |" \
        in out["deadline"]
    assert "seeds 1..2" in jct


def test_the_verdict_names_the_bar_and_the_measured_reason_per_world():
    lines = e2e.tables(_data({"old-gpus": (1.0, 2.0), "h200": (2.0, 2.0)}, 0.9))["verdict"].split("\n\n")
    old, h200 = lines
    assert old.startswith("**old-gpus**") and "1.50x on philly" in old and "reaches 1.15x" in old
    assert h200.startswith("**h200**") and "1.00x on philly" in h200 and "below 1.15x on both traces" in h200
    assert "2 sum to less than 1 (median 0.91; the one measured pair 0.90)" in h200
    assert "less work than running them one after the other" in h200
    assert "25.0% of their GPU time under Lucid+Gimbal (10.0% under Lucid)" in h200


def test_where_pairs_gain_the_verdict_does_not_blame_them():
    text = e2e.tables(_data({"old-gpus": (2.0, 2.0), "h200": (2.0, 2.0)}, 1.2))["verdict"].split("\n\n")[0]
    assert "below 1.15x" in text and "0 sum to less than 1" in text and "packing gains work" in text
