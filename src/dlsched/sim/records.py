"""What a simulation run records: one row per job, one row per round.

These are plain dataclasses so metrics, reports and tests can work on them without the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class JobRecord:
    """One job's outcome. Times are seconds from trace start; ``finish_s`` is None if it never finished."""

    job_id: str
    model: str
    user: str
    adaptivity: str
    requested_gpus: int
    submit_s: float
    start_s: float | None
    finish_s: float | None
    wait_s: float
    gpu_s: float
    restarts: int
    restart_gpu_s: float
    deadline_s: float | None
    #: Run time alone at the request on the best GPU type (truth; for latency ratio and slowdown).
    ideal_runtime_s: float
    #: Finish-time fairness rho (Sia eq. 3.6) and latency ratio (Hops); None for unfinished jobs.
    ftf: float | None = None
    #: Hops's latency ratio (eqs. 6 and 9): ``queue_wait_s`` (the wait in the waiting queue, section 3.1) over
    #: the expected run time averaged over GPU types.
    latency_ratio: float | None = None
    #: ``queue_wait_s`` over ``ideal_runtime_s`` (the best type's run time at the request): a stricter reading.
    latency_ratio_best: float | None = None
    #: The latency ratio with the wait counted from submission (``wait_s``), the earlier definition.
    latency_ratio_submit: float | None = None
    gpu_s_by_type: dict[str, float] = field(default_factory=dict)
    #: Part of ``gpu_s`` spent on GPUs another job held at the same time (packing): such a GPU-second is in
    #: both jobs' ``gpu_s``, so cluster utilisation counts it once.
    shared_gpu_s: float = 0.0
    #: rho under every reading of eq. 3.6 (``FtfDefinition.label`` -> rho); ``ftf`` is the run's chosen one.
    ftf_by_reading: dict[str, float | None] = field(default_factory=dict)
    #: Of ``restarts`` (every checkpoint-restore charged), the moves to other GPUs with the same GPU type and
    #: per-node counts, which Sia's artifact and thesis do not count as restarts (``restarts_per_job``).
    moves: int = 0
    #: Seconds waited since entering the waiting queue (the end of the job's first profile; submission for a
    #: job never profiled), service attained since subtracted; None where the run did not record it.
    queue_wait_s: float | None = None

    @property
    def jct_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.submit_s


@dataclass(slots=True)
class RoundRecord:
    """One scheduling round."""

    round: int
    time_s: float
    allocated_gpus: int
    idle_gpus: int
    #: Idle GPUs while at least one job waits (fragmentation or policy choice), else 0. A job being profiled
    #: counts as waiting here (see ``profiling_jobs``).
    fragments: int
    queue_len: int
    running_jobs: int
    active_jobs: int
    policy_s: float
    restarts: int
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    #: What the scheduler's stages reported about their decision (``Decision.info``: e.g. Gimbal's
    #: ``gimbal_searches``, ``gimbal_attempts``, ``gimbal_search_s``; packed jobs), kept for reports.
    info: dict[str, float] = field(default_factory=dict)
    #: Jobs of ``queue_len`` that hold GPUs for profiling instead of waiting for them (Hops's profiling queue
    #: is not its waiting queue): ``fragments_waiting`` leaves them out.
    profiling_jobs: int = 0
    #: Jobs of ``queue_len`` neither running nor being profiled that wait for their first profile (Hops's
    #: profiling queue: they are profiled later in the run); set when the run ends
    #: (:func:`dlsched.sim.round_records.settle_waiting_queue`). A job a scheduler never profiles is in the
    #: waiting queue from its arrival.
    awaiting_profile: int = 0

    @property
    def fragments_waiting(self) -> int:
        """Idle GPUs while a job of the waiting queue (section 3.1: a job enters it when its profile ends, or on
        arrival when it is never profiled) is unassigned, else 0: the Hops paper's count, "idle GPUs in the
        cluster when there are unassigned jobs after each round of scheduling". Jobs being profiled and jobs
        still waiting for their profile are not in the waiting queue."""
        return self.idle_gpus if self.queue_len - self.profiling_jobs - self.awaiting_profile > 0 else 0


@dataclass(slots=True)
class Segment:
    """A stretch of time a job held one placement: the allocation timeline in reports."""

    job_id: str
    start_s: float
    end_s: float
    gpu_type: str
    num_gpus: int
    restarting_until_s: float
    #: The global GPU ids held (the dashboard draws them on their nodes); empty where not recorded.
    gpus: tuple[int, ...] = ()
