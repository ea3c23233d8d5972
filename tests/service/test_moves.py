"""Moves lose nothing: a job moved or resized every round resumes each time at the step it stopped at.

A real store, a real local Ray and real training processes (``examples/mlp.py`` with ``dlsched.train``),
one wrapped as ``python mlp.py`` and one in a ``sh -c`` script that outlives its python (the case where the
shell dies of the stop signal first and its child must still write the stop checkpoint). The scheduler is a
policy made to move every job on every round, so every incarnation is stopped by a move or a resize; the
service's pinning (``min_run_s``) lets it move only once the incarnation has stepped and checkpointed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
pytest.importorskip("sqlalchemy")

from cycling import CyclingPolicy
from servicekit import EXAMPLES, check_contiguous, reports  # noqa: E402

from dlsched.runtime.executor import RayExecutor  # noqa: E402
from dlsched.service.loop import LoopOptions, RoundLoop  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("ray")]

#: Each job's placements in turn (global GPU ids on ray-local-4: nodes of 2 GPUs, t4 t4 rtx a100): every
#: step to the next changes the node, the GPU count or both.
CYCLES = {"job-1": [(0,), (2, 3), (1,), (2,), (0, 1), (3,)],
          "job-2": [(4,), (6, 7), (5,), (6,), (4, 5), (7,)]}


def _loop(tmp: Path, executor: RayExecutor, *, min_run_s: float) -> tuple[Store, RoundLoop]:
    store = Store.open(tmp)
    store.add_user("alice")
    loop = RoundLoop(store, executor, lambda: CyclingPolicy("mover", CYCLES), cluster_name="ray-local-4",  # type: ignore[arg-type]
                     options=LoopOptions(round_s=1.0, jobs_dir=tmp / "jobs", checkpoint_dir=tmp / "ckpt",
                                         stop_grace_s=60.0, min_run_s=min_run_s))
    return store, loop


def _submit(store: Store, command: str, env: dict[str, str]) -> str:
    sub = JobSubmission.model_validate({
        "name": "mlp", "command": command, "working_dir": str(EXAMPLES), "model": "mlp",
        "gpus": {"min": 1, "max": 2}, "adaptivity": "adaptive", "batch_size": 64, "max_batch_size": 256,
        "env": {"DLSCHED_REPORT_S": "1", **env}})
    return store.add_job("alice", sub, time.time()).id


def _rounds(loop: RoundLoop, done: Callable[[], bool], *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        loop.run_round()
        time.sleep(0.3)


def _reports(tmp: Path, job_id: str) -> list[dict[str, Any]]:
    return reports(tmp, job_id)


def test_a_job_moved_every_round_resumes_each_time_where_it_stopped(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor, min_run_s=600.0)
    fast = {"DLSCHED_CHECKPOINT_S": "1"}
    plain = _submit(store, "python mlp.py --epochs 100000", fast)
    wrapped = _submit(store, "sh -c 'python mlp.py --epochs 100000; echo python ended'", fast)
    ids = (plain, wrapped)

    def moved_enough() -> bool:
        return all((j := store.job(i)) is not None and j.incarnation >= 12 for i in ids)

    _rounds(loop, moved_enough, timeout_s=720)
    for job_id in ids:
        store.request_cancel(job_id, time.time())
    _rounds(loop, lambda: all((j := store.job(i)) is not None and j.finished for i in ids), timeout_s=120)
    for job_id in ids:
        job = store.job(job_id)
        assert job is not None and job.status == "cancelled"
        got = _reports(tmp_path, job_id)
        incarnations, _last = check_contiguous(got)  # no step done twice past a checkpoint, none skipped
        assert incarnations >= 11
        stopped = {int(r["incarnation"]): int(r["step"]) for r in got if r["type"] == "stopped"}
        starts = {int(r["incarnation"]): int(r["resumed_step"]) for r in got if r["type"] == "start"}
        # every incarnation a move ended wrote its stop checkpoint, and the next resumed exactly there
        for k in sorted(starts):
            if k + 1 in starts:
                assert k in stopped, f"{job_id}: incarnation {k} was moved without its stop checkpoint"
                assert starts[k + 1] == stopped[k], (
                    f"{job_id}: incarnation {k} stopped at step {stopped[k]}, the next resumed at {starts[k + 1]}")
        # and no incarnation was moved before it had stepped and checkpointed (the pinning rule)
        for k in stopped:
            mine = [r for r in got if r.get("incarnation") == k]
            kinds = [r["type"] for r in mine]
            assert "progress" in kinds and kinds.index("checkpoint") < kinds.index("stopped")
        job_row = store.job(job_id)
        assert job_row is not None and job_row.startup_s is not None and 0 < job_row.startup_s < 120


def test_an_incarnation_is_not_moved_before_its_first_checkpoint_within_min_run_s(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor, min_run_s=600.0)
    job_id = _submit(store, "python mlp.py --epochs 100000", {"DLSCHED_CHECKPOINT_S": "3600"})

    def stepped_a_while() -> bool:
        job = store.job(job_id)
        return job is not None and job.steps_done >= 40

    _rounds(loop, stepped_a_while, timeout_s=300)
    for _ in range(5):  # the mover asks for a move on each of these rounds too
        loop.run_round()
        time.sleep(0.5)
    job = store.job(job_id)
    assert job is not None and job.incarnation == 1 and job.status == "running", job
    assert job.reason == "Starting" or job.reason is None
    kinds = [e.kind for e in store.events(job_id)]
    assert kinds.count("placed") == 1
    store.request_cancel(job_id, time.time())
    _rounds(loop, lambda: (j := store.job(job_id)) is not None and j.finished, timeout_s=120)
    assert any(r["type"] == "stopped" for r in _reports(tmp_path, job_id)), "the cancel checkpointed too"
