"""Gavel's space-sharing policy for makespan (Gavel OSDI'20, section 4.1 "space sharing" with the makespan
objective), as Gimbal's evaluation runs it: the ``gavel-packing`` preset.

Gavel chooses time fractions ``x_c`` for *combinations* ``c``: each job alone, and pairs of jobs sharing the
same GPUs. With ``s_j(c)`` job ``j``'s speed in ``c`` relative to running alone and ``R_j`` its remaining run
time alone, the effective progress rate of ``j`` is ``sum_{c ni j} x_c s_j(c) / R_j``; minimising the makespan
is maximising the smallest of these rates (every job then finishes by ``1 / t``). The LP::

    max t   s.t.   sum_{c ni j} x_c s_j(c) / R_j >= t     for every job j
                   sum_{c ni j} x_c <= 1                  for every job j
                   sum_c x_c g_c <= G                      (GPUs: g_c the combination's GPUs)
                   x_c >= 0

Gavel packs only jobs of the same GPU count (its scale factor) whose workers fit one GPU's memory together,
and reads pair speeds from measured co-location throughputs: here the profiled pair table
(:mod:`dlsched.catalog.colocation`), the input Gavel's simulator is given. Each round, combinations are
served by priority ``x_c / (rounds received + 1)`` (Gavel's round-based mechanism: the combination furthest
behind its share goes first) while GPUs last, a job in at most one combination. ``relaxed`` allows pairs of
unequal GPU counts (the smaller job on part of the larger one's GPUs), the mode Gimbal's evaluation uses.

In an unequal pair only some of the larger job's workers share a GPU. ``unequal_speed`` says what the LP
takes for that job's speed: ``straggling`` (the default, what plain Gavel sees) the pair speed, since a
data-parallel job moves at its slowest worker's pace; ``balanced`` the mean of its workers' speeds, what the
job runs at once its batch is redistributed by input-sample stealing (Gimbal's LISS). Gimbal's evaluation
measures the enhanced Gavel on what its jobs really run at, so under ``--coordinator gimbal`` (with sample
stealing on) the preset uses ``balanced`` unless the run sets it (:func:`dlsched.policies.registry`).

The LP's optimum is seldom unique: only the slowest job's progress is fixed, and any time fractions that
keep every job at least that fast are as good. Gavel's code takes any feasible point; a solver's vertex may
then pack two jobs, or give a job part of the time, while GPUs stay idle (at the tail of a trace, or whenever
the longest job bounds the makespan alone). ``tiebreak=throughput`` (the default) solves a second LP that
keeps the optimum and maximises the GPU work done per second, a combination's speeds weighted by its jobs'
GPU counts; ``tiebreak=none`` keeps the first solver's vertex.

The allocation hands placement :class:`PairedDemand` s; :class:`GavelPackingPlacement` puts a pair's two
jobs on the same GPUs (the smaller one on the fewest nodes of the larger one's), keeping a job's GPUs when
it runs on in the same combination.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from dlsched.catalog.colocation import ColocationTable
from dlsched.core import ClusterView, Decision, JobView, Placement
from dlsched.core.packing import PackingState
from dlsched.policies.packing import subset_on_fewest_nodes
from dlsched.policies.placement import packed_on_fewest_nodes, start_placement
from dlsched.policies.stages import AllocationStage, AllocationTraits, Demand, PlacementStage, Plan
from dlsched.solvers.highs import INF, SparseProblem, solve_sparse

#: What the LP takes for the larger job's speed in an unequal pair (``GavelPackingAllocation.unequal_speed``).
UNEQUAL_SPEEDS: tuple[str, ...] = ("straggling", "balanced")
#: Choice among makespan-optimal LP solutions (``GavelPackingAllocation.tiebreak``).
TIEBREAKS: tuple[str, ...] = ("none", "throughput")


@dataclass(frozen=True, slots=True)
class PairedDemand(Demand):
    """A demand whose job shares its GPUs with ``partner`` this round (None: alone)."""

    partner: str | None = None


def _remaining_s(j: JobView) -> float:
    rem = j.remaining_estimate_s()
    return max(1.0, rem if rem is not None else 3600.0)


@dataclass
class GavelPackingAllocation(AllocationStage):
    """Gavel's makespan LP over single jobs and packed pairs, served round by round (module docstring)."""

    #: Pairs of unequal GPU counts allowed (Gimbal's evaluation mode).
    relaxed: bool = False
    #: The larger job's speed in an unequal pair: ``straggling`` (its shared workers' pace) or ``balanced``
    #: (the mean of its workers' speeds, its batch redistributed by sample stealing); module docstring.
    unequal_speed: str = "straggling"
    #: Which of the LP's makespan-optimal time fractions to take: ``throughput`` the one doing the most GPU work
    #: per second, ``none`` the solver's vertex (Gavel's code asks for any feasible point); module docstring.
    tiebreak: str = "throughput"
    name: str = "gavel-packing"
    traits: ClassVar[AllocationTraits] = AllocationTraits(rigid=True, uses_order=False)
    #: Rounds each combination received (``frozenset`` of job ids), for the priorities.
    _received: dict[frozenset[str], int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.unequal_speed not in UNEQUAL_SPEEDS:
            raise ValueError(f"unequal_speed must be one of {', '.join(UNEQUAL_SPEEDS)}, got {self.unequal_speed!r}")
        if self.tiebreak not in TIEBREAKS:
            raise ValueError(f"tiebreak must be one of {', '.join(TIEBREAKS)}, got {self.tiebreak!r}")
        self._table = ColocationTable.load()

    def combinations(self, view: ClusterView, jobs: list[JobView]) -> list[tuple[str, ...]]:
        """Every job alone, and every pair Gavel may pack: equal GPU counts (any when ``relaxed``), fitting
        the smallest GPU memory of the cluster together."""
        memory = min(t.memory_gb for t in view.cluster.gpu_types.values())
        combos: list[tuple[str, ...]] = [(j.job_id,) for j in jobs]
        for a in range(len(jobs)):
            for b in range(a + 1, len(jobs)):
                ja, jb = jobs[a], jobs[b]
                if not self.relaxed and ja.spec.num_gpus != jb.spec.num_gpus:
                    continue
                if self._table.memory_gb(ja.spec.model) + self._table.memory_gb(jb.spec.model) > memory:
                    continue
                combos.append((ja.job_id, jb.job_id))
        return combos

    def shares(self, view: ClusterView, jobs: list[JobView]) -> dict[tuple[str, ...], float]:
        """The LP's time fractions ``x_c`` (module docstring)."""
        by = {j.job_id: j for j in jobs}
        combos = self.combinations(view, jobs)
        index = {j.job_id: i for i, j in enumerate(jobs)}
        n_jobs, n_c = len(jobs), len(combos)
        rows, cols, vals = [], [], []
        for k, combo in enumerate(combos):
            speeds = (1.0,) if len(combo) == 1 else self._pair(by[combo[0]], by[combo[1]])
            for j, s in zip(combo, speeds, strict=True):
                i = index[j]
                rows += [i, n_jobs + i]
                cols += [k, k]
                vals += [s / _remaining_s(by[j]), 1.0]
            rows.append(2 * n_jobs)
            cols.append(k)
            vals.append(float(max(by[j].spec.num_gpus for j in combo)))
        # column t (last): -t in every progress row
        for i in range(n_jobs):
            rows.append(i)
            cols.append(n_c)
            vals.append(-1.0)
        A = sp.csc_matrix((vals, (rows, cols)), shape=(2 * n_jobs + 1, n_c + 1))
        row_lo = np.concatenate([np.zeros(n_jobs), np.full(n_jobs, -INF), [-INF]])
        row_hi = np.concatenate([np.full(n_jobs, INF), np.ones(n_jobs), [float(view.cluster.num_gpus)]])
        cost = np.zeros(n_c + 1)
        cost[-1] = 1.0
        problem = SparseProblem(c=cost, A=A, row_lo=row_lo, row_hi=row_hi, col_lo=np.zeros(n_c + 1),
                                col_hi=np.full(n_c + 1, INF), maximize=True)
        sol = solve_sparse(problem, integer=False, lp_method="simplex")
        if self.tiebreak == "throughput" and sol.optimal:
            # second stage: keep the makespan optimum, maximise the GPU work done per second (a combination's
            # speeds weighted by its jobs' GPU counts), so that a job runs alone rather than packed on GPUs
            # that would stay idle
            work = np.zeros(n_c + 1)
            for k, combo in enumerate(combos):
                speeds = (1.0,) if len(combo) == 1 else self._pair(by[combo[0]], by[combo[1]])
                work[k] = sum(s * by[j].spec.num_gpus for j, s in zip(combo, speeds, strict=True))
            col_lo = np.zeros(n_c + 1)
            col_lo[-1] = float(sol.x[-1]) * (1.0 - 1e-9)
            second = solve_sparse(replace(problem, c=work, col_lo=col_lo), integer=False, lp_method="simplex")
            if second.optimal:
                sol = second
        return {combo: float(sol.x[k]) for k, combo in enumerate(combos) if sol.x[k] > 1e-9}

    def _pair(self, a: JobView, b: JobView) -> tuple[float, float]:
        """Both jobs' speeds in the pair (the smaller job's workers all on the larger one's GPUs)."""
        got = self._table.pair(a.spec.model, b.spec.model)
        speeds = [got.speed_a, got.speed_b]
        if self.unequal_speed == "balanced":
            sizes = (a.spec.num_gpus, b.spec.num_gpus)
            for i in (0, 1):
                n, shared = sizes[i], min(sizes)
                speeds[i] = (shared * speeds[i] + (n - shared)) / n
        return speeds[0], speeds[1]

    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        jobs = [j for j in ordered if j.spec.num_gpus <= view.cluster.num_gpus]
        if not jobs:
            return Plan()
        x = self.shares(view, jobs)
        by = {j.job_id: j for j in jobs}
        prio = sorted(x, key=lambda c: (-x[c] / (self._received.get(frozenset(c), 0) + 1), c))
        used = 0
        taken: set[str] = set()
        demands: list[Demand] = []
        for combo in prio:
            if taken & set(combo):
                continue
            k = max(by[j].spec.num_gpus for j in combo)
            if used + k > view.cluster.num_gpus:
                continue
            used += k
            taken |= set(combo)
            self._received[frozenset(combo)] = self._received.get(frozenset(combo), 0) + 1
            big = max(combo, key=lambda j: (by[j].spec.num_gpus, j))
            for j in sorted(combo, key=lambda j: j != big):  # the larger job first: its partner packs onto it
                partner = next((o for o in combo if o != j), None)
                demands.append(PairedDemand(job=by[j], num_gpus=by[j].spec.num_gpus, batch_size=by[j].spec.batch_size,
                                            partner=partner))
        return Plan(demands, info={"gavel_packing_combinations": float(len(x))})


@dataclass
class GavelPackingPlacement(PlacementStage):
    """Places Gavel's combinations: a pair on the same GPUs, keeping GPUs a combination already runs on."""

    name: str = "gavel-packing"
    packs: ClassVar[bool] = True

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        cluster = view.cluster
        pool, decision, demands = start_placement(view, plan)
        state = PackingState(cluster)
        placed: dict[str, Placement] = {}
        for d in demands:
            partner = getattr(d, "partner", None)
            job = d.job.job_id
            if partner is not None and partner in placed:
                host = placed[partner]
                gpus = host if len(host) == d.num_gpus else subset_on_fewest_nodes(cluster, host, d.num_gpus)
                if gpus is not None and state.problem_if_added(job, gpus) is None:
                    placed[job] = gpus
                    state.add(job, gpus)
                continue
            cur = d.job.placement
            if cur and len(cur) == d.num_gpus and pool.is_free(cur.gpus):
                gpus_list: list[int] | None = list(cur.gpus)
            else:
                gpus_list = packed_on_fewest_nodes(pool, d)
            if gpus_list is None:
                continue
            pool.take(gpus_list)
            placed[job] = Placement.of(gpus_list)
            state.add(job, placed[job])
        for d in plan.demands:
            if d.job.job_id in placed and d.job.job_id not in decision.allocations:
                decision.place(d.job.job_id, placed[d.job.job_id], d.batch_size)
        return decision
