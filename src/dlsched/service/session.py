"""A workload run through the service's own machinery in this process, without the HTTP API.

Experiments and benchmarks that measure the service (how much of the GPU time its jobs hold is spent
stepping, what a round costs) run the same store, executor and round loop that ``dlsched serve`` runs, with
the jobs submitted at their arrival times as a team's client would submit them. Nothing here schedules or
runs jobs differently from the service: it only replaces the clients and the clock's owner.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dlsched.service.loop import FINISHED, LoopOptions, RoundLoop
from dlsched.service.options import ServeOptions
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store


@dataclass(frozen=True)
class TimedSubmission:
    """A job submitted ``at_s`` seconds after the workload starts, by ``user``."""

    at_s: float
    submission: JobSubmission
    user: str = "admin"


@dataclass(frozen=True)
class WorkloadRun:
    """What a finished workload left: its job ids in submission order and the wall time it took."""

    job_ids: tuple[str, ...]
    wall_s: float
    rounds: int
    timed_out: bool


def run_workload(options: ServeOptions, workload: Sequence[TimedSubmission], *,
                 max_time_s: float | None = None) -> WorkloadRun:
    """Submit the workload at its times and run rounds every ``options.round_s`` until every job has ended
    (or ``max_time_s`` has passed); the state stays in ``options.state`` for the caller to read."""
    from dlsched.service.server import admin_token, build_executor, service_scheduler

    state = options.state.expanduser().resolve()
    state.mkdir(parents=True, exist_ok=True)
    store = Store.open(state, options.database)
    admin_token(store, state)
    for user in {w.user for w in workload} - {u.name for u in store.users()}:
        store.add_user(user)
    executor, cluster_name = build_executor(options, state)
    checkpoint_dir = (options.checkpoint_dir or state / "checkpoints").expanduser().resolve()
    loop = RoundLoop(store, executor, lambda: service_scheduler(options),
                     cluster_name=cluster_name,
                     options=LoopOptions(round_s=options.round_s, jobs_dir=state / "jobs",
                                         checkpoint_dir=checkpoint_dir, stop_grace_s=options.stop_grace_s,
                                         min_run_s=options.min_run_s,
                                         explain_keep_rounds=options.explain_keep_rounds))
    pending = sorted(workload, key=lambda w: w.at_s)
    ids: list[str] = []
    start = time.monotonic()
    rounds = 0
    timed_out = False
    try:
        while True:
            elapsed = time.monotonic() - start
            while pending and pending[0].at_s <= elapsed:
                w = pending.pop(0)
                ids.append(store.add_job(w.user, w.submission, time.time()).id)
            if not pending and all(_ended(store, j) for j in ids):
                break
            if max_time_s is not None and elapsed >= max_time_s:
                timed_out = True
                break
            t0 = time.monotonic()
            loop.run_round()
            rounds += 1
            nxt = t0 + options.round_s
            if pending:
                nxt = min(nxt, start + pending[0].at_s)
            time.sleep(max(0.0, nxt - time.monotonic()))
    finally:
        loop.shutdown()
        executor.close(stop_ray=True)
        store.close()
    return WorkloadRun(job_ids=tuple(ids), wall_s=time.monotonic() - start, rounds=rounds, timed_out=timed_out)


def _ended(store: Store, job_id: str) -> bool:
    job = store.job(job_id)
    return job is None or job.status in FINISHED


def stepping_fraction(reports: Sequence[dict[str, Any]], placed_at: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(GPU-seconds spent stepping, GPU-seconds held) of one job.

    Held: from each incarnation's placement (``placed_at``: (incarnation, Unix time)) to its last report
    (``done``, ``stopped`` or the last progress), times its workers. Stepping: the time its workers were in
    the training loop, from its ``start`` report (written as the first step begins) to its last report, less
    the time its checkpoints stood the loop still (each ``checkpoint`` report's ``seconds``), times its
    workers: what is left of held is start-up (placement, process start, imports, data, model, process
    group, restore) and exit. GPUs a finished job leaves until the next round are the scheduler's cadence,
    not the job's, and are not counted (as the runtime's fidelity check counts a last round by the worker's
    own time)."""
    placed = dict(placed_at)
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    world: dict[int, int] = {}
    paused: dict[int, float] = {}
    for r in reports:
        inc = int(r.get("incarnation", -1))
        if inc not in placed:
            continue
        when = float(r.get("time", 0.0))
        last[inc] = max(last.get(inc, 0.0), when)
        if r["type"] == "start":
            first[inc] = when
            world[inc] = int(r.get("world_size") or 1)
        elif r["type"] == "checkpoint":
            paused[inc] = paused.get(inc, 0.0) + float(r.get("seconds") or 0.0)
    stepping = sum(max(0.0, last[inc] - first[inc] - paused.get(inc, 0.0)) * world[inc] for inc in first)
    held = sum(max(0.0, last[inc] - placed[inc]) * world.get(inc, 1) for inc in last)
    return stepping, held
