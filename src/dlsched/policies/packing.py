"""Packing stages: put a second job's workers on GPUs another job already uses (Lucid, Gimbal's baselines).

Three stages make a packing scheduler:

* :class:`PackingGang` (allocation): rigid gangs in priority order while their GPUs fit twice the cluster
  (at most two workers per GPU), so placement sees the jobs it could pack;
* :class:`PackingPlacement` (placement): each job on free GPUs on its fewest nodes when it can; otherwise
  on GPUs of a running job it may share with: same GPU type, the pair fitting the GPU's memory by the jobs'
  profiled footprints, Lucid's sharing test, and the packing rules of :mod:`dlsched.core.packing` kept.
  Lucid's test (``sharing_test=score``, its published scheduler) adds the two jobs' sharing scores (0, 1 or
  2 per job and batch size, :meth:`~dlsched.catalog.colocation.ColocationTable.share_score`) and packs when
  the sum is at most ``score_limit`` (2, as Lucid's code does); ``sharing_test=util`` is a simplified test
  that adds the jobs' profiled GPU utilisations instead (at most ``util_limit_pct``). Conservative packing
  (Lucid, Gandiva, Gavel as published) packs only equal-size jobs fully overlapped; ``relaxed`` is the mode
  Gimbal's evaluation runs the baselines in (unequal packing allowed, the looser ``relaxed_score_limit`` or
  ``relaxed_util_limit_pct``: Lucid's threshold lowered);
* :class:`PackingRules` (coordination): lets jobs share GPUs (the scheduler's ``allows_packing`` trait) and
  enforces Gimbal's rules on whatever placement produced: a job whose packing would break them, or would not
  fit the GPU's memory, waits this round, so rule-breaking packed jobs run one after another instead.

Profiled footprints and utilisations come from :mod:`dlsched.catalog.colocation` (what Lucid profiles before
a job is packed); the speeds of packed pairs, which only running them shows, are never read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from dlsched.catalog.colocation import ColocationTable
from dlsched.core import Cluster, ClusterView, Decision, JobStatus, JobView, Placement
from dlsched.core.packing import MAX_WORKERS_PER_GPU, PackingState, holders, min_nodes
from dlsched.core.ranges import ranged
from dlsched.policies.placement import (
    keeps_current,
    packed_on_fewest_nodes,
    start_placement,
)
from dlsched.policies.stages import AllocationStage, AllocationTraits, Demand, PlacementStage, Plan

#: The sharing tests :class:`PackingPlacement` offers (``sharing_test``).
SHARING_TESTS: tuple[str, ...] = ("score", "util")


@dataclass
class PackingGang(AllocationStage):
    """Rigid gangs in priority order while their GPUs fit ``MAX_WORKERS_PER_GPU`` times the cluster.

    Not ``preemptive`` (Lucid, Gandiva's packing without migration): running jobs come first, in their
    priority order, so a newly arrived shorter job never evicts one that runs.
    """

    preemptive: bool = False
    name: str = "packing-gang"
    traits: ClassVar[AllocationTraits] = AllocationTraits(rigid=True)

    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        capacity = MAX_WORKERS_PER_GPU * view.cluster.num_gpus
        if not self.preemptive:
            ordered = [j for j in ordered if j.placement] + [j for j in ordered if not j.placement]
        demands, used = [], 0
        for j in ordered:
            if used + j.spec.num_gpus > capacity:
                break
            used += j.spec.num_gpus
            demands.append(Demand(job=j, num_gpus=j.spec.num_gpus, batch_size=j.spec.batch_size))
        return Plan(demands)


def fits_memory(table: ColocationTable, cluster: Cluster, models: list[str], gpu: int) -> bool:
    """Whether workers of ``models`` fit ``gpu``'s memory together, by their profiled footprints."""
    memory = cluster.gpu_types[cluster.gpu_type_of[gpu]].memory_gb
    return sum(table.memory_gb(m) for m in models) <= memory


@dataclass
class PackingPlacement(PlacementStage):
    """Exclusive consolidated placement first, then packing onto a running job (module docstring)."""

    #: Which sharing test decides whether two jobs may pack: ``score`` (Lucid's sharing scores) or ``util``
    #: (the simplified sum of profiled GPU utilisations).
    sharing_test: str = "score"
    #: Largest sum of two jobs' sharing scores that may pack (Lucid's code: 2).
    score_limit: int = ranged(2, 0, 4)
    #: Largest combined profiled GPU utilisation (%) of two jobs that may pack (``sharing_test=util``).
    util_limit_pct: float = ranged(100.0, 0.0, 200.0)
    #: Gimbal's evaluation mode: unequal packing allowed and the ``relaxed_*`` limits instead.
    relaxed: bool = False
    relaxed_score_limit: int = ranged(3, 0, 4)
    relaxed_util_limit_pct: float = ranged(160.0, 0.0, 200.0)
    #: Running jobs keep their GPUs (no migration).
    sticky: bool = True
    name: str = "packing"
    #: Shares GPUs between jobs: the registry pairs it only with a coordination that allows packing.
    packs: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.sharing_test not in SHARING_TESTS:
            raise ValueError(f"sharing_test must be one of {', '.join(SHARING_TESTS)}, got {self.sharing_test!r}")
        self._table = ColocationTable.load()
        self._batch: dict[str, int | None] = {}

    @property
    def equal_only(self) -> bool:
        return not self.relaxed

    @property
    def limit_pct(self) -> float:
        return self.relaxed_util_limit_pct if self.relaxed else self.util_limit_pct

    @property
    def limit_score(self) -> int:
        return self.relaxed_score_limit if self.relaxed else self.score_limit

    def pair_cost(self, a: tuple[str, int | None], b: tuple[str, int | None]) -> float:
        """The sharing test's measure of two (model, batch size) jobs packed together (lower packs better)."""
        if self.sharing_test == "score":
            return float(self._table.share_score(*a) + self._table.share_score(*b))
        return self._table.gpu_util_pct(a[0]) + self._table.gpu_util_pct(b[0])

    def passes(self, a: tuple[str, int | None], b: tuple[str, int | None]) -> bool:
        """Whether the sharing test lets the two jobs pack."""
        limit = self.limit_score if self.sharing_test == "score" else self.limit_pct
        return self.pair_cost(a, b) <= limit

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        cluster = view.cluster
        pool, decision, demands = start_placement(view, plan)
        state = PackingState(cluster, equal_only=self.equal_only)
        for j, a in decision.allocations.items():
            if a.placement:
                state.add(j, a.placement)
        models = {d.job.job_id: d.job.spec.model for d in plan.demands}
        self._batch = {d.job.job_id: d.job.spec.batch_size for d in plan.demands}
        pending: list[Demand] = []
        for d in demands:
            cur = d.job.placement
            if self.sticky and keeps_current(view, pool, d):
                pool.take(cur.gpus)
                state.add(d.job.job_id, cur)
            elif self.sticky and cur and len(cur) == d.num_gpus and self._may_share(cluster, state, models, d, cur):
                pool.take([g for g in cur.gpus if pool.free_mask[g]])
                state.add(d.job.job_id, cur)  # kept packed with the partner it already had
            else:
                pending.append(d)
        for d in pending:
            got = packed_on_fewest_nodes(pool, d)
            if got is not None:
                pool.take(got)
                state.add(d.job.job_id, Placement.of(got))
                continue
            shared = self._packed(cluster, state, models, d)
            if shared is not None:
                state.add(d.job.job_id, shared)
        for d in plan.demands:
            p = state.placements.get(d.job.job_id)
            if p is not None and d.job.job_id not in decision.allocations:
                decision.place(d.job.job_id, p, d.batch_size)
        return decision

    def _may_share(self, cluster: Cluster, state: PackingState, models: dict[str, str], d: Demand,
                   gpus: Placement) -> bool:
        """Whether ``d`` may run on ``gpus`` next to what is placed: type, memory, utilisation and rules."""
        spec = d.job.spec
        if not spec.allows_gpu_type(cluster.gpu_type_of[gpus.gpus[0]]):
            return False
        for g in gpus.gpus:
            others = state.held.get(g, [])
            if len(others) >= MAX_WORKERS_PER_GPU:
                return False
            for o in others:
                if not fits_memory(self._table, cluster, [spec.model, models.get(o, "")], g):
                    return False
                if not self.passes((spec.model, spec.batch_size), (models.get(o, ""), self._batch.get(o))):
                    return False
        return state.problem_if_added(d.job.job_id, gpus) is None

    def _packed(self, cluster: Cluster, state: PackingState, models: dict[str, str],
                d: Demand) -> Placement | None:
        """GPUs of a placed job at least as large to pack ``d`` onto, the pair the sharing test likes best first."""
        k = d.num_gpus
        candidates: list[tuple[float, str, Placement]] = []
        held = state.held
        for host, hp in state.placements.items():
            if len(hp) < k or (self.equal_only and len(hp) != k):
                continue
            if len(hp) == k:
                gpus = hp
            else:
                chosen = subset_on_fewest_nodes(cluster, hp, k, held)
                if chosen is None:
                    continue
                gpus = chosen
            cost = self.pair_cost((d.job.spec.model, d.job.spec.batch_size), (models.get(host, ""), self._batch.get(host)))
            candidates.append((cost, host, gpus))
        for _, _, gpus in sorted(candidates, key=lambda c: (c[0], c[1])):
            if self._may_share(cluster, state, models, d, gpus):
                return gpus
        return None


def subset_on_fewest_nodes(cluster: Cluster, host: Placement, k: int,
                           held: dict[int, list[str]] | None = None) -> Placement | None:
    """``k`` of the host's GPUs that nobody else (in ``held``: GPU -> jobs on it) shares yet, on the fewest
    nodes (most such GPUs first); None unless that is the fewest nodes ``k`` GPUs of the type can take."""
    held = held or {}
    by_node: dict[int, list[int]] = {}
    for g in host.gpus:
        if len(held.get(g, [])) < MAX_WORKERS_PER_GPU:
            by_node.setdefault(int(cluster.gpu_node[g]), []).append(g)
    chosen: list[int] = []
    for _, gpus in sorted(by_node.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        chosen += gpus[: k - len(chosen)]
        if len(chosen) == k:
            break
    if len(chosen) < k:
        return None
    p = Placement.of(chosen)
    gtype = cluster.gpu_type_of[chosen[0]]
    return p if p.num_nodes(cluster) <= min_nodes(cluster, gtype, k) else None


@dataclass
class PackingRules:
    """Jobs may share GPUs; a packing that breaks Gimbal's rules (or GPU memory) waits instead (module
    docstring). Running jobs keep precedence over newly placed ones."""

    name: str = "packing"
    allows_packing: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self._table = ColocationTable.load()

    def coordinate(self, view: ClusterView, decision: Decision) -> Decision:
        running = {j.job_id: j for j in view.jobs}
        order = sorted(decision.allocations, key=lambda j: (not _keeps(running.get(j), decision), j))
        state = PackingState(view.cluster)
        out = Decision(profiles=decision.profiles, info=decision.info)
        for job_id in order:
            alloc = decision.allocations[job_id]
            p = alloc.placement
            if p and not self._allowed(view.cluster, state, running, job_id, p):
                continue  # runs after the jobs it would have shared with
            if p:
                state.add(job_id, p)
            out.allocations[job_id] = alloc
        out.info["packed_jobs"] = float(sum(1 for js in holders(state.placements).values() if len(js) > 1))
        return out

    def _allowed(self, cluster: Cluster, state: PackingState, jobs: dict[str, JobView], job_id: str,
                 p: Placement) -> bool:
        model = jobs[job_id].spec.model if job_id in jobs else ""
        for g in p.gpus:
            others = state.held.get(g, [])
            if others and not fits_memory(self._table, cluster, [model, *(jobs[o].spec.model for o in others)], g):
                return False
        return state.problem_if_added(job_id, p) is None


def _keeps(job: JobView | None, decision: Decision) -> bool:
    """Whether a job keeps the GPUs it runs on (it then goes first when rules are enforced)."""
    return job is not None and bool(job.placement) and decision.allocations[job.job_id].placement == job.placement


@dataclass
class EarliestDeadline:
    """Earliest deadline first; jobs without a deadline after those with one, first come first served."""

    name: str = "edf"

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        def key(j: JobView) -> tuple[bool, float, float, str]:
            d = j.spec.deadline_s
            return (d is None, d if d is not None else 0.0, j.spec.submit_time_s, j.job_id)

        return sorted(jobs, key=key)


@dataclass
class GandivaPlacement(PackingPlacement):
    """Gandiva's introspective packing: pack as :class:`PackingPlacement` does, then watch the packed jobs.

    Each round the stage reads the progress every running job reports and turns it into a speed relative to
    running alone (progress done over the time passed, times the job's expected run time). A packed pair
    whose two speeds add up to less than ``min_pair_speed`` does worse than taking turns: Gandiva unpacks it
    (the pair never packs again; the job that cannot keep its GPUs moves or waits). Only a stretch the job
    ran through on the same GPUs counts: one that began while it was still restoring its checkpoint
    (placed, moved or restarted since) measures the restore, not how the pair trains together, as Gandiva's
    introspection times mini-batches of jobs that run.
    """

    #: Packed pairs whose summed relative speeds fall below this are unpacked (1: no better than turns).
    min_pair_speed: float = ranged(1.0, 0.0, 2.0)
    name: str = "gandiva"
    #: job id -> (time, progress, placement, restarts, running) at the job's last observation.
    _last: dict[str, tuple[float, float, Placement, int, bool]] = field(default_factory=dict, init=False,
                                                                        repr=False)
    _bad: set[frozenset[str]] = field(default_factory=set, init=False, repr=False)

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        self._introspect(view)
        return super().place(view, plan)

    def _introspect(self, view: ClusterView) -> None:
        speeds: dict[str, float] = {}
        for j in view.jobs:
            last = self._last.get(j.job_id)
            if (j.placement and last is not None and last[4] and last[2] == j.placement and last[3] == j.restarts
                    and view.time_s > last[0] and j.estimated_duration_s):
                speeds[j.job_id] = (j.progress_fraction - last[1]) * j.estimated_duration_s / (view.time_s - last[0])
            self._last[j.job_id] = (view.time_s, j.progress_fraction, j.placement, j.restarts,
                                    j.status is JobStatus.RUNNING)
        running = {j.job_id: j.placement for j in view.jobs if j.placement}
        for jobs in holders(running).values():
            if len(jobs) == 2 and all(x in speeds for x in jobs) and sum(speeds[x] for x in jobs) < self.min_pair_speed:
                self._bad.add(frozenset(jobs))
        active = {j.job_id for j in view.jobs}
        self._last = {k: v for k, v in self._last.items() if k in active}

    def _may_share(self, cluster: Cluster, state: PackingState, models: dict[str, str], d: Demand,
                   gpus: Placement) -> bool:
        for g in gpus.gpus:
            if any(frozenset((d.job.job_id, o)) in self._bad for o in state.held.get(g, ())):
                return False
        return super()._may_share(cluster, state, models, d, gpus)
