"""What a scheduler returns each round."""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.core.placement import Placement


@dataclass(frozen=True, slots=True)
class Allocation:
    """A job's resources for the next round.

    ``batch_size`` None lets the job pick its own (adaptive jobs choose the goodput-maximising batch size for
    their GPUs; rigid jobs keep the requested one). ``gpu_share`` below 1 means the job shares its GPUs
    with co-located jobs by time slicing; the shares on any GPU may not exceed 1.

    Packing (a scheduler whose traits allow it) instead puts workers of two jobs on one GPU at once, under
    the rules of :mod:`dlsched.core.packing`. ``mps_pct`` then restricts each worker (one entry per GPU, in
    placement order) to a percentage of the GPU's threads, in steps of 10 (empty: all 100, free
    competition); two workers' limits may add up to 200. ``batch_split`` divides the job's global batch
    among its workers (fractions summing to 1; empty: equal), so a fast worker can take samples from a slow
    one without changing the global batch. ``pause_s`` stops the job for that long at the start of the
    round without a restart: the cost a coordinator's search of share limits charges to the jobs it pauses.
    """

    placement: Placement
    batch_size: int | None = None
    gpu_share: float = 1.0
    mps_pct: tuple[int, ...] = ()
    batch_split: tuple[float, ...] = ()
    pause_s: float = 0.0


@dataclass(slots=True)
class Decision:
    """Per job an allocation; jobs not named get no GPUs this round (they wait or are preempted)."""

    allocations: dict[str, Allocation] = field(default_factory=dict)
    #: Jobs to profile this round, on the given GPUs (one minimum-sized configuration per GPU type, as
    #: Sia profiles new jobs). The GPUs are held for the profiling time, charged to the job, and the
    #: job reports one throughput observation per (GPU type, local batch size) when profiling ends.
    profiles: dict[str, Placement] = field(default_factory=dict)
    #: Free-form numbers the policy wants recorded for the round (solver status, objective, ...).
    info: dict[str, float] = field(default_factory=dict)

    def place(self, job_id: str, placement: Placement, batch_size: int | None = None,
              gpu_share: float = 1.0, mps_pct: tuple[int, ...] = (),
              batch_split: tuple[float, ...] = ()) -> None:
        self.allocations[job_id] = Allocation(placement, batch_size, gpu_share, mps_pct, batch_split)
