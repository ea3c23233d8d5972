"""The worker protocol end to end: real ranks, control.json, SIGTERM, reports and checkpoints."""

from __future__ import annotations

import collections
import signal
import time
from pathlib import Path

import pytest
from train_launch import Job, run, start, wait

from dlsched.train.reports import read_reports

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def job(tmp_path: Path) -> Job:
    j = Job(tmp_path / "job", tmp_path / "job" / "checkpoints")
    j.job_dir.mkdir()
    return j


def _of(reports: list[dict], kind: str, incarnation: int | None = None) -> list[dict]:
    return [r for r in reports if r["type"] == kind and (incarnation is None or r["incarnation"] == incarnation)]


def _steps_seen(indices_dir: Path) -> dict[int, list[int]]:
    """Every step's samples over all ranks and incarnations, from the lines the script logged."""
    steps: dict[int, list[int]] = collections.defaultdict(list)
    for path in indices_dir.iterdir():
        for line in path.read_text().splitlines():
            step, _pid, *idx = line.split()
            steps[int(step)].extend(int(i) for i in idx)
    return steps


def test_stop_then_resume_on_another_world_size(job: Job, tmp_path: Path) -> None:
    indices = tmp_path / "indices"
    args = ["--samples", "200", "--batch-size", "10", "--epochs", "2", "--indices-dir", str(indices)]
    first = run(job, 2, [*args, "--write-stop-at", "5"], DLSCHED_REPORT_S="0")
    assert [rc for rc, _ in first] == [0, 0], first
    reports = read_reports(job.job_dir)
    assert _of(reports, "stopped") and _of(reports, "stopped")[0]["step"] == 5
    assert _of(reports, "checkpoint")[-1]["step"] == 5
    assert (job.checkpoint_dir / "step-5.pt").is_file()
    assert max(_steps_seen(indices)) == 5  # nothing trained past the stop

    second = run(job, 1, args, DLSCHED_REPORT_S="0", DLSCHED_RESUME_STEP="5", DLSCHED_INCARNATION="1")
    assert [rc for rc, _ in second] == [0], second
    reports = read_reports(job.job_dir)
    assert _of(reports, "start", 1)[0]["resumed_step"] == 5
    assert _of(reports, "start", 1)[0]["world_size"] == 1
    assert _of(reports, "progress", 1)[0]["first_step"] == 6
    done = _of(reports, "done", 1)[0]["step"]
    # the user's state came back: its count of steps runs on from 5 to the end
    assert all(f"finished at step {done} counter {done}" in out for _, out in second)
    steps = _steps_seen(indices)
    assert sorted(steps) == list(range(1, done + 1))  # every step once, none repeated after the resume
    epochs = collections.Counter(i for idx in steps.values() for i in idx)
    assert epochs == {i: 2 for i in range(200)}  # two epochs: each sample exactly twice
    first_epoch, seen = [], 0
    for s in sorted(steps):
        if seen >= 200:
            break
        first_epoch.extend(steps[s])
        seen += len(steps[s])
    assert sorted(first_epoch) == list(range(200))  # within the interrupted epoch: none lost, none twice


def test_missing_checkpoint_is_an_error_and_exit_code_3(job: Job) -> None:
    results = run(job, 2, ["--epochs", "1"], DLSCHED_RESUME_STEP="7")
    assert [rc for rc, _ in results] == [3, 3], results
    errors = _of(read_reports(job.job_dir), "error")
    assert len(errors) == 1
    assert str(job.checkpoint_dir / "step-7.pt") in errors[0]["message"]
    assert not _of(read_reports(job.job_dir), "start")  # it never started from step 0
    assert "Traceback" not in results[0][1]


def test_batch_size_change_applies_without_restart(job: Job, tmp_path: Path) -> None:
    indices = tmp_path / "indices"
    results = run(job, 2, ["--samples", "400", "--batch-size", "16", "--epochs", "1", "--indices-dir", str(indices),
                           "--write-batch-at", "3:40"], DLSCHED_REPORT_S="0")
    assert [rc for rc, _ in results] == [0, 0], results
    reports = read_reports(job.job_dir)
    assert len(_of(reports, "start")) == 1
    progress = _of(reports, "progress")
    assert [p["batch_size"] for p in progress if p["last_step"] <= 3] == [16, 16, 16]
    later = [p for p in progress if p["first_step"] >= 4]
    assert later and all(p["batch_size"] == 40 for p in later)
    assert later[0]["local_bsz"] == 20
    assert later[0]["samples_seen"] == 3 * 16 + 40
    assert later[0]["grad_sqr"] is not None and later[0]["grad_var"] is not None
    pids = {line.split()[1] for path in indices.iterdir() for line in path.read_text().splitlines()}
    assert len(pids) == 2  # the same two processes before and after the change


def test_sigterm_to_one_rank_checkpoints_and_stops_all(job: Job) -> None:
    procs = start(job, 2, ["--epochs", "1000", "--step-sleep", "0.05"], DLSCHED_REPORT_S="0")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(r.get("last_step", 0) >= 3 for r in _of(read_reports(job.job_dir), "progress")):
            break
        time.sleep(0.1)
    procs[1].send_signal(signal.SIGTERM)
    results = wait(procs, timeout=60)
    assert [rc for rc, _ in results] == [0, 0], results
    reports = read_reports(job.job_dir)
    stopped = _of(reports, "stopped")
    assert len(stopped) == 1 and stopped[0]["step"] >= 3
    assert _of(reports, "checkpoint")[-1]["step"] == stopped[0]["step"]
    assert (job.checkpoint_dir / f"step-{stopped[0]['step']}.pt").is_file()
    assert not _of(reports, "done")


def test_bad_environment_is_one_error_line(job: Job) -> None:
    results = run(job, 1, ["--epochs", "1"], DLSCHED_BATCH_SIZE="lots")
    rc, out = results[0]
    assert rc == 2
    assert out.strip().splitlines()[-1] == "error: field 'DLSCHED_BATCH_SIZE': must be an integer, got 'lots'"
    assert "Traceback" not in out
