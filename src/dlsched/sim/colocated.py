"""What the engine tells the world about jobs that share GPUs (packing), recomputed whenever it changes.

A packed job's speed depends on who shares each of its GPUs and at which share restriction, so its rate is
not a function of its own allocation alone. The engine asks :func:`sharing_of` for every job's
:class:`~dlsched.world.sharing.JobSharing` at the start of each stretch of time in which nothing changes, keys
its rate cache on it, and ends a stretch early when a job that shares a GPU completes (its partners speed up
from that moment, in the same round).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from dlsched.core import Job
from dlsched.world.sharing import JobSharing, WorkerShare


class _HasJob(Protocol):
    job: Job


def full_pct(mps_pct: tuple[int, ...], n: int) -> tuple[int, ...]:
    """Per-worker limits with the default (no restriction: 100 each) spelled out."""
    return mps_pct if mps_pct else (100,) * n


def sharing_of(states: Iterable[_HasJob]) -> dict[str, JobSharing]:
    """Job id -> how its workers share GPUs, for jobs that share a GPU, are restricted or split unevenly.

    Jobs that hold their GPUs alone, unrestricted and with an equal batch split are absent: the world then
    plays them exactly as it did before packing existed.
    """
    jobs = [s.job for s in states if s.job.placement]
    on_gpu: dict[int, list[tuple[Job, int]]] = {}
    for j in jobs:
        for g, pct in zip(j.placement.gpus, full_pct(j.mps_pct, len(j.placement)), strict=True):
            on_gpu.setdefault(g, []).append((j, pct))
    out: dict[str, JobSharing] = {}
    for j in jobs:
        workers = []
        touched = bool(j.mps_pct) or bool(j.batch_split)
        for g, pct in zip(j.placement.gpus, full_pct(j.mps_pct, len(j.placement)), strict=True):
            others = [(o, p) for o, p in on_gpu[g] if o is not j]
            if others:
                touched = True
                other, other_pct = others[0]
                workers.append(WorkerShare(pct, other.spec.model, other_pct))
            else:
                workers.append(WorkerShare(pct))
        if touched:
            out[j.job_id] = JobSharing(tuple(workers), tuple(j.batch_split))
    return out


def has_partner(sharing: JobSharing | None) -> bool:
    """Whether any worker of the job shares its GPU (its completion changes another job's rate)."""
    return sharing is not None and any(w.partner is not None for w in sharing.workers)
