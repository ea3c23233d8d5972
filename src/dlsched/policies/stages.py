"""The contracts between a scheduler's stages, and between the engine and a scheduler.

A scheduler is admission -> ordering -> allocation -> placement -> coordination, each a small object with
one method, so the CLI can swap one (``--ordering las --placement pal``) without touching the others.
Stages see only the :class:`~dlsched.core.ClusterView`.

What flows between them:

* admission returns the jobs that take part in this round;
* ordering returns them in priority order;
* allocation returns a :class:`Plan`: per job a :class:`Demand` (how many GPUs, of which type, over how many
  nodes, at which batch size, and smaller shapes it would also accept), plus GPUs to profile new jobs on
  and GPUs nobody may use (reservations);
* placement turns the plan into a :class:`~dlsched.core.Decision` of exact GPU ids;
* coordination may adjust what co-located jobs do on shared GPUs (the identity unless packing is on).

State a stage carries from round to round (its previous decision, its estimator, leases, time-share
accounting) lives on the stage object itself, in attributes its class docstring names. The registry builds
fresh stage objects for every run, so no state leaks between runs.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from dlsched.core import ClusterView, Decision, JobView
from dlsched.estimators.base import GoodputEstimator
from dlsched.policies.reasons import RecordChanges, Recorder


@dataclass(frozen=True, slots=True)
class Shape:
    """A configuration: ``num_gpus`` GPUs of ``gpu_type`` over ``num_nodes`` nodes (None: any)."""

    gpu_type: str | None
    num_gpus: int
    num_nodes: int | None = None


@dataclass(frozen=True, slots=True)
class Demand:
    """What allocation asks of placement for one job.

    ``num_gpus`` GPUs of ``gpu_type`` (None: any type the job accepts) over ``num_nodes`` nodes (None:
    placement decides). ``batch_size`` None lets an adaptive job pick its own. ``pinned`` jobs must keep
    their current GPUs (non-preemptible jobs, jobs in the middle of a restore). ``fallbacks`` are smaller
    shapes the allocation would also accept, best first, for when the preferred one cannot be placed.
    ``spread`` is a placement hint from allocations that plan GPUs per group of GPUs (Pollux's per-node
    counts): ``(gpu ids of a group, GPUs wanted there)`` pairs; placements that plan themselves ignore it.
    """

    job: JobView
    num_gpus: int
    gpu_type: str | None = None
    batch_size: int | None = None
    num_nodes: int | None = None
    pinned: bool = False
    fallbacks: tuple[Shape, ...] = ()
    spread: tuple[tuple[tuple[int, ...], int], ...] = ()

    def shapes(self) -> list[Shape]:
        """The preferred shape followed by the fallbacks."""
        return [Shape(self.gpu_type, self.num_gpus, self.num_nodes), *self.fallbacks]


@dataclass(frozen=True, slots=True)
class ProfileRequest:
    """Profile a new job on ``(gpu_type, num_gpus)`` per type: the GPUs are held for the profiling time."""

    job: JobView
    shapes: tuple[tuple[str, int], ...]
    #: The exact GPUs to profile on, when the allocation chose them (Hops profiles on GPUs no job holds);
    #: empty: placement picks them per shape.
    gpus: tuple[int, ...] = ()


@dataclass(slots=True)
class Plan:
    """An allocation stage's answer: demands in the order placement should serve them, and the rest."""

    demands: list[Demand] = field(default_factory=list)
    profiles: list[ProfileRequest] = field(default_factory=list)
    #: Boolean mask of GPUs no job may be placed on this round (reservations); None: none reserved.
    reserved: np.ndarray | None = None
    #: Numbers to record for the round (solver status, timings), copied into ``Decision.info``.
    info: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AllocationTraits:
    """What an allocation stage promises, so the registry can refuse combinations that cannot work."""

    #: Every job gets exactly its requested GPUs (the engine then rejects requests that can never fit).
    rigid: bool = False
    #: The priority order decides who gets GPUs (False: the stage ranks jobs through its own objective and
    #: the ordering only breaks ties).
    uses_order: bool = True
    #: Demands carry ``spread`` hints (per-group GPU counts).
    plans_spread: bool = False
    #: Every demand names its GPU type.
    names_gpu_type: bool = False
    #: Orderings a stage that ranks jobs itself (``uses_order`` False) still follows, as the Hops paper runs
    #: Sia and Gavel under its latency-ratio queue; the registry hands the ordering's name to the stage's
    #: ``ordering`` field when it has one.
    follows_orderings: tuple[str, ...] = ()
    #: Plans again inside a round when GPUs fall idle (Hops): the stage has ``allocate_more``.
    plans_within_round: bool = False


@dataclass(frozen=True, slots=True)
class PlacementTraits:
    """What a placement stage needs from the allocation before it."""

    #: Needs ``Demand.spread`` (it places by the allocation's per-group counts).
    needs_spread: bool = False
    #: Needs every demand to name its GPU type.
    needs_gpu_type: bool = False


@dataclass(frozen=True, slots=True)
class SchedulerTraits:
    """What the engine asks of a scheduler before the first round."""

    #: Jobs run on exactly the GPUs they request, so a request larger than any GPU type is an input error.
    rigid: bool = False
    #: The policy's estimator must answer from the simulator's truth (comparison runs only).
    needs_oracle: bool = False
    #: Several jobs may share a GPU (time-sliced shares summing to at most 1, or packed under
    #: :mod:`dlsched.core.packing`'s rules).
    allows_packing: bool = False
    #: The coordination stage measures trial plans through a runtime monitor the run attaches
    #: (:meth:`StagedScheduler.attach_monitor`).
    needs_monitor: bool = False
    #: The engine calls ``schedule_more`` whenever a job completes inside a round (Hops's plans within a
    #: round); the new plans end with the round.
    plans_within_round: bool = False
    #: With ``plans_within_round``: the engine also calls ``schedule_more`` when a profile ends inside a round
    #: (the profiled job joins the waiting queue and is planned at once, Hops section 3.6), not only at the
    #: next round.
    plans_on_profile_end: bool = False


class Admission(Protocol):
    """Which active jobs take part in this round's scheduling."""

    name: str

    def admit(self, view: ClusterView) -> list[JobView]: ...


class Ordering(Protocol):
    """The priority order of the admitted jobs; ties break by submit time then job id."""

    name: str

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]: ...


class AllocationStage(ABC):
    """How many GPUs of which type each job gets.

    Subclasses that consult a goodput estimator say so through :meth:`needs_oracle` and accept one through
    :meth:`attach_estimator`; the engine's side of this is :attr:`StagedScheduler.traits`.
    """

    name: str
    traits: ClassVar[AllocationTraits] = AllocationTraits()

    @abstractmethod
    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan: ...

    def needs_oracle(self) -> bool:
        """True when the stage's estimator must answer from the simulator's truth."""
        return False

    def attach_estimator(self, estimator: GoodputEstimator) -> None:
        """Use ``estimator`` for goodput (the simulator's oracle in comparison runs)."""
        raise TypeError(f"allocation '{self.name}' uses no goodput estimator")

    def describe(self) -> str:
        return self.name


class EstimatingAllocation(AllocationStage):
    """An allocation that asks a goodput estimator. It holds the estimator in ``estimator``: its own learned
    one, or the simulator's oracle once attached (None until then when the stage needs the oracle)."""

    estimator: GoodputEstimator | None = None

    def attach_estimator(self, estimator: GoodputEstimator) -> None:
        self.estimator = estimator

    def require_estimator(self) -> GoodputEstimator:
        """The estimator; an error if the stage needs the oracle and the run did not attach one."""
        if self.estimator is None:
            raise RuntimeError(f"allocation '{self.name}' needs the simulator's oracle "
                               f"(every run attaches it: dlsched.sim.run.attach_oracle)")
        return self.estimator


class PlacementStage(ABC):
    """Which exact GPUs each demand gets; demands it cannot place this round get none."""

    name: str
    traits: ClassVar[PlacementTraits] = PlacementTraits()

    @abstractmethod
    def place(self, view: ClusterView, plan: Plan) -> Decision: ...


class Coordination(Protocol):
    """What co-located jobs do on shared GPUs (shares, per-worker batch splits)."""

    name: str
    #: True if the stage may give several jobs one GPU.
    allows_packing: bool

    def coordinate(self, view: ClusterView, decision: Decision) -> Decision: ...


@runtime_checkable
class Scheduler(Protocol):
    """Anything the engine (or the runtime) can call once per round."""

    name: str

    @property
    def traits(self) -> SchedulerTraits: ...

    def schedule(self, view: ClusterView) -> Decision: ...

    def attach_oracle(self, estimator: GoodputEstimator) -> None: ...

    def describe(self) -> str: ...


@dataclass
class AdmitAll:
    """Every active job takes part (no admission control)."""

    name: str = "all"

    def admit(self, view: ClusterView) -> list[JobView]:
        return list(view.jobs)


@dataclass
class NoCoordination:
    """Each job has its GPUs to itself; the decision passes unchanged."""

    name: str = "none"
    allows_packing: bool = False

    def coordinate(self, view: ClusterView, decision: Decision) -> Decision:
        return decision


def _copy(decision: Decision) -> Decision:
    """A shallow copy whose allocations a coordination stage may replace without touching the original."""
    return Decision(allocations=dict(decision.allocations), profiles=dict(decision.profiles), info=decision.info)


def admitted_view(view: ClusterView, admitted: list[JobView]) -> ClusterView:
    """The view the later stages see: the jobs admission let in (as it returned them, capped or not) and
    every job that holds GPUs, so no stage can allocate to a held job or read a held job's request, and no
    GPU a job holds looks free. When admission let everyone in unchanged, the view itself."""
    if len(admitted) == len(view.jobs) and all(a is b for a, b in zip(admitted, view.jobs, strict=True)):
        return view
    ids = {j.job_id for j in admitted}
    holding = [j for j in view.jobs if j.job_id not in ids and (j.placement or j.profile_placement)]
    return dataclasses.replace(view, jobs=[*admitted, *holding])


def reserve_profiling_gpus(view: ClusterView, plan: Plan) -> Plan:
    """The plan with the GPUs of profiles still running added to its reserved GPUs, whatever the allocation
    stage knew of them: no placement stage may hand out a GPU a profile holds."""
    held = view.profiling_gpus()
    if held is not None:
        plan.reserved = held if plan.reserved is None else (plan.reserved | held)
    return plan


@dataclass
class StagedScheduler:
    """A scheduler composed of one stage of each kind."""

    name: str
    admission: Admission
    ordering: Ordering
    allocation: AllocationStage
    placement: PlacementStage
    coordination: Coordination = field(default_factory=NoCoordination)
    #: Record why each stage decided (:mod:`dlsched.policies.reasons`); :meth:`take_explanations` hands the
    #: records over. On by default: it costs a few percent of a simulation.
    explain: bool = True
    #: Collapse a job's unchanged decisions into one record per stage (the simulator, and the service, which
    #: stores the changes); False: a record per job, stage and round.
    explain_collapse: bool = True
    _recorder: Recorder | None = field(default=None, init=False, repr=False)

    @property
    def traits(self) -> SchedulerTraits:
        return SchedulerTraits(rigid=self.allocation.traits.rigid, needs_oracle=self.allocation.needs_oracle(),
                               allows_packing=self.coordination.allows_packing,
                               needs_monitor=bool(getattr(self.coordination, "needs_monitor", False)),
                               plans_within_round=self.allocation.traits.plans_within_round,
                               plans_on_profile_end=self.allocation.traits.plans_within_round
                               and bool(getattr(self.allocation, "plan_on_profile_end", False)))

    def schedule(self, view: ClusterView) -> Decision:
        full = view
        jobs = self.admission.admit(view)
        view = admitted_view(view, jobs)
        ordered = self.ordering.order(view, jobs)
        plan = self.allocation.allocate(view, ordered)
        decision = self.placement.place(view, reserve_profiling_gpus(view, plan))
        decision.info.update(plan.info)
        placed = _copy(decision) if self.explain and self.coordination.allows_packing else decision
        final = self.coordination.coordinate(view, decision)
        if self.explain:
            self._record(full, view, jobs, ordered, plan, placed, final, new_round=True)
        return final

    def schedule_more(self, view: ClusterView) -> Decision:
        """A plan for GPUs that fell idle inside a round (only when ``traits.plans_within_round``): running
        jobs keep their GPUs, waiting ones may get the idle GPUs."""
        more = getattr(self.allocation, "allocate_more", None)
        if more is None:
            raise TypeError(f"allocation '{self.allocation.name}' does not plan inside a round")
        full = view
        jobs = self.admission.admit(view)
        view = admitted_view(view, jobs)
        ordered = self.ordering.order(view, jobs)
        plan = more(view, ordered)
        decision = self.placement.place(view, reserve_profiling_gpus(view, plan))
        decision.info.update(plan.info)
        placed = _copy(decision) if self.explain and self.coordination.allows_packing else decision
        final = self.coordination.coordinate(view, decision)
        if self.explain:
            self._record(full, view, jobs, ordered, plan, placed, final, new_round=False)
        return final

    def _record(self, full: ClusterView, view: ClusterView, admitted: list[JobView], ordered: list[JobView],
                plan: Plan, placed: Decision, final: Decision, *, new_round: bool) -> None:
        """Hand the round to the recorder: ``full`` is the view admission saw (held jobs too), ``view`` the
        one the later stages saw."""
        if self._recorder is None:
            self._recorder = Recorder(collapse=self.explain_collapse)
        self._recorder.record(self, full, view, admitted, ordered, plan, placed, final, new_round=new_round)

    def take_explanations(self) -> list[dict]:
        """The records of the rounds planned since the last call (the contract in docs/service.md,
        "Explanations"), oldest first; empty when ``explain`` is off."""
        return [] if self._recorder is None else self._recorder.take()

    def take_explanation_changes(self, round_no: int) -> RecordChanges:
        """The records opened and closed since the last call, open ones staying open (the service's way:
        :meth:`Recorder.take_changes`), the last round numbered ``round_no``; nothing when ``explain`` is
        off. Not to be mixed with :meth:`take_explanations` on one scheduler."""
        if self._recorder is None:
            return RecordChanges()
        return self._recorder.take_changes(round_no)

    def attach_oracle(self, estimator: GoodputEstimator) -> None:
        self.allocation.attach_estimator(estimator)

    def attach_monitor(self, monitor: object) -> None:
        """Hand the coordination stage the runtime monitor it asked for (``traits.needs_monitor``)."""
        self.coordination.attach_monitor(monitor)  # type: ignore[attr-defined]

    def stages(self) -> dict[str, str]:
        """Stage kind -> the name it was registered under."""
        return {"admission": self.admission.name, "ordering": self.ordering.name,
                "allocation": self.allocation.name, "placement": self.placement.name,
                "coordination": self.coordination.name}

    def describe(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.stages().items())
        return f"{self.name} ({inner})"
