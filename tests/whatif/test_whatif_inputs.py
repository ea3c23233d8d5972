"""What-ifs on states written through the Store API (no Ray): bad input gets one ``error:`` line, a job that
reported nothing is marked, the admin route refuses others, and the database is never written."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("fastapi")

from dlsched.core import InputError  # noqa: E402
from dlsched.replay.history import read_state  # noqa: E402
from dlsched.replay.whatif import whatif  # noqa: E402
from dlsched.service.records import ConsumedReports  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

T0 = 1_700_000_000.0


def _job(store: Store, name: str, submit: float, *, finish: float | None, gpus: int = 1, reports: bool = True,
         node: str = "t4-0", step_time_s: float = 0.02) -> str:
    spec = {"name": name, "command": f"python {name}.py", "working_dir": "/tmp", "gpus": gpus}
    if reports:
        spec.update(model="mlp", batch_size=64)
    job = store.add_job("alice", JobSubmission.model_validate(spec), T0 + submit)
    placed = T0 + submit + 1.0
    store.update_job(job.id, status="running", started_s=placed, gpus=gpus, gpu_type="t4", incarnation=1)
    store.add_event(job.id, "placed", "placed", {"placement": {node: list(range(gpus))}, "incarnation": 1},
                    now_s=placed)
    if reports:
        consumed = ConsumedReports()
        lines = [{"type": "start", "incarnation": 1, "time": placed + 2.0, "resumed_step": 0, "world_size": gpus}]
        for k in range(5):
            lines.append({"type": "progress", "incarnation": 1, "time": placed + 3.0 + 2 * k,
                          "first_step": 100 * k + 1, "last_step": 100 * (k + 1), "samples_seen": 6400 * (k + 1),
                          "batch_size": 64, "local_bsz": 64 // gpus, "world_size": gpus, "step_time_s": step_time_s,
                          "grad_sqr": 0.5, "grad_var": 2.0, "gpu_type": "t4"})
        consumed.add_reports(job.id, lines, 100)
        store.commit_changes(placed, {}, [], consumed)
    if finish is not None:
        store.update_job(job.id, status="succeeded", finished_s=T0 + finish)
        store.add_event(job.id, "succeeded", "finished", now_s=T0 + finish)
    return job.id


def _state(tmp: Path, *, finished: bool = True) -> Path:
    state = tmp / "state"
    store = Store.open(state)
    store.add_user("alice")
    store.meta_set("service", json.dumps({"policy": "fifo", "cluster": "ray-local-4", "round_s": 2.0}))
    _job(store, "a", 0.0, finish=15.0 if finished else None)
    _job(store, "b", 1.0, finish=16.0 if finished else None, gpus=2, node="rtx-2")
    _job(store, "plain", 2.0, finish=12.0 if finished else None, reports=False, node="a100-3")
    store.close()
    return state


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlsched", *args], capture_output=True, text=True, timeout=300)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_whatif_marks_the_silent_job_and_leaves_the_database_as_it_was(tmp_path):
    state = _state(tmp_path)
    before = _digest(state / "dlsched.db")
    result = whatif(state, policies="fifo", workers=1)
    assert _digest(state / "dlsched.db") == before
    assert result.measured["completed"] == 3 and result.rows[0]["completed"] == 3
    assert result.world["jobs"]["job-3"]["reported"] is False
    assert any("job-3 reported nothing" in n for n in result.notes)
    assert result.fidelity["policy"] == "fifo (replayed)" and set(result.fidelity["job_jct_rel_err"]) == {
        "job-1", "job-2", "job-3"}


def test_step_times_are_the_wall_clock_between_reports_and_the_fidelity_says_where_jobs_ran(tmp_path):
    state = tmp_path / "state"
    store = Store.open(state)
    store.add_user("alice")
    store.meta_set("service", json.dumps({"policy": "fifo", "cluster": "ray-local-4", "round_s": 2.0}))
    # 100 steps every 2 s: 20 ms a step by the clock, where the job reported 5 ms (the step alone)
    _job(store, "a", 0.0, finish=15.0, step_time_s=0.005)
    _job(store, "plain", 2.0, finish=12.0, reports=False, node="a100-3")
    store.close()
    result = whatif(state, policies="fifo", workers=1)
    p = result.world["models"]["svc-job-1"]["step_time"]["t4"]
    assert p["alpha_c"] + p["beta_c"] * 64 == pytest.approx(0.02, rel=0.05)
    assert result.world["fit"]["type_factors"] == "catalog"
    # the silent job held its GPUs 9 s: played for half a round less (the service saw its end a round late)
    silent = result.world["models"]["svc-job-2"]
    assert silent["step_time"]["t4"]["alpha_c"] * 1000 == pytest.approx(9.0 - 1.0)
    jobs = result.fidelity["jobs"]
    assert jobs["job-1"]["measured_gpu_type"] == "t4" and jobs["job-2"]["measured_gpu_type"] == "a100"
    assert result.fidelity["other_type"] == sorted(k for k, v in jobs.items()
                                                   if v["measured_gpu_type"] != v["replayed_gpu_type"])
    assert all(v["rel_err"] == pytest.approx(v["replayed_jct_s"] / v["measured_jct_s"] - 1) for v in jobs.values())


def test_a_state_without_finished_jobs_is_one_error_line(tmp_path):
    state = _state(tmp_path, finished=False)
    for args in (("whatif", "--state", str(state), "--policies", "fifo"),
                 ("trace", "export", "--state", str(state), str(tmp_path / "out.csv")),
                 ("world", "fit", "--state", str(state), str(tmp_path / "w.json"))):
        done = _cli(*args)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and "finished" in lines[0], lines


def test_an_empty_window_and_a_missing_state_are_one_error_line_each(tmp_path):
    state = _state(tmp_path)
    done = _cli("whatif", "--state", str(state), "--since", "2099-01-01", "--policies", "fifo")
    assert done.returncode == 2 and done.stderr.startswith("error:") and "since" in done.stderr
    done = _cli("trace", "export", "--state", str(tmp_path / "nothing"), str(tmp_path / "o.csv"))
    assert done.returncode == 2 and done.stderr.startswith("error:") and "dlsched.db" in done.stderr
    with pytest.raises(InputError, match="--ran"):
        store = Store.open(state)
        store.meta_set("service", "{}")
        store.close()
        whatif(state, policies="fifo", cluster="ray-local-4")


def test_export_validates_and_anonymizes(tmp_path):
    state = _state(tmp_path)
    out = tmp_path / "t.csv"
    done = _cli("trace", "export", "--state", str(state), "--anonymize", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "alice" not in text and "user-1" in text
    assert _cli("trace", "validate", str(out)).stdout.startswith("ok: 3 jobs")


def test_the_history_route_is_for_admins_only(tmp_path):
    from fastapi.testclient import TestClient

    from dlsched.replay.routes import add_history_route
    from dlsched.service.api import create_app

    state = _state(tmp_path)
    store = Store.open(state)
    admin = store.add_user("root", admin=True)
    alice = store.add_token("alice")
    app = create_app(store, jobs_dir=state / "jobs")
    add_history_route(app, store)
    client = TestClient(app)
    assert client.get("/v1/admin/history", headers={"Authorization": f"Bearer {alice}"}).status_code == 403
    got = client.get("/v1/admin/history", headers={"Authorization": f"Bearer {admin}"})
    assert got.status_code == 200
    assert [j["id"] for j in got.json()["jobs"]] == [j["id"] for j in read_state(state).jobs]
    store.close()
