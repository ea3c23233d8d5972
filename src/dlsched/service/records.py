"""What the store hands out: frozen snapshots of rows, detached from any database session.

The round loop and the API hold these across threads and rounds; a frozen dataclass cannot change under
them and carries no lazy-loading session, so reading one never touches the database again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from dlsched.core.view import GradientObservation, ThroughputObservation
from dlsched.service.spec import JobSubmission

#: Every status a service job can have, in the order a job passes through them.
STATUSES = ("queued", "held", "profiling", "running", "succeeded", "failed", "cancelled", "timeout")
#: Statuses of jobs the round loop still schedules (``held``: no configuration of the cluster as it stands
#: can hold the job; it waits outside the scheduler's view, blocking no one, until capacity returns).
ACTIVE_STATUSES = ("queued", "held", "profiling", "running")
#: Statuses a job never leaves.
#: (``timeout``: stopped at its ``wall_time_s``, checkpointed, as Slurm's TIMEOUT.)
FINISHED_STATUSES = ("succeeded", "failed", "cancelled", "timeout")


@dataclass(frozen=True)
class UserRecord:
    name: str
    team: str | None
    admin: bool
    #: The OS account the user's jobs run as (None: the service's job account).
    os_user: str | None = None


@dataclass(frozen=True)
class QuotaRecord:
    kind: Literal["user", "team"]
    name: str
    gpus: int
    borrowing_limit: int | None


@dataclass(frozen=True)
class JobRecord:
    """One job: its spec, where the scheduler put it, and what its workers reported (times in Unix s)."""

    id: str
    user: str
    name: str
    submission: JobSubmission
    status: str
    submitted_s: float
    started_s: float | None
    finished_s: float | None
    gpus: int
    gpu_type: str | None
    #: node name -> local GPU indices
    placement: dict[str, list[int]]
    batch_size: int | None
    incarnation: int
    steps_done: int
    last_checkpoint_step: int
    restarts: int
    failures: int
    preemptions: int
    attained_gpu_s: float
    attained_service_s: float
    progress: float
    cancel_requested: bool
    message: str | None
    profiled_types: tuple[str, ...]
    #: When the job entered the waiting queue (the end of its first profile; None before, or never profiled)
    #: and its attained service then: its latency ratio counts the wait from there (Hops section 3.1).
    queue_entry_s: float | None = None
    service_at_entry_s: float = 0.0
    #: Why the job is where it is, in Slurm's REASON terms (``Resources``, ``Priority``, ``Quota``,
    #: ``Profiling``, ``Held: <why>``, ``Starting``, ``Stopping``; empty while it runs), and the detail.
    reason: str | None = None
    reason_detail: str | None = None
    #: The start-up its last measured incarnation took: launch to its first step (seconds).
    startup_s: float | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES


@dataclass(frozen=True)
class EventRecord:
    time_s: float
    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConsumedReports:
    """What a round took from jobs' ``reports.jsonl`` files: the offsets it read up to, the lines as
    telemetry and the observations made of them.

    The store writes these in the same transaction as the job updates they cause. Stored apart, a crash
    between the two would either skip a report forever (its offset stored, the checkpoint it announced
    not: the job would resume from an older checkpoint and redo steps) or count it twice."""

    offsets: dict[str, int] = field(default_factory=dict)
    telemetry: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    throughput: dict[str, list[ThroughputObservation]] = field(default_factory=dict)
    gradient: dict[str, list[GradientObservation]] = field(default_factory=dict)

    def add_reports(self, job_id: str, reports: list[dict[str, Any]], offset: int) -> None:
        self.telemetry.setdefault(job_id, []).extend(reports)
        self.offsets[job_id] = offset

    def add_observations(self, job_id: str, throughput: list[ThroughputObservation],
                         gradient: list[GradientObservation]) -> None:
        self.throughput.setdefault(job_id, []).extend(throughput)
        self.gradient.setdefault(job_id, []).extend(gradient)
