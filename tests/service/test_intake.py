"""A report is acted on exactly once, whenever the service dies: what a round read counts only with the
round's commit (the checkpoint a dead job announced is where it resumes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlsched.service.intake import ReportIntake
from dlsched.service.spec import parse_submission
from dlsched.service.store import Store


@pytest.fixture
def store(db_url: str):
    s = Store(db_url)
    yield s
    s.close()


def _job(store: Store, jobs_dir: Path) -> tuple[str, Path]:
    store.add_user("alice")
    job = store.add_job("alice", parse_submission({"name": "demo", "command": "python t.py", "working_dir": "/tmp",
                                                   "gpus": 1}), 1.0)
    (jobs_dir / job.id).mkdir(parents=True)
    return job.id, jobs_dir / job.id / "reports.jsonl"


def _append(path: Path, *reports: dict) -> None:
    with path.open("a") as fh:
        for r in reports:
            fh.write(json.dumps(r) + "\n")


def test_reports_read_by_a_round_that_never_committed_are_read_again_after_a_restart(store: Store, tmp_path: Path):
    job_id, path = _job(store, tmp_path)
    _append(path, {"type": "checkpoint", "incarnation": 1, "step": 222},
            {"type": "checkpoint", "incarnation": 1, "step": 251})
    first = ReportIntake(store, tmp_path)
    assert [r["step"] for r in first.read(job_id)] == [222, 251]
    assert first.read(job_id) == []  # read once within the round
    # the service dies here, before the round commits: a new one reads the same lines
    second = ReportIntake(store, tmp_path)
    job = store.job(job_id)
    assert job is not None
    up: dict = {}
    second.catch_up(job, up, 10.0)
    assert up["last_checkpoint_step"] == 251
    consumed = second.take()
    store.commit_changes(10.0, {job_id: up}, [], consumed)
    second.committed(consumed)
    assert store.job(job_id).last_checkpoint_step == 251  # type: ignore[union-attr]
    assert [r["step"] for r in store.telemetry(job_id)] == [222, 251]
    # once committed, neither this service nor the next reads them again; new lines still come
    _append(path, {"type": "checkpoint", "incarnation": 1, "step": 260})
    assert [r["step"] for r in second.read(job_id)] == [260]
    assert [r["step"] for r in ReportIntake(store, tmp_path).read(job_id)] == [260]


def test_a_failed_commit_leaves_the_reports_unread(store: Store, tmp_path: Path):
    job_id, path = _job(store, tmp_path)
    _append(path, {"type": "checkpoint", "incarnation": 1, "step": 5})
    intake = ReportIntake(store, tmp_path)
    intake.begin()
    assert intake.read(job_id)
    consumed = intake.take()
    with pytest.raises(KeyError):  # an update of an unknown job rolls the whole commit back
        store.commit_round(0, 1.0, {}, 0.0, {}, {"job-99": {"steps_done": 1}}, [], None, consumed)
    assert store.reports_offset(job_id) == 0 and store.telemetry(job_id) == []
    intake.begin()  # the next round
    assert [r["step"] for r in intake.read(job_id)] == [5]

