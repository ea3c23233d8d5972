"""Gimbal (sections 4 and 5): coordinating the workers of packed jobs, as the coordination stage of any scheduler.

The base scheduler decides which jobs share GPUs; Gimbal keeps its packing rules (a packing that breaks them
runs its jobs one after another, :class:`~dlsched.policies.packing.PackingRules`) and then, per packing set
(a star around its largest job ``J_max``), searches share restrictions and batch splits that serve the
scheduler's objective, with two primitives (section 4.2):

* :func:`squeeze` lowers the share limit (MPS active threads) of some workers by one granularity step and
  then rebalances each touched job's batch by input-sample stealing, so the restriction leaves no straggler;
* :func:`swell` raises it, likewise.
* When one job's workers diverge, sample stealing alone moves samples from slow to fast workers.

Every move keeps each job's global batch: a split is a set of fractions summing to 1.

The search is Algorithm 1: split the set into ``{J_max}`` and the rest, make the higher-priority part
``subset2`` and swell it, then repeatedly generate primitives for ``subset1`` (squeeze it when ``J_max``
has no stragglers; else, if ``J_max`` is in ``subset1``, swell its slow workers and squeeze its fast ones;
else squeeze the workers sharing GPUs with ``J_max``'s slow ones), collect runtime information and keep
the best plan, stopping after ``early_exit`` consecutive attempts without gain, or when no move is left (no
primitive changes a limit, or the moves lead back to a plan already tried).
Objectives and priorities are equations 1 to 6 (``objective``: ``jct``, ``deadline``, ``makespan``; the
``deadline_goal`` and ``makespan_goal`` options offer objectives of their own in place of equations 3 and 5,
each under its name, the equations being the defaults); where
an equation's sign disagrees with the text that explains it (equations 4 and 6), the text is followed:
jobs nearer their deadline, and longer jobs under makespan, have the higher priority.

Runtime information is what trying a plan shows: the speed of every worker of the set under it, as the
:class:`RuntimeMonitor` reads it (in the simulator, :class:`dlsched.sim.monitor.WorldMonitor`: a reading with
measurement error, one per monitor period). Each distinct plan is read once per search (one reading per
trial: the search compares plans by those readings, noise included), and trying plans costs what it costs a
real cluster, charged through the allocation's ``pause_s``: every attempt that changes a job's share limits
pauses that job for ``switch_s`` (CUDA context switch, section 7.4); and each trial runs its jobs under the
trial plan for ``min(collect_s, period)`` (a reading every 30 s, section 6; at most 60 s or 5 steps,
section 5.2) before the search moves on, so a job that a trial slowed is behind the plan the search kept
(the monitor's :meth:`~RuntimeMonitor.trial_delays` says by how much). Trial time is counted in the
recorded search time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal, Protocol

from dlsched.catalog.colocation import ColocationTable
from dlsched.core import ClusterView, Decision, JobView, Placement
from dlsched.core.packing import PackingSet, holders, packing_sets
from dlsched.core.ranges import ranged
from dlsched.policies.packing import PackingRules

Objective = Literal["jct", "deadline", "makespan"]
OBJECTIVES: tuple[str, ...] = ("jct", "deadline", "makespan")
DEADLINE_GOALS: tuple[str, ...] = ("lateness", "met")
MAKESPAN_GOALS: tuple[str, ...] = ("longest", "work")


Members = Mapping[str, tuple[str, Placement, tuple[int, ...]]]
#: A plan as it ran for one reading: its members and per job its batch split.
Trial = tuple[Members, Mapping[str, tuple[float, ...]]]


class RuntimeMonitor(Protocol):
    """Measures the workers of a packing set under a trial plan (what Gimbal's runtime monitor reports).

    ``members`` maps job id -> (model, placement, share limit % per worker in placement order); the answer
    maps job id -> each worker's speed relative to running alone and unrestricted, as read over one period.
    """

    #: Seconds between readings.
    period_s: float

    def worker_speeds(self, members: Members) -> dict[str, list[float]]:
        ...

    def trial_delays(self, trials: Sequence[Trial], kept: Trial, duration_s: float) -> dict[str, float]:
        """Seconds each job is behind ``kept`` after running ``duration_s`` under each of ``trials``."""
        ...


@dataclass
class CalibrationPlan:
    """Share limits (%) per worker and batch split per job of one packing set."""

    pct: dict[str, list[int]]
    split: dict[str, tuple[float, ...]]

    def copy(self) -> CalibrationPlan:
        return CalibrationPlan({j: list(v) for j, v in self.pct.items()}, dict(self.split))


def job_speed(speeds: list[float], split: tuple[float, ...]) -> float:
    """A data-parallel job's speed: 1 / (n max f_i / v_i) (equal split when ``split`` is empty)."""
    n = len(speeds)
    fractions = split or tuple(1.0 / n for _ in speeds)
    worst = max((f / v if v > 0 else math.inf) for f, v in zip(fractions, speeds, strict=True) if f > 0)
    return 0.0 if not math.isfinite(worst) or worst <= 0 else 1.0 / (n * worst)


def balanced(speeds: list[float]) -> tuple[float, ...]:
    """Input-sample stealing: each worker's share of the global batch in proportion to its speed."""
    total = sum(speeds)
    if total <= 0:
        return tuple(1.0 / len(speeds) for _ in speeds)
    return tuple(v / total for v in speeds)


def squeeze(plan: CalibrationPlan, workers: list[tuple[str, int]], step: int, floor: int) -> bool:
    """Lower the share limit of ``(job, worker index)`` by ``step`` (not below ``floor``); True if any moved."""
    moved = False
    for j, i in workers:
        new = max(floor, plan.pct[j][i] - step)
        moved |= new != plan.pct[j][i]
        plan.pct[j][i] = new
    return moved


def swell(plan: CalibrationPlan, workers: list[tuple[str, int]], step: int) -> bool:
    """Raise the share limit of ``(job, worker index)`` by ``step`` (at most 100); True if any moved."""
    moved = False
    for j, i in workers:
        new = min(100, plan.pct[j][i] + step)
        moved |= new != plan.pct[j][i]
        plan.pct[j][i] = new
    return moved


@dataclass
class GimbalCoordination:
    """Gimbal's aggressive packing coordinator (module docstring)."""

    #: The scheduler's objective: ``jct`` (equations 1-2), ``deadline`` (3-4) or ``makespan`` (5-6).
    objective: str = "jct"
    #: What the ``deadline`` objective minimises in a set: ``lateness``, the longest time past a deadline
    #: (equation 3, the paper's), or ``met``, the number of jobs projected to miss their deadline, then their
    #: summed lateness (the deadline-satisfied ratio the evaluation counts; equation 3 will slow a job that
    #: can still make its deadline to shorten the lateness of one that cannot).
    deadline_goal: str = "lateness"
    #: What the ``makespan`` objective minimises in a set: ``longest``, the longest remaining time of its jobs
    #: (equation 5, the paper's), or ``work``, the time the set needs to clear its remaining GPU work at its
    #: GPU-weighted speed (its jobs' remaining run times times their GPU counts over their speeds times their
    #: GPU counts). Under a scheduler that already evens out finish times across the cluster each round (Gavel's
    #: makespan LP), speed a set moves from one job to another is moved back next round; what it can add to
    #: the cluster's makespan is work done per second.
    makespan_goal: str = "longest"
    #: Share restriction step, % of the GPU's threads (section 4.1: 10).
    granularity_pct: int = ranged(10, 1, 50)
    #: Consecutive attempts without gain before the search stops (0: search until no move is left).
    early_exit: int = ranged(3, 0, 100)
    #: Low-level GPU resource restriction (share limits) and lossless input-sample stealing, for ablations.
    share_restriction: bool = True
    sample_stealing: bool = True
    #: Pause per attempt that changes share limits (CUDA context switch, section 7.4) and longest
    #: collection of runtime information per attempt (section 5.2), seconds.
    switch_s: float = ranged(3.6, 0.0, 600.0)
    collect_s: float = ranged(60.0, 0.0, 600.0)
    #: Most attempts per search (a bound for the full search; Algorithm 1 needs at most 100/step per job).
    max_attempts: int = ranged(200, 1, 10000)
    #: A packing set that forms again with the same jobs sharing GPUs the same way (a scheduler that
    #: re-pairs jobs every round, as Gavel does, brings back combinations it ran before) reuses the plan its
    #: last search found instead of searching again; false searches every time a set forms (the paper does
    #: not say which; a plan is kept while its set lasts either way).
    reuse_plans: bool = True
    name: str = "gimbal"
    allows_packing: ClassVar[bool] = True
    #: Asks the run for a runtime monitor (:meth:`attach_monitor`).
    needs_monitor: ClassVar[bool] = True
    #: Packing placements run relaxed (unequal packing) under Gimbal, as in its evaluation.
    relaxes_packing: ClassVar[bool] = True
    _monitor: RuntimeMonitor | None = field(default=None, init=False, repr=False)
    _rules: PackingRules = field(default_factory=PackingRules, init=False, repr=False)
    _plans: dict[tuple, CalibrationPlan] = field(default_factory=dict, init=False, repr=False)
    #: Plans by the sharing structure of their set (:meth:`_structure`), for ``reuse_plans``.
    _known: dict[tuple, CalibrationPlan] = field(default_factory=dict, init=False, repr=False)
    _models: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    #: Job id -> the packing set it was in last round, for explanations (:meth:`facts_for`).
    _sets: dict[str, PackingSet] = field(default_factory=dict, init=False, repr=False)
    #: The current search's readings by plan state (one reading per trial) and its trials in order.
    _readings: dict[tuple, dict[str, list[float]]] = field(default_factory=dict, init=False, repr=False)
    _trials: list[Trial] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.deadline_goal not in DEADLINE_GOALS:
            raise ValueError(f"deadline_goal must be one of {', '.join(DEADLINE_GOALS)}, got {self.deadline_goal!r}")
        if self.makespan_goal not in MAKESPAN_GOALS:
            raise ValueError(f"makespan_goal must be one of {', '.join(MAKESPAN_GOALS)}, got {self.makespan_goal!r}")
        self._table = ColocationTable.load()

    def attach_monitor(self, monitor: RuntimeMonitor) -> None:
        self._monitor = monitor

    # -- the stage -------------------------------------------------------------------------------------
    def coordinate(self, view: ClusterView, decision: Decision) -> Decision:
        decision = self._rules.coordinate(view, decision)
        self._models = {j.job_id: j.spec.model for j in view.jobs}
        placements = {j: a.placement for j, a in decision.allocations.items() if a.placement}
        jobs = {j.job_id: j for j in view.jobs}
        attempts_total, searches, search_s = 0, 0, 0.0
        live: dict[tuple, CalibrationPlan] = {}
        held = holders(placements)
        self._sets = {}
        for ps in packing_sets(placements):
            self._sets.update(dict.fromkeys(ps.members, ps))
            key = tuple(sorted((j, placements[j].gpus) for j in ps.members))
            structure = self._structure(ps, placements, held)
            plan = self._plans.get(key) or (self._known.get(structure) if self.reuse_plans else None)
            switched: dict[str, int] = {}
            behind: dict[str, float] = {}
            if plan is None:
                plan, attempts, switched = self.search(view, ps, placements, jobs)
                searches += 1
                attempts_total += attempts
                behind = self._trial_cost(plan, placements)
                search_s += len(self._trials) * self._trial_s() + sum(switched.values()) * self.switch_s
            live[key] = plan
            self._known[structure] = plan
            for j in ps.members:
                a = decision.allocations[j]
                pct = tuple(plan.pct[j]) if any(p < 100 for p in plan.pct[j]) else ()
                # every trial that changed this job's limits paused it; the engine charges the final change
                pause = max(0, switched.get(j, 0) - (1 if pct else 0)) * self.switch_s + behind.get(j, 0.0)
                decision.allocations[j] = replace(a, mps_pct=pct, batch_split=plan.split.get(j, ()),
                                                  pause_s=a.pause_s + pause)
        self._plans = live
        active = set(jobs)
        self._known = {k: p for k, p in self._known.items() if all(j in active for j, _ in k)}
        decision.info["gimbal_searches"] = float(searches)
        decision.info["gimbal_attempts"] = float(attempts_total)
        decision.info["gimbal_search_s"] = search_s
        return decision

    def facts_for(self, job_id: str) -> dict[str, object] | None:
        """The job's packing set (its centre J_max and members), for explanations."""
        ps = self._sets.get(job_id)
        if ps is None:
            return None
        return {"packing_set": list(ps.members), "center": ps.center, "objective": self.objective,
                "why": f"packing set {{{', '.join(ps.members)}}} around J_max {ps.center}, "
                       f"objective {self.objective}"}

    @staticmethod
    def _structure(ps: PackingSet, placements: Mapping[str, Placement], held: Mapping[int, list[str]]) -> tuple:
        """Who shares each worker's GPU, per job of the set in worker order: a plan's limits and splits apply
        to any placement of the same jobs with this structure (the GPUs are alike)."""
        return tuple(sorted((j, tuple(tuple(sorted(o for o in held[g] if o != j)) for g in placements[j].gpus))
                            for j in ps.members))

    # -- Algorithm 1 -----------------------------------------------------------------------------------
    def search(self, view: ClusterView, ps: PackingSet, placements: Mapping[str, Placement],
               jobs: Mapping[str, JobView]) -> tuple[CalibrationPlan, int, dict[str, int]]:
        """The best plan for one packing set: (plan, attempts, per job the attempts that changed its limits)."""
        members = list(ps.members)
        self._models.update({j: jobs[j].spec.model for j in members})
        plan = CalibrationPlan({j: [100] * len(placements[j]) for j in members}, {})
        self._readings, self._trials = {}, []
        if self._monitor is None:
            return plan, 0, {}
        jmax = ps.center
        subset1, subset2 = [jmax], [j for j in members if j != jmax]
        if self._priority(view, subset2, jobs, plan, placements) < self._priority(view, subset1, jobs, plan,
                                                                                     placements):
            subset1, subset2 = subset2, subset1
        self._rebalance(plan, placements, members)
        best, best_obj = plan.copy(), self.set_objective(view, members, jobs, plan, placements)
        if not self.share_restriction:
            return best, 1, {}
        swell(plan, self._workers(subset2, placements, shared_only=True, placements_all=placements),
              self.granularity_pct)
        attempts = fails = 0
        switched: dict[str, int] = {}
        seen = {self._state(plan)}
        while attempts < self.max_attempts and (self.early_exit == 0 or fails < self.early_exit):
            before = {j: list(v) for j, v in plan.pct.items()}
            if not self._generate(plan, subset1, jmax, placements) or self._state(plan) in seen:
                break  # no primitive changes anything, or the search came back to a plan it tried
            seen.add(self._state(plan))
            attempts += 1
            for j, v in plan.pct.items():
                if v != before[j]:
                    switched[j] = switched.get(j, 0) + 1
            self._rebalance(plan, placements, members)
            obj = self.set_objective(view, members, jobs, plan, placements)
            if obj < best_obj - 1e-9:
                best, best_obj, fails = plan.copy(), obj, 0
            else:
                fails += 1
        return best, attempts, switched

    @staticmethod
    def _state(plan: CalibrationPlan) -> tuple:
        return tuple(sorted((j, tuple(v)) for j, v in plan.pct.items()))

    def _generate(self, plan: CalibrationPlan, subset1: list[str], jmax: str, placements: Mapping[str, Placement]) -> bool:
        """GeneratingPrimitives of Algorithm 1; False when no primitive changes anything any more."""
        v = self._speeds(plan, placements)[jmax]
        split = plan.split.get(jmax) or tuple(1.0 / len(v) for _ in v)
        # a worker is slow when its share of the batch takes it longer than the others take theirs
        times = [f / s if s > 0 else math.inf for f, s in zip(split, v, strict=True)]
        quickest = min(times)
        slow = [i for i, t in enumerate(times) if t > quickest * (1 + 1e-6)]
        fast = [i for i in range(len(v)) if i not in slow]
        step, floor = self.granularity_pct, self.granularity_pct
        if not slow:
            return squeeze(plan, self._workers(subset1, placements, shared_only=True, placements_all=placements),
                           step, floor)
        if jmax in subset1:
            a = swell(plan, [(jmax, i) for i in slow], step)
            b = squeeze(plan, [(jmax, i) for i in fast], step, floor)
            return a or b
        held = holders(placements)
        gpus = placements[jmax].gpus
        partners = []
        for i in slow:
            for o in held[gpus[i]]:
                if o != jmax and o in plan.pct:
                    partners.append((o, placements[o].gpus.index(gpus[i])))
        return squeeze(plan, partners, step, floor)

    # -- runtime information -----------------------------------------------------------------------
    def _members(self, plan: CalibrationPlan, placements: Mapping[str, Placement]) -> dict[str, tuple[str, Placement,
                                                                                                    tuple[int, ...]]]:
        return {j: (self._models.get(j, ""), placements[j], tuple(pct)) for j, pct in plan.pct.items()}

    def _speeds(self, plan: CalibrationPlan, placements: Mapping[str, Placement]) -> dict[str, list[float]]:
        """Every worker's speed in the plan's packing set under the plan (the whole set is measured: a
        worker's speed depends on its partner's limit). A plan not read yet in this search is a trial: it runs
        for one reading, and the search keeps that reading."""
        assert self._monitor is not None
        state = self._state(plan)
        if state not in self._readings:
            members = self._members(plan, placements)
            reading = self._monitor.worker_speeds(members)
            self._readings[state] = reading
            self._trials.append((members, self._splits(reading)))
        return self._readings[state]

    def _splits(self, speeds: Mapping[str, list[float]]) -> dict[str, tuple[float, ...]]:
        """The batch splits sample stealing sets from a reading (when enabled): balanced for every job whose
        workers diverge, equal (absent) otherwise."""
        if not self.sample_stealing:
            return {}
        return {j: balanced(v) for j, v in speeds.items() if len(v) > 1 and max(v) - min(v) > 1e-6}

    def _rebalance(self, plan: CalibrationPlan, placements: Mapping[str, Placement], members: list[str]) -> None:
        """Input-sample stealing for every job of the set whose workers diverge (when enabled)."""
        if not self.sample_stealing:
            return
        splits = self._splits(self._speeds(plan, placements))
        for j in members:
            if j in splits:
                plan.split[j] = splits[j]
            else:
                plan.split.pop(j, None)

    def _trial_s(self) -> float:
        """How long one trial runs: until the monitor's next reading, at most ``collect_s``."""
        period = self._monitor.period_s if self._monitor is not None else 0.0
        return min(self.collect_s, period)

    def _trial_cost(self, plan: CalibrationPlan, placements: Mapping[str, Placement]) -> dict[str, float]:
        """Seconds each job of the last search is behind the kept ``plan`` for having run the search's
        trials."""
        if self._monitor is None or not self._trials:
            return {}
        kept = (self._members(plan, placements), dict(plan.split))
        return self._monitor.trial_delays(self._trials, kept, self._trial_s())

    def _remaining_time(self, job: JobView, speed: float) -> float:
        rem = job.remaining_estimate_s()
        if rem is None:
            rem = 1.0
        return math.inf if speed <= 0 else rem / speed

    def set_objective(self, view: ClusterView, members: list[str], jobs: Mapping[str, JobView],
                      plan: CalibrationPlan, placements: Mapping[str, Placement]) -> float:
        """The packing set's local objective under ``plan`` (equations 1, 3, 5; lower is better)."""
        speeds = self._speeds(plan, placements)
        rates = {j: job_speed(speeds[j], plan.split.get(j, ())) for j in members}
        times = {j: self._remaining_time(jobs[j], rates[j]) for j in members}
        if self.objective == "jct":
            return sum(times.values()) / len(times)  # equation 1
        if self.objective == "makespan" and self.makespan_goal == "work":
            gpus = {j: len(placements[j]) for j in members}
            rate = sum(rates[j] * gpus[j] for j in members)
            work = sum(self._remaining_time(jobs[j], 1.0) * gpus[j] for j in members)
            return math.inf if rate <= 0 else work / rate
        if self.objective == "makespan":
            return max(times.values())  # equation 5
        late = [max(0.0, view.time_s + times[j] - d) for j in members
                if (d := jobs[j].spec.deadline_s) is not None]  # equation 3: time past the deadline
        if self.deadline_goal == "met":
            # jobs projected to miss first (a job that misses anyway is not worth another's deadline), then
            # their summed lateness
            return sum(1.0 for x in late if x > 0) * 1e7 + sum(late) + 1e-9 * sum(times.values())
        return max(late, default=0.0) + 1e-9 * sum(times.values())

    def _priority(self, view: ClusterView, subset: list[str], jobs: Mapping[str, JobView], plan: CalibrationPlan,
                  placements: Mapping[str, Placement]) -> float:
        """Mean priority of a subset (equations 2, 4, 6, signs as the text reads them)."""
        if not subset:
            return -math.inf
        speeds = self._speeds(plan, placements)
        values = []
        for j in subset:
            t = self._remaining_time(jobs[j], job_speed(speeds[j], plan.split.get(j, ())))
            if self.objective == "jct":
                values.append(-self._table.gpu_util_pct(jobs[j].spec.model))
            elif self.objective == "makespan":
                values.append(t)
            else:
                d = jobs[j].spec.deadline_s
                values.append(-(d - view.time_s - t) if d is not None else -math.inf)
        return sum(values) / len(values)

    @staticmethod
    def _workers(subset: list[str], placements: Mapping[str, Placement], *, shared_only: bool,
                 placements_all: Mapping[str, Placement]) -> list[tuple[str, int]]:
        """Workers (job, index) of ``subset``; with ``shared_only`` only those on a GPU another job uses."""
        held = holders(placements_all)
        return [(j, i) for j in subset for i, g in enumerate(placements[j].gpus)
                if not shared_only or len(held.get(g, [])) > 1]
