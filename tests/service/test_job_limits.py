"""What a spec promises, the service does: a job's wall time ends it ``timeout`` with its checkpoint, and a
job over the memory it reserved is stopped with that reason."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.runtime.dry_run import DryRunExecutor  # noqa: E402
from dlsched.runtime.workload import load_cluster  # noqa: E402
from dlsched.service.loop import LoopOptions, RoundLoop  # noqa: E402
from dlsched.service.options import ServeOptions  # noqa: E402
from dlsched.service.server import service_scheduler  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

pytestmark = pytest.mark.timeout(600)


def _loop(tmp: Path, executor: object) -> tuple[Store, RoundLoop]:
    store = Store.open(tmp)
    store.add_user("alice")
    options = ServeOptions(state=tmp, policy="fifo", round_s=1.0)
    loop = RoundLoop(store, executor, lambda: service_scheduler(options), cluster_name="ray-local-4",  # type: ignore[arg-type]
                     options=LoopOptions(round_s=1.0, jobs_dir=tmp / "jobs", checkpoint_dir=tmp / "ckpt",
                                         stop_grace_s=10.0))
    return store, loop


def _rounds(loop: RoundLoop, done: Callable[[], bool], timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        loop.run_round()
        time.sleep(0.5)


def test_a_job_past_its_wall_time_is_stopped_and_ends_timeout(tmp_path):
    store, loop = _loop(tmp_path, DryRunExecutor(load_cluster("ray-local-4")))
    sub = JobSubmission.model_validate({"name": "t", "command": "true", "working_dir": str(tmp_path), "gpus": 2,
                                        "wall_time_s": 3, "env": {"DLSCHED_DRY_RUN_S": "600"}})
    job_id = store.add_job("alice", sub, time.time()).id
    started = time.monotonic()
    _rounds(loop, lambda: (j := store.job(job_id)) is not None and j.finished)
    job = store.job(job_id)
    assert job is not None and job.status == "timeout", job
    assert "wall time of 3 s" in (job.message or "") and time.monotonic() - started < 30
    assert [e.kind for e in store.events(job_id)][-1] == "timeout"


@pytest.mark.xdist_group("ray")
def test_a_job_over_its_memory_is_stopped_with_that_reason(tmp_path):
    pytest.importorskip("ray")
    from dlsched.runtime.executor import RayExecutor

    executor = RayExecutor.local(tmp_path / "ray", load_cluster("ray-local-4"))
    try:
        store, loop = _loop(tmp_path, executor)
        hog = f"{sys.executable} -c 'import time; x = bytearray(600 * 2**20); time.sleep(120)'"
        sub = JobSubmission.model_validate({
            "name": "hog", "command": hog, "working_dir": str(tmp_path), "gpus": 1, "max_failures": 3,
            "resources": {"cpus_per_worker": 0.1, "memory_gb_per_worker": 0.25}})
        job_id = store.add_job("alice", sub, time.time()).id
        _rounds(loop, lambda: (j := store.job(job_id)) is not None and j.finished)
        job = store.job(job_id)
        assert job is not None and job.status == "failed" and job.failures == 0, job
        assert "0.25 GB per worker" in (job.message or "")
    finally:
        executor.close(stop_ray=True)
