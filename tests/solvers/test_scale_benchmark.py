"""benchmarks/scale_policy_time.py --quick: the JSON lines the issue names, for every method."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale_policy_time.py"
KEYS = {"method", "gpus", "jobs_active", "median_s", "p99_s", "objective_vs_lpstar"}


def test_quick_run_reports_every_method() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--workers", "1"], capture_output=True, text=True,
                         timeout=300, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["method"] for r in rows] == ["lpstar", "pop-16", "warm-simplex", "continual", "lagrangian"]
    for r in rows:
        assert KEYS <= set(r)
        assert r["gpus"] == 512 and r["jobs_active"] == 150
        assert 0 < r["median_s"] <= r["p99_s"]
        assert r["objective_vs_lpstar"] > 0.8
    assert rows[0]["objective_vs_lpstar"] == 1.0
    assert [r["shim"] for r in rows] == ["upgrade", "milp", "upgrade", "upgrade", "upgrade"]  # LP* shims as they do
    assert rows[3]["prox_steps"] == 15 and "prox_steps" not in rows[0]
    pop = rows[1]
    assert 0 < pop["critical_path_p99_s"] <= pop["p99_s"]  # the slowest part cannot take longer than all parts


def test_bad_options_are_one_error_line() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--gpus", "1000"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["error: --gpus: 1000 is not a positive multiple of 256 (the thesis's block)"]
    out = subprocess.run([sys.executable, str(SCRIPT), "--methods", "simplex"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("error: --methods: unknown simplex")
    out = subprocess.run([sys.executable, str(SCRIPT), "--shim", "best"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["error: --shim: unknown best (one of thesis, fill, upgrade)"]
    out = subprocess.run([sys.executable, str(SCRIPT), "--prox-steps", "0"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["error: --prox-steps: 0 must be in 1-10000"]


def test_prox_steps_reach_the_continual_method_and_its_row() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--methods", "continual", "--prox-steps", "40"],
                         capture_output=True, text=True, timeout=300, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["method"], r["prox_steps"]) for r in rows] == [("continual", 40)]
    assert rows[0]["objective_vs_lpstar"] > 0.99


def test_lpstar_on_sampled_rounds_compares_on_those_rounds_and_reports_memory() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--methods", "lpstar,continual",
                          "--lpstar-every", "2"], capture_output=True, text=True, timeout=300, check=True)
    rows = {r["method"]: r for r in (json.loads(line) for line in out.stdout.splitlines())}
    # --quick measures 4 rounds: LP* is solved on rounds 2 and 4, the continual method on all 4
    assert rows["lpstar"]["lpstar_rounds"] == rows["continual"]["lpstar_rounds"] == 2
    assert rows["lpstar"]["objective_vs_lpstar"] == 1.0
    assert rows["continual"]["objective_vs_lpstar"] > 0.99
    assert all(r["peak_rss_mb"] > 50 for r in rows.values())  # an interpreter with numpy and HiGHS at least
    out = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "3", "--lpstar-every", "5"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: --lpstar-every: 5 is more than --rounds 3: LP* would be solved on no measured round"]
