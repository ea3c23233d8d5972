"""What the service's round loop is configured with and keeps between rounds, apart from the loop itself.

Kept in a module of its own so that the parts of a round (settling workers, pinning young incarnations,
waiting reasons) can share these types without importing the loop that composes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dlsched.core import JobSpec
from dlsched.core.view import GradientObservation, ThroughputObservation
from dlsched.service.isolation import Isolation
from dlsched.service.records import FINISHED_STATUSES

FINISHED = FINISHED_STATUSES
#: Longest a profile run may take to reach its first step before it is ended regardless.
PROFILE_START_S = 300.0
#: Exit code of a worker that could not find the checkpoint it was told to resume from.
EXIT_NO_CHECKPOINT = 3
#: Exit codes of a command that cannot start at all, as a shell reports them (126: found but not runnable,
#: 127: not found, or its working folder is missing): retrying cannot help, so the job fails at once.
EXIT_CANNOT_START = (126, 127)


@dataclass(frozen=True)
class LoopOptions:
    """How the service runs rounds."""

    round_s: float
    #: One folder per job: control.json, reports.jsonl, logs/ (every node must see it).
    jobs_dir: Path
    #: One folder per job's checkpoints (every node must see it).
    checkpoint_dir: Path
    #: Seconds a stopped worker has to checkpoint and exit (its whole process group) before it is killed.
    stop_grace_s: float = 60.0
    #: A running job that reports nothing for this long (after its start-up) counts as hung: a failure.
    hang_s: float = 300.0
    #: Seconds a job's profile steps on each GPU type, from its first step (Sia's and Hops's profiling of
    #: new jobs).
    profile_s: float = 20.0
    #: A placed incarnation is not moved or resized before it has reported its first step and a checkpoint,
    #: or this many seconds have passed (whatever the policy decides): a move before that loses all its work.
    min_run_s: float = 30.0
    #: A job whose ranks (or profile run) ran this long without the ``start`` report ``dlsched.train``
    #: writes is a script that reports nothing (:mod:`dlsched.service.silent`).
    silent_after_s: float = 60.0
    #: Who jobs run as (None: the service's own account, as ``isolation: none``), and the bytes each rank's
    #: log may hold (None: no cap).
    isolation: Isolation | None = None
    max_log_bytes: int | None = None
    #: Explanation records that stopped holding more than this many rounds ago are deleted (None: kept);
    #: a job's current records are kept whatever their age.
    explain_keep_rounds: int | None = None


@dataclass
class JobMemory:
    """What the loop keeps per job between rounds, beyond the database row (rebuilt after a restart)."""

    spec: JobSpec | None = None
    new_tput: list[ThroughputObservation] = field(default_factory=list)
    new_grad: list[GradientObservation] = field(default_factory=list)
    last_grad: tuple[float, float] | None = None
    last_report_s: float | None = None
    launched_s: float | None = None
    #: The current incarnation reported a step / a checkpoint since it was launched.
    stepped: bool = False
    checkpointed: bool = False
    #: Its start-up (launch to first step) is still to be measured: set by a launch, not by a re-attach.
    measure_startup: bool = False
    #: Its current run wrote the ``start`` report (it runs dlsched.train); the job reports nothing at all.
    started_report: bool = False
    silent: bool = False
    #: Not started again before this time: workers lost with their node may still be finishing a step and
    #: a checkpoint; the next round reads it first, so the job resumes from the newest one.
    hold_until: float = 0.0
    #: Profile runs in flight: executor key -> (GPU type, global GPU id, end time).
    profiles: dict[str, tuple[str, int, float]] = field(default_factory=dict)
