"""The service's round loop over a real store and a real local Ray: what happens to a job whose worker fails,
hangs, cannot find its checkpoint, is cancelled while it runs, or is held by a quota.

Rounds are driven one by one (``RoundLoop.run_round``), so each test says what a round must have done.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("sqlalchemy")

from dlsched.runtime.dry_run import DryRunExecutor  # noqa: E402
from dlsched.runtime.workload import load_cluster  # noqa: E402
from dlsched.service.api import job_detail  # noqa: E402
from dlsched.service.loop import LoopOptions, RoundLoop  # noqa: E402
from dlsched.service.options import ServeOptions  # noqa: E402
from dlsched.service.server import service_scheduler  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("ray")]


def _loop(tmp: Path, executor: object, *, hang_s: float = 300.0) -> tuple[Store, RoundLoop]:
    store = Store.open(tmp)
    store.add_user("alice", team="vision")
    options = ServeOptions(state=tmp, policy="fifo", round_s=1.0)
    loop = RoundLoop(store, executor, lambda: service_scheduler(options), cluster_name="ray-local-4",  # type: ignore[arg-type]
                     options=LoopOptions(round_s=1.0, jobs_dir=tmp / "jobs", checkpoint_dir=tmp / "ckpt",
                                         stop_grace_s=5.0, hang_s=hang_s))
    return store, loop


def _submit(store: Store, command: str, *, gpus: int = 1, max_failures: int = 1, **env: str) -> str:
    sub = JobSubmission.model_validate({"name": "t", "command": command, "working_dir": str(Path.cwd()),
                                        "gpus": gpus, "max_failures": max_failures, "env": env})
    return store.add_job("alice", sub, time.time()).id


def _rounds_until(loop: RoundLoop, done: Callable[[], bool], *, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        loop.run_round()
        time.sleep(0.5)


def _status(store: Store, job_id: str) -> str:
    job = store.job(job_id)
    assert job is not None
    return job.status


def test_a_crashing_job_is_retried_max_failures_times_then_fails_with_its_log(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor)
    job_id = _submit(store, "echo going down; exit 7", max_failures=2)
    _rounds_until(loop, lambda: _status(store, job_id) in ("failed", "succeeded"))
    job = store.job(job_id)
    assert job is not None and job.status == "failed" and job.failures == 3
    assert "code 7" in (job.message or "")
    kinds = [e.kind for e in store.events(job_id)]
    assert kinds.count("placed") == 3 and kinds.count("failure") == 2 and kinds[-1] == "failed"
    log = (tmp_path / "jobs" / job_id / "logs" / "rank0.log").read_text()
    assert log.count("going down") == 3


def test_a_missing_checkpoint_fails_the_job_with_that_error_never_a_start_from_step_zero(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor)
    job_id = _submit(store, f"{sys.executable} -c 'import dlsched.train as dt; dt.init_process_group()'",
                     max_failures=3)
    store.update_job(job_id, last_checkpoint_step=40)  # the database knows a checkpoint that is gone
    _rounds_until(loop, lambda: _status(store, job_id) in ("failed", "succeeded"))
    job = store.job(job_id)
    assert job is not None and job.status == "failed" and job.failures == 0
    assert "40" in (job.message or "") and "not found" in (job.message or "").lower()


def test_a_first_run_that_exits_3_is_an_ordinary_failure_retried_not_a_missing_checkpoint(tmp_path, ray_executor):
    """Exit 3 is dlsched.train's code for "the checkpoint to resume from is missing" only when the job was
    launched to resume; a script's own exit 3 on a first run is retried up to max_failures like any other."""
    store, loop = _loop(tmp_path, ray_executor)
    job_id = _submit(store, "echo my own code three; exit 3", max_failures=1)
    _rounds_until(loop, lambda: _status(store, job_id) in ("failed", "succeeded"))
    job = store.job(job_id)
    assert job is not None and job.status == "failed" and job.failures == 2
    assert "code 3" in (job.message or "") and "checkpoint" not in (job.message or "")
    assert [e.kind for e in store.events(job_id)].count("placed") == 2


def test_a_hung_job_is_stopped_and_counted_as_a_failure(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor, hang_s=2.0)
    job_id = _submit(store, "sleep 600", max_failures=0)
    _rounds_until(loop, lambda: _status(store, job_id) in ("failed", "succeeded"))
    job = store.job(job_id)
    assert job is not None and job.status == "failed" and "hung" in (job.message or "")
    assert ray_executor.poll(job_id) == []


def test_cancelling_a_running_job_stops_its_workers(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor)
    job_id = _submit(store, "sleep 600", gpus=2)
    _rounds_until(loop, lambda: _status(store, job_id) == "running")
    store.request_cancel(job_id, time.time())
    loop.run_round()
    assert _status(store, job_id) == "cancelled"
    assert ray_executor.poll(job_id) == []


def test_a_team_quota_holds_jobs_past_it_until_its_gpus_free(tmp_path):
    cluster = load_cluster("ray-local-4")
    store, loop = _loop(tmp_path, DryRunExecutor(cluster))
    store.set_quota("team", "vision", 4)
    ids = [_submit(store, "true", gpus=2, DLSCHED_DRY_RUN_S="3") for _ in range(3)]
    loop.run_round()
    assert [_status(store, j) for j in ids] == ["running", "running", "queued"]
    _rounds_until(loop, lambda: all(_status(store, j) == "succeeded" for j in ids))
    assert loop.scheduler.admission.name == "quota"


def test_sia_profiles_a_new_job_on_each_type_then_runs_it_from_what_the_profiles_reported(tmp_path, ray_executor):
    store = Store.open(tmp_path)
    store.add_user("bob")
    options = ServeOptions(state=tmp_path, policy="sia", round_s=2.0)
    loop = RoundLoop(store, ray_executor, lambda: service_scheduler(options), cluster_name="ray-local-4",
                     options=LoopOptions(round_s=2.0, jobs_dir=tmp_path / "jobs", checkpoint_dir=tmp_path / "ckpt",
                                         stop_grace_s=5.0, profile_s=8.0))
    examples = Path(__file__).resolve().parents[2] / "examples"
    sub = JobSubmission.model_validate({"name": "mlp", "command": "python mlp.py --epochs 30", "model": "mlp",
                                        "working_dir": str(examples), "gpus": {"min": 1, "max": 2},
                                        "adaptivity": "adaptive", "batch_size": 64, "max_batch_size": 256})
    job_id = store.add_job("bob", sub, time.time()).id
    seen: set[str] = set()

    def done() -> bool:
        seen.add(_status(store, job_id))
        return _status(store, job_id) in ("succeeded", "failed")

    _rounds_until(loop, done, timeout_s=900)  # a hang guard: profiles start processes, slow on a loaded machine
    job = store.job(job_id)
    assert job is not None and job.status == "succeeded", job
    assert "profiling" in seen and "running" in seen
    assert set(job.profiled_types) == {"t4", "rtx", "a100"}
    # the job entered the waiting queue when its profiles ended (durable: the latency ratio counts from it)
    assert job.queue_entry_s is not None and job.started_s is not None
    assert job.submitted_s < job.queue_entry_s <= job.started_s
    assert job_detail(job, []).queue_entered == datetime.fromtimestamp(job.queue_entry_s, UTC)
    tput, _ = store.observations(job_id)
    assert {o.gpu_type for o in tput} >= {"t4", "rtx", "a100"}, "every profile reported its step times"
