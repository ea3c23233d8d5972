"""Scheduler stages and their composition.

A scheduler is admission -> ordering -> allocation -> placement (-> coordination). Each stage is a small
object with one method, so the CLI can swap one (``--ordering las --placement pal``) without touching the
others. Stages see only the :class:`~dlsched.core.ClusterView`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from dlsched.core import ClusterView, Decision, JobView


@dataclass(frozen=True, slots=True)
class Demand:
    """What allocation asks of placement: ``num_gpus`` GPUs (of ``gpu_type``, or any allowed type)."""

    job: JobView
    num_gpus: int
    gpu_type: str | None = None
    batch_size: int | None = None
    #: Number of nodes the allocation expects (None: placement decides).
    num_nodes: int | None = None


class Admission(Protocol):
    def admit(self, view: ClusterView) -> list[JobView]: ...


class Ordering(Protocol):
    name: str

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]: ...


class AllocationStage(Protocol):
    name: str

    def allocate(self, view: ClusterView, ordered: list[JobView]) -> list[Demand]: ...


class PlacementStage(Protocol):
    name: str

    def place(self, view: ClusterView, demands: list[Demand]) -> Decision: ...


class Scheduler(Protocol):
    """Anything the engine can call once per round."""

    name: str
    #: True if the scheduler may put several jobs on one GPU (shares must still sum to at most 1).
    allows_packing: bool

    def schedule(self, view: ClusterView) -> Decision: ...


class AdmitAll:
    """Every submitted job is active at once (no profiling queue)."""

    def admit(self, view: ClusterView) -> list[JobView]:
        return list(view.jobs)


@dataclass
class StagedScheduler:
    """A scheduler composed of one stage of each kind."""

    name: str
    ordering: Ordering
    allocation: AllocationStage
    placement: PlacementStage
    admission: Admission = field(default_factory=AdmitAll)
    allows_packing: bool = False

    def schedule(self, view: ClusterView) -> Decision:
        jobs = self.admission.admit(view)
        ordered = self.ordering.order(view, jobs)
        demands = self.allocation.allocate(view, ordered)
        return self.placement.place(view, demands)

    @property
    def rigid(self) -> bool:
        """True when every job runs on exactly the GPUs it requested (so each request must fit)."""
        return bool(getattr(self.allocation, "rigid", False))

    def describe(self) -> str:
        return f"{self.name} (ordering={self.ordering.name}, allocation={self.allocation.name}, " \
               f"placement={self.placement.name})"
