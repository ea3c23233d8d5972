"""experiments/timed.py: what ``make experiments`` says about how long each experiment took."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "timed.py"


def test_each_command_gets_a_line_with_its_times_and_its_exit_status_passes_on(tmp_path: Path) -> None:
    log = tmp_path / "times.jsonl"
    busy = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.3: pass')"
    ok = subprocess.run([sys.executable, str(SCRIPT), "--log", str(log), "--", sys.executable, "-c", busy],
                        capture_output=True, text=True, timeout=60)
    bad = subprocess.run([sys.executable, str(SCRIPT), "--log", str(log), "--", sys.executable, "-c",
                          "raise SystemExit(3)"], capture_output=True, text=True, timeout=60)
    assert (ok.returncode, bad.returncode) == (0, 3)  # a failed experiment still stops make
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["exit"] for r in rows] == [0, 3]
    assert rows[0]["cpu_s"] >= 0.2 and rows[0]["wall_s"] >= rows[0]["cpu_s"] - 0.1
    assert "commit" in rows[0] and busy[:20] in rows[0]["command"]
    assert ok.stderr.startswith("took ") and "(exit 0)" in ok.stderr


def test_no_command_is_one_error_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--log", str(tmp_path / "t.jsonl")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["error: no command given (usage: timed.py -- CMD ARGS...)"]
