"""What a scheduler returns each round."""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.core.placement import Placement


@dataclass(frozen=True, slots=True)
class Allocation:
    """A job's resources for the next round.

    ``batch_size`` None lets the job pick its own (adaptive jobs choose the goodput-maximising batch size for
    their GPUs; rigid jobs keep the requested one). ``gpu_share`` below 1 means the job shares its GPUs
    with co-located jobs (packing); the shares on any GPU may not exceed 1.
    """

    placement: Placement
    batch_size: int | None = None
    gpu_share: float = 1.0


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
              gpu_share: float = 1.0) -> None:
        self.allocations[job_id] = Allocation(placement, batch_size, gpu_share)
