"""Gavel (OSDI'20): heterogeneity-aware policies as linear programs, and its round-based mechanism.

Gavel decides, for every job ``j`` and GPU type ``t``, the fraction of time ``X[j, t]`` the job should
spend on that type, from a throughput matrix ``T[j, t]`` (throughput of the job's fixed batch size and GPU
count on type ``t``). Each row of ``T`` is normalised by its sum, as Gavel does, so jobs of different
models are comparable. All policies share Gavel's base constraints::

    X >= 0,    sum_t X[j, t] <= 1 (a job runs at most all the time),
    sum_j scale_j * X[j, t] <= gpus_t (a type is not over-committed),    X[j, t] = 0 where T[j, t] = 0

with ``scale_j`` the job's GPU count. The objectives:

* ``max-sum-throughput`` (Sia's default for Gavel): maximise ``sum_jt T[j, t] X[j, t]``;
* ``max-min``: maximise ``min_j scale_j * sum_t T[j, t] X[j, t] / iso_j``, where ``iso_j`` is the job's
  throughput under the isolated max-min allocation (unit throughputs, every job an equal share);
* ``finish-time-fairness``: minimise ``max_j rho_j`` with ``rho_j = (age_j + W_j / r_j(X)) /
  (age_j + W_j / iso_j)``, ``r_j(X) = sum_t T[j, t] X[j, t]`` and ``W_j`` the remaining work; ``1/r`` makes
  this non-linear, so it is solved by bisection on ``rho`` over LP feasibility problems
  (``r_j(X) >= W_j / (rho * D_j - age_j)``), each a warm start of the last.

The LPs are built as sparse matrices and solved with HiGHS (:mod:`dlsched.solvers.highs`).

The mechanism turns fractions into leases: rounds last ``lease_s`` (360 s). Every job keeps, per type,
the time it has received; its priority on a type is ``X[j, t] / (time received on t / time given on t)``
(new jobs start with half a round on every type). Jobs are taken greedily by priority (a job at most once,
if its whole gang fits in the type's remaining GPUs) and placed: a job staying on its type keeps its GPUs
when they are still free, the others are packed on as few nodes as possible, biggest gangs first. Leases
hold for the whole round even when the engine's round is shorter: a job that finishes early leaves its GPUs
idle and a job that arrives waits for the next round, as in Gavel. A job moved or preempted pays the
checkpoint-restore the engine charges on every placement change.

Jobs are rigid: each runs on exactly its requested GPU count with its requested batch size.

Throughputs. Gavel assumes every job's throughput on every GPU type is known. Here it comes from Sia's
goodput estimator in ``bootstrap`` mode: a new job is first profiled on one GPU of each type (through
``Decision.profiles``, on GPUs no lease holds; the engine charges the time), and ``T[j, t]`` is then the
estimator's throughput for the job's fixed configuration, packed on type ``t`` (eq. 3.1 extrapolates from
the one-GPU profile until the job has run multi-GPU). Throughputs thus cost what they cost Sia, and improve
as jobs report.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from dlsched.core import Adaptivity, ClusterView, Decision, InputError, JobView, Placement
from dlsched.estimators.base import GoodputEstimator
from dlsched.policies.placement import FreePool, packed_gpus
from dlsched.solvers.highs import SparseProblem, new_highs, solve_sparse

OBJECTIVES = ("max-sum-throughput", "finish-time-fairness", "max-min")
#: ``ipm``: interior point without crossover, which like Gavel's cvxpy/ECOS returns a point inside the optimal
#: face, so equivalent jobs share time evenly (Gavel's time-sharing); ``simplex``: a vertex, where equivalent
#: jobs do not share (fewer preemptions, a kinder Gavel than the original).
LP_METHODS = ("ipm", "simplex")


@dataclass
class GavelTunables:
    """Gavel's knobs, with the defaults of the Sia comparison."""

    #: The policy: max-sum-throughput, finish-time-fairness or max-min.
    objective: str = "max-sum-throughput"
    #: Round (lease) length in seconds; leases are kept this long even if the engine's round is shorter.
    lease_s: float = 360.0
    #: Profile new jobs on one GPU of each type before scheduling them (throughputs must be known).
    profile: bool = True
    #: LP algorithm (see LP_METHODS): ``ipm`` behaves like Gavel's interior-point solver.
    lp_method: str = "ipm"

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError(f"unknown Gavel objective '{self.objective}' (one of: {', '.join(OBJECTIVES)})",
                             field="objective")
        if not self.lease_s > 0:
            raise InputError(f"lease_s must be positive, got {self.lease_s}", field="lease_s")
        if self.lp_method not in LP_METHODS:
            raise InputError(f"unknown LP method '{self.lp_method}' (one of: {', '.join(LP_METHODS)})",
                             field="lp_method")


# ---------------------------------------------------------------------------------------------------------
# The policies (LPs)
# ---------------------------------------------------------------------------------------------------------
def normalized(throughputs: np.ndarray) -> np.ndarray:
    """Each job's throughputs over their sum across types (Gavel's normalising factor); 0 rows stay 0."""
    t = np.where(np.isfinite(throughputs) & (throughputs > 0), throughputs, 0.0)
    total = t.sum(axis=1, keepdims=True)
    return np.divide(t, total, out=np.zeros_like(t), where=total > 0)


def _base_rows(num_jobs: int, num_types: int, scale: np.ndarray, extra_cols: int = 0) -> sp.csc_matrix:
    """Rows of Gavel's base constraints over x (row-major J x K, then ``extra_cols`` columns)."""
    n = num_jobs * num_types
    jobs = np.repeat(np.arange(num_jobs), num_types)
    types = np.tile(np.arange(num_types), num_jobs)
    cols = np.arange(n)
    per_job = sp.csc_matrix((np.ones(n), (jobs, cols)), shape=(num_jobs, n + extra_cols))
    per_type = sp.csc_matrix((np.repeat(scale, num_types).astype(float), (types, cols)),
                             shape=(num_types, n + extra_cols))
    return sp.vstack([per_job, per_type], format="csc")


def _solve(c: np.ndarray, A: sp.csc_matrix, row_lo: np.ndarray, row_hi: np.ndarray, col_hi: np.ndarray,
           method: str, *, maximize: bool = True) -> np.ndarray | None:
    """Solve an LP with HiGHS (see :data:`LP_METHODS`); None if it is not solved to optimality.

    ``ipm`` runs the interior-point solver with presolve and crossover off, so the answer is the interior
    point it converges to (centred in the optimal face, as Gavel's ECOS answers), not a vertex.
    """
    if method not in LP_METHODS:
        raise InputError(f"unknown LP method '{method}' (one of: {', '.join(LP_METHODS)})", field="lp_method")
    prob = SparseProblem(c=c, A=A, row_lo=row_lo, row_hi=row_hi, col_lo=np.zeros(len(c)), col_hi=col_hi,
                         maximize=maximize)
    if method == "simplex":
        sol = solve_sparse(prob, integer=False, lp_method="simplex")
        return sol.x if sol.optimal else None
    h = new_highs()
    h.setOptionValue("solver", "ipm")
    h.setOptionValue("run_crossover", "off")
    h.setOptionValue("presolve", "off")
    h.passModel(prob.to_highs_lp())
    h.run()
    sol = h.getSolution()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal or not sol.value_valid:
        sol2 = solve_sparse(prob, integer=False, lp_method="simplex")  # IPM trouble: fall back to a vertex
        return sol2.x if sol2.optimal else None
    return np.asarray(sol.col_value, dtype=float)


def _runnable_bounds(tput: np.ndarray) -> np.ndarray:
    return np.where(tput > 0, 1.0, 0.0).ravel()


def max_sum_throughput(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray,
                       method: str = "ipm") -> np.ndarray:
    """Gavel's max-sum-throughput LP over normalised throughputs ``tput`` (J x K); returns X."""
    num_jobs, num_types = tput.shape
    if num_jobs == 0:
        return np.zeros((0, num_types))
    A = _base_rows(num_jobs, num_types, scale)
    row_lo = np.full(num_jobs + num_types, -np.inf)
    row_hi = np.concatenate([np.ones(num_jobs), capacity.astype(float)])
    x = _solve(tput.ravel(), A, row_lo, row_hi, _runnable_bounds(tput), method)
    return _clip(x, tput)


def _max_min(weights: np.ndarray, scale: np.ndarray, capacity: np.ndarray, runnable: np.ndarray,
             method: str) -> np.ndarray:
    """Maximise ``z`` s.t. ``z <= sum_t weights[j, t] X[j, t]`` for every job that can run anywhere."""
    num_jobs, num_types = weights.shape
    n = num_jobs * num_types
    live = np.nonzero(runnable.reshape(num_jobs, num_types).any(axis=1))[0]
    if len(live) == 0:
        return np.zeros((num_jobs, num_types))
    base = _base_rows(num_jobs, num_types, scale, extra_cols=1)
    cols = (live[:, None] * num_types + np.arange(num_types)[None, :]).ravel()
    vals = -weights[live].ravel()
    fair = sp.csc_matrix((np.concatenate([vals, np.ones(len(live))]),
                          (np.concatenate([np.repeat(np.arange(len(live)), num_types), np.arange(len(live))]),
                           np.concatenate([cols, np.full(len(live), n)]))), shape=(len(live), n + 1))
    A = sp.vstack([base, fair], format="csc")
    row_lo = np.full(A.shape[0], -np.inf)
    row_hi = np.concatenate([np.ones(num_jobs), capacity.astype(float), np.zeros(len(live))])
    c = np.zeros(n + 1)
    c[n] = 1.0
    x = _solve(c, A, row_lo, row_hi, np.concatenate([runnable, [np.inf]]), method)
    return np.zeros((num_jobs, num_types)) if x is None else x[:n].reshape(num_jobs, num_types)


def isolated_throughputs(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray,
                         method: str = "ipm") -> np.ndarray:
    """Each job's throughput under Gavel's isolated allocation (max-min over unit throughputs)."""
    runnable = _runnable_bounds(tput)
    unit = runnable.reshape(tput.shape) * scale[:, None]
    x = _max_min(unit, scale, capacity, runnable, method)
    return (tput * np.clip(x, 0.0, 1.0)).sum(axis=1)


def max_min_fairness(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray, method: str = "ipm") -> np.ndarray:
    """Gavel's max-min fairness over throughputs normalised by the isolated allocation's."""
    num_jobs, num_types = tput.shape
    if num_jobs == 0:
        return np.zeros((0, num_types))
    iso = isolated_throughputs(tput, scale, capacity, method)
    weights = np.divide(tput * scale[:, None], iso[:, None], out=np.zeros_like(tput), where=iso[:, None] > 0)
    runnable = _runnable_bounds(tput) * (iso > 0).repeat(num_types)
    return _clip(_max_min(weights, scale, capacity, runnable, method).ravel(), tput)


def finish_time_fairness(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray, ages_s: np.ndarray,
                         remaining: np.ndarray, method: str = "ipm", *, rel_tol: float = 1e-3,
                         max_iter: int = 40) -> np.ndarray:
    """Gavel's finish-time fairness: minimise the largest ``rho_j`` (module docstring) by bisection.

    ``remaining[j]`` is the job's remaining work in units of normalised throughput x seconds.
    """
    num_jobs, num_types = tput.shape
    if num_jobs == 0:
        return np.zeros((0, num_types))
    iso = isolated_throughputs(tput, scale, capacity, method)
    live = (iso > 0) & (remaining > 0)
    ages = np.maximum(ages_s, 0.0)
    isolated_s = np.where(live, ages + np.divide(remaining, iso, out=np.zeros_like(iso), where=iso > 0), 1.0)
    A = _base_rows(num_jobs, num_types, scale)
    n = num_jobs * num_types
    rate_rows = sp.csc_matrix((tput.ravel(), (np.repeat(np.arange(num_jobs), num_types), np.arange(n))),
                              shape=(num_jobs, n))
    A = sp.vstack([A, rate_rows], format="csc")
    row_hi = np.concatenate([np.ones(num_jobs), capacity.astype(float), np.full(num_jobs, np.inf)])
    col_hi = _runnable_bounds(tput)
    best_rate = tput.max(axis=1)

    def attempt(rho: float) -> np.ndarray | None:
        slack = rho * isolated_s - ages
        if np.any(live & (slack <= 0)):
            return None
        need = np.where(live, np.divide(remaining, slack, out=np.zeros_like(slack), where=slack > 0), 0.0)
        if np.any(need > best_rate * (1 + 1e-9)):
            return None
        row_lo = np.concatenate([np.full(num_jobs + num_types, -np.inf), need * (1 - 1e-9)])
        return _solve(tput.ravel(), A, row_lo, row_hi, col_hi, method)

    if not live.any():
        return max_sum_throughput(tput, scale, capacity, method)
    lo = float(np.max(np.where(live, ages / isolated_s, 0.0)))
    hi = max(1.0, 2 * lo)
    best = attempt(hi)
    for _ in range(60):
        if best is not None:
            break
        lo, hi = hi, hi * 2
        best = attempt(hi)
    if best is None:
        return max_sum_throughput(tput, scale, capacity, method)
    for _ in range(max_iter):
        if hi - lo <= rel_tol * hi:
            break
        mid = 0.5 * (lo + hi)
        got = attempt(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
    return _clip(best, tput)


def _clip(x: np.ndarray | None, tput: np.ndarray) -> np.ndarray:
    if x is None:
        return np.zeros(tput.shape)
    return np.clip(np.asarray(x[: tput.size]).reshape(tput.shape), 0.0, 1.0) * (tput > 0)


def solve_allocation(objective: str, tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray, *,
                     ages_s: np.ndarray | None = None, remaining: np.ndarray | None = None,
                     method: str = "ipm") -> np.ndarray:
    """X[j, t] for one of :data:`OBJECTIVES`; ``tput`` is normalised inside."""
    t = normalized(np.asarray(tput, dtype=float))
    scale = np.asarray(scale, dtype=float)
    capacity = np.asarray(capacity, dtype=float)
    if objective == "max-sum-throughput":
        return max_sum_throughput(t, scale, capacity, method)
    if objective == "max-min":
        return max_min_fairness(t, scale, capacity, method)
    if objective == "finish-time-fairness":
        n = len(t)
        ages = np.zeros(n) if ages_s is None else np.asarray(ages_s, dtype=float)
        rem = np.ones(n) if remaining is None else np.asarray(remaining, dtype=float)
        return finish_time_fairness(t, scale, capacity, ages, rem, method)
    raise InputError(f"unknown Gavel objective '{objective}' (one of: {', '.join(OBJECTIVES)})", field="objective")


# ---------------------------------------------------------------------------------------------------------
# The scheduler: throughputs, LP, priorities, leases
# ---------------------------------------------------------------------------------------------------------
def rigid_view(job: JobView) -> JobView:
    """The job as Gavel runs it: its requested GPU count and batch size, nothing adaptive."""
    if job.spec.adaptivity is Adaptivity.RIGID:
        return job
    return dataclasses.replace(job, spec=dataclasses.replace(job.spec, adaptivity=Adaptivity.RIGID))


class GavelScheduler:
    """Gavel's heterogeneity-aware policies and its round-based time-sharing mechanism."""

    allows_packing = False
    #: Jobs run on exactly the GPUs they requested (the engine checks every gang).
    rigid = True

    def __init__(self, tunables: GavelTunables | None = None, estimator: GoodputEstimator | None = None,
                 name: str = "gavel") -> None:
        self.tunables = tunables or GavelTunables()
        self.estimator = estimator
        self.name = name
        self._job_time: dict[str, dict[str, float]] = {}
        self._cluster_time: dict[str, float] = {}
        self._lease_start = -math.inf
        self._leases: dict[str, Placement] = {}
        #: The last LP solution, job -> {type: fraction} (for reports and tests).
        self.allocation: dict[str, dict[str, float]] = {}
        #: Wall time of each LP solve (for benchmarks).
        self.lp_s: list[float] = []

    def describe(self) -> str:
        return f"{self.name} (objective={self.tunables.objective}, lease_s={self.tunables.lease_s:g})"

    # -- throughputs -----------------------------------------------------------------------------------
    def throughput(self, job: JobView, gpu_type: str, per_node: int, gpus_of_type: int) -> float:
        """Samples (or work units) per second of the job's fixed configuration, packed on ``gpu_type``."""
        k = job.spec.num_gpus
        if k > gpus_of_type or not job.spec.allows_gpu_type(gpu_type) or self.estimator is None:
            return 0.0
        nodes = max(1, math.ceil(k / max(per_node, 1)))
        table = getattr(self.estimator, "evaluate_many", None)
        shape = np.array([[nodes, k]])
        rigid = rigid_view(job)
        if table is not None:
            out = table(rigid, gpu_type, shape)
            value = float(out.throughput_sps[0]) if out.goodput[0] > 0 else 0.0
        else:
            est = self.estimator.estimate(rigid, gpu_type, nodes, k)
            value = 0.0 if est is None else float(est.throughput_sps)
        return value if math.isfinite(value) and value > 0 else 0.0

    def _remaining_s(self, job: JobView) -> float:
        rem = job.remaining_estimate_s()
        if rem is None and job.progress_fraction > 0 and job.attained_service_s > 0:
            rem = job.attained_service_s * (1.0 - job.progress_fraction) / job.progress_fraction
        return float(rem) if rem is not None and math.isfinite(rem) and rem > 0 else 3600.0

    # -- one engine round ------------------------------------------------------------------------------
    def schedule(self, view: ClusterView) -> Decision:
        t = self.tunables
        t_est = time.perf_counter()
        if self.estimator is not None:
            self.estimator.update(view)
        t_est = time.perf_counter() - t_est
        active = {j.job_id: j for j in view.jobs}
        for job_id in [k for k in self._job_time if k not in active]:
            del self._job_time[job_id]
        new_round = view.round_s >= t.lease_s - 1e-9 or view.time_s >= self._lease_start + t.lease_s - 1e-6
        pool = FreePool(view.cluster)
        decision = Decision()
        if new_round:
            self._lease_start = view.time_s
            if t.profile:
                self._profile(view, pool, decision, new_only=True)
            self._leases = {}
            self._leases = self._new_round(view, pool, decision)
        else:
            self._leases = {k: p for k, p in self._leases.items() if k in active and not active[k].profiling}
            for p in self._leases.values():
                pool.take(p.gpus)
            if t.profile:
                self._profile(view, pool, decision, new_only=False)
        for job_id, placement in self._leases.items():
            decision.place(job_id, placement, rigid_batch(active[job_id]))
        decision.info["gavel.estimator_s"] = t_est
        return decision

    def _profile(self, view: ClusterView, pool: FreePool, decision: Decision, *, new_only: bool) -> None:
        """Profile jobs on one free gang of each GPU type they have not been measured on.

        At a round boundary only jobs never profiled are (a partly profiled job takes its lease instead);
        inside a round, a waiting job is also profiled on the types it missed.
        """
        cluster = view.cluster
        for j in sorted(view.jobs, key=lambda j: (j.spec.submit_time_s, j.job_id)):
            if j.profiling or j.job_id in self._leases or j.is_running or j.job_id in decision.allocations:
                continue
            if new_only and j.profiled_types:
                continue
            unit = max(1, int(j.spec.gpu_unit))
            gpus: list[int] = []
            for g in cluster.type_names:
                if g in j.profiled_types or not j.spec.allows_gpu_type(g) \
                        or cluster.gpus_per_type[g] < j.spec.num_gpus or pool.free_of_type(g) < unit:
                    continue
                got = packed_gpus(pool, g, unit)
                if got is not None:
                    gpus += got[0]
                    pool.take(got[0])
            if gpus:
                decision.profiles[j.job_id] = Placement.of(gpus)

    def _new_round(self, view: ClusterView, pool: FreePool, decision: Decision) -> dict[str, Placement]:
        t = self.tunables
        cluster = view.cluster
        types = list(cluster.type_names)
        jobs = [j for j in sorted(view.jobs, key=lambda j: (j.spec.submit_time_s, j.job_id))
                if not j.profiling and j.job_id not in decision.profiles]
        for j in jobs:
            if j.job_id not in self._job_time:
                self._job_time[j.job_id] = {g: t.lease_s / 2 for g in types}
                for g in types:
                    self._cluster_time[g] = self._cluster_time.get(g, 0.0) + t.lease_s / 2
        per_node = {g: max(cluster.nodes[n].num_gpus for n in cluster.nodes_of_type[g]) for g in types}
        tput = np.array([[self.throughput(j, g, per_node[g], cluster.gpus_per_type[g]) for g in types]
                         for j in jobs]).reshape(len(jobs), len(types))
        keep = tput.sum(axis=1) > 0
        jobs = [j for j, k in zip(jobs, keep, strict=True) if k]
        tput = tput[keep]
        if not jobs:
            self.allocation = {}
            return {}
        scale = np.array([j.spec.num_gpus for j in jobs], dtype=float)
        capacity = np.array([pool.free_of_type(g) for g in types], dtype=float)
        norm = normalized(tput)
        remaining = np.array([self._remaining_s(j) for j in jobs]) * norm.max(axis=1)
        t0 = time.perf_counter()
        x = solve_allocation(t.objective, tput, scale, capacity, ages_s=np.array([j.age_s for j in jobs]),
                             remaining=remaining, method=t.lp_method)
        self.lp_s.append(time.perf_counter() - t0)
        decision.info["gavel.lp_s"] = self.lp_s[-1]
        self.allocation = {j.job_id: {g: float(x[i, k]) for k, g in enumerate(types)} for i, j in enumerate(jobs)}
        # priorities: allocation over the fraction of the type's time the job has received
        entries = []
        rank = {g: i for i, g in enumerate(types)}
        for i, j in enumerate(jobs):
            for k, g in enumerate(types):
                if tput[i, k] <= 0:
                    continue
                total = self._cluster_time.get(g, 0.0)
                frac = self._job_time[j.job_id][g] / total if total > 0 else 0.0
                if x[i, k] <= 0:
                    prio = 0.0
                elif frac > 0:
                    prio = x[i, k] / frac
                else:
                    prio = x[i, k] * 1e9
                entries.append((-prio, -x[i, k], j.spec.submit_time_s, -rank[g], i, g))
        entries.sort()
        left = {g: pool.free_of_type(g) for g in types}
        chosen: dict[int, str] = {}
        for _, _, _, _, i, g in entries:
            k = jobs[i].spec.num_gpus
            if i in chosen or k > left[g]:
                continue
            chosen[i] = g
            left[g] -= k
        leases = self._place(view, pool, [(jobs[i], g) for i, g in chosen.items()])
        for job_id, placement in leases.items():
            g = cluster.gpu_type_of[placement.gpus[0]]
            self._job_time[job_id][g] += t.lease_s
            self._cluster_time[g] = self._cluster_time.get(g, 0.0) + t.lease_s
        return leases

    def _place(self, view: ClusterView, pool: FreePool, chosen: list[tuple[JobView, str]]) -> dict[str, Placement]:
        """Keep a job's GPUs when it stays on its type and they are free; pack the rest, biggest first."""
        cluster = view.cluster
        out: dict[str, Placement] = {}
        order = sorted(chosen, key=lambda c: (-c[0].spec.num_gpus, c[0].spec.submit_time_s, c[0].job_id))
        rest = []
        for j, g in order:
            cur = j.placement
            if cur and len(cur) == j.spec.num_gpus and cluster.gpu_type_of[cur.gpus[0]] == g \
                    and pool.is_free(cur.gpus):
                pool.take(cur.gpus)
                out[j.job_id] = cur
            else:
                rest.append((j, g))
        for j, g in rest:
            got = packed_gpus(pool, g, j.spec.num_gpus)
            if got is None:
                continue
            pool.take(got[0])
            out[j.job_id] = Placement.of(got[0])
        return out


def rigid_batch(job: JobView) -> int | None:
    """The batch size a rigid run uses: the requested one, else the initial batch of its model."""
    if job.spec.batch_size is not None:
        return job.spec.batch_size
    if job.spec.adaptivity is Adaptivity.RIGID:
        return None
    return job.batch_limits[0] if job.batch_limits else None
