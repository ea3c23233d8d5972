"""dlsched.outputs: results appear whole or not at all, and only where nothing else would be harmed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlsched.core import InputError
from dlsched.outputs import atomic_file, check_output_dir, staged_dir


def test_a_failure_while_writing_leaves_no_trace_of_a_new_folder(tmp_path: Path):
    out = tmp_path / "a" / "run"
    with pytest.raises(RuntimeError), staged_dir(out) as stage:
        stage.path("summary.json").write_text("{}")
        raise RuntimeError("simulated crash")
    assert list(tmp_path.iterdir()) == []


def test_a_failure_while_writing_keeps_the_earlier_results(tmp_path: Path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("old")
    with pytest.raises(RuntimeError), staged_dir(out, force=True) as stage:
        stage.path("summary.json").write_text("new")
        raise RuntimeError("simulated crash")
    assert [p.name for p in out.iterdir()] == ["summary.json"]
    assert (out / "summary.json").read_text() == "old"


def test_atomic_file_keeps_the_old_content_when_writing_fails(tmp_path: Path):
    target = tmp_path / "t.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("simulated crash")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]


def test_a_result_name_taken_by_a_directory_is_refused_even_with_force(tmp_path: Path):
    out = tmp_path / "run"
    (out / "report.html").mkdir(parents=True)
    with pytest.raises(InputError, match="directory"):
        check_output_dir(out, force=True)


def test_sigterm_during_a_run_leaves_nothing_behind(tmp_path: Path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "dlsched", "simulate", "--policy", "sia", "--trace",
           "synthetic:rate=60,hours=8,seed=1", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    time.sleep(4)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before it could be interrupted")
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not out.exists() and list(tmp_path.iterdir()) == []
