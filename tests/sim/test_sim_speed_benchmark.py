"""benchmarks/sim_speed.py: the figures issue 35 names on each line, and --baseline's ratio against a revision
run in a temporary worktree that is removed afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "sim_speed.py"
KEYS = {"case", "wall_s", "cpu_s", "policy_p99_s", "peak_rss_mb", "phase_s", "policy_parts_s", "reduced_to_jobs"}


def _worktrees() -> set[str]:
    out = subprocess.run(["git", "-C", str(REPO), "worktree", "list", "--porcelain"], capture_output=True,
                         text=True, check=True)
    return {line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("worktree ")}


def test_baseline_line_has_figures_and_ratios() -> None:
    before = _worktrees()
    out = subprocess.run([sys.executable, str(SCRIPT), "--case", "small", "--jobs", "5", "--baseline", "HEAD"],
                         capture_output=True, text=True, timeout=300, check=True)
    (row,) = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert KEYS <= set(row)
    assert row["case"] == "small" and row["jobs"] == 5 and row["reduced_to_jobs"] == 5 and row["completed"] == 5
    assert row["cpu_s"] > 0 and row["peak_rss_mb"] > 10 and set(row["phase_s"]) >= {"policy", "advance"}
    base = row["baseline"]
    assert base["rev"] == "HEAD" and len(base["commit"]) == 12 and "missing" not in base
    assert base["cpu_s"] > 0 and base["wall_s"] > 0
    assert row["ratio"]["cpu_s"] == round(row["cpu_s"] / base["cpu_s"], 3)
    assert row["ratio"]["wall_s"] == round(row["wall_s"] / base["wall_s"], 3)
    assert "at HEAD:" in out.stderr
    assert _worktrees() == before  # the temporary worktree is gone


def test_bad_options_are_one_error_line() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--case", "small", "--baseline", "no-such-rev"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["error: --baseline: no revision 'no-such-rev' in this repository"]
    out = subprocess.run([sys.executable, str(SCRIPT), "--case", "small", "--jobs", "0"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["error: --jobs must be at least 1, got 0"]
