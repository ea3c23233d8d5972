"""A real service on ray-local-4 under fifo (the examples, rigid and adaptive, and a script that does not
import dlsched), then export, fit and replay: the replay of fifo against what the service measured."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")
pytest.importorskip("fastapi")

from whatif_workload import JOBS, run_workload  # noqa: E402

from dlsched.replay.export import select_jobs  # noqa: E402
from dlsched.replay.fit import fit_world  # noqa: E402
from dlsched.replay.history import read_state  # noqa: E402
from dlsched.replay.whatif import whatif  # noqa: E402
from dlsched.runtime.workload import load_cluster  # noqa: E402

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="session")  # once per worker: xdist may run other modules' Ray tests between these
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("whatif") / "state"
    run_workload(folder, "fifo", timeout_s=780)
    return folder


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlsched", *args], capture_output=True, text=True, timeout=600)


def test_the_exported_trace_passes_validate(state, tmp_path):
    out = tmp_path / "trace.csv"
    done = _cli("trace", "export", "--state", str(state), str(out))
    assert done.returncode == 0, done.stderr
    check = _cli("trace", "validate", str(out), "--cluster", "sia-hetero-64")
    assert check.returncode == 0 and check.stdout.startswith(f"ok: {len(JOBS)} jobs"), check.stderr


def test_the_replay_of_fifo_is_within_20_percent_of_the_measured_jct_and_makespan(state):
    before = hashlib.sha256((state / "dlsched.db").read_bytes()).hexdigest()
    result = whatif(state, policies="fifo", workers=1)
    assert hashlib.sha256((state / "dlsched.db").read_bytes()).hexdigest() == before
    f = result.fidelity
    silent = [k for k, v in result.world["jobs"].items() if not v["reported"]]
    assert len(silent) == 2, silent  # the two runs of the script that does not import dlsched
    assert abs(f["avg_jct_rel_err"]) <= 0.20, f
    assert abs(f["makespan_rel_err"]) <= 0.20, f


def test_whatif_prints_the_measured_row_and_each_policy(state):
    done = _cli("whatif", "--state", str(state), "--policies", "fifo,sia", "--workers", "1")
    assert done.returncode == 0, done.stderr
    rows = [line.split("│")[1].strip() for line in done.stdout.splitlines() if line.startswith("│")]
    assert rows == ["measured", "fifo", "sia"], done.stdout
    assert "fidelity: fifo (replayed) vs measured" in done.stdout


def test_no_completion_time_reaches_the_fitted_world(state):
    history = read_state(state)
    cluster = load_cluster("ray-local-4")
    world = fit_world(history, select_jobs(history), cluster)
    moved = copy.deepcopy(history)
    reported = {k for k, v in world["jobs"].items() if v["reported"]}
    for j in moved.jobs:
        if j["id"] in reported:
            j["finished_s"] += 1000.0
    for job_id, events in moved.events.items():
        for e in events:
            if job_id in reported and e["kind"] == "succeeded":
                e["time_s"] += 1000.0
    again = fit_world(moved, select_jobs(moved), cluster)
    assert json.dumps(again, sort_keys=True) == json.dumps(world, sort_keys=True)
