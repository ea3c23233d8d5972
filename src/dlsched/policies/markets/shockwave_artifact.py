"""Shockwave as the Sia thesis ran it: the port in the Sia artifact's simulator (``sia-simulator/shockwave.py``).

The thesis's Shockwave+TJ rows (table 3.4, figure 3.7) come from that port, which differs from the Shockwave
paper's formulation (:mod:`.shockwave`, variant ``paper``) in six ways, each followed here:

1. **Finish-time fairness as hard constraints.** For every job, the finish time predicted at the window's end,
   ``age + H + (remaining after the window) / share`` with ``share = min(1, G / N)`` (``N`` jobs, ``G``
   GPUs, the same share for every gang), must stay below ``rho_max`` times the job's *fair finish time*: a
   time-weighted running average, with momentum 0.9 towards the newest value, of ``(age + remaining) /
   share`` recorded at every solve of the job's life (:func:`momentum_average`). There is no fairness term in
   the objective.
2. **When those constraints are infeasible**, each job whose current ratio ``rho = (age + remaining / share)
   / fair finish time`` exceeds ``rho_max`` has its log utility multiplied by a priority ``rho^lambda``
   (``priority_power``, the artifact's 12), or ``rho^100`` (``finish_power``) when it can finish within one
   round; the plan is solved again without the constraints, and its rounds are then re-ranked by a second
   MILP that keeps each job's number of rounds and moves high-priority jobs early (minimum of ``sum_j
   priority_j * mean round index_j``; :func:`rank_rounds`). A solve that finds no plan within its node limit
   counts as infeasible.
3. **The makespan term** is ``k`` times the largest remaining time (seconds) after the window, ``k`` the
   artifact's 1e-9 (``makespan_k``), instead of the paper's GPU-weighted sum of remaining work.
4. **Log utility** is interpolated linearly between ``(0, log(log_origin))`` (the artifact's 1e-6) and the
   points ``log_bases``; the welfare is divided by ``N * R``. (The artifact's bases are 0, 0.2, ..., 1; an
   upper envelope of secants is exact for a concave function, so no boundary binaries are needed.)
5. **The plan is re-solved every round** (its ``REOPT_ROUNDS = 1``), from scratch, and only its first round runs.
6. **Work conservation.** GPUs the planned round leaves idle go to unplanned jobs, longest predicted remaining
   time first, each if its gang fits (:func:`work_conserving_fill`).

Kept from this project rather than the artifact: the artifact predicts remaining time from the simulator's
own throughput model (its truth); here, as for every policy, it comes from the user's estimate and the
progress jobs report (:func:`.lease.job_estimates`). Its solves stopped at a 15 s wall-clock limit on 24
Gurobi threads; here they stop at a node limit (reproducible runs). Huge priorities (``rho^100``) are
scaled by the largest one and floored at ``_MIN_WEIGHT`` so that HiGHS's tolerances still see every job;
exact arithmetic would make lower-priority jobs' progress irrelevant, which the work-conserving fill and the
floor both only touch where GPUs would otherwise stay idle. The artifact's script (``multi_simulator_unaware``)
plans 5 rounds ahead with bases 0, 0.2, ..., 1: ``window_rounds=5 log_bases=0.2,0.4,0.6,0.8,1`` reproduce it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dlsched.policies.markets.lease import JobEstimates, window_terms
from dlsched.solvers.highs import SparseProblem, solve_sparse

#: Weight of running earlier within the window, times GPUs and current rho (a tie-breaker among plans of equal
#: objective, far below any objective term; the artifact takes whichever order its solver returns).
_EARLY = 1e-6
#: Smallest relative weight a job's utility keeps in the priority-weighted objective and in the ranking.
_MIN_WEIGHT = 1e-6
#: ``--set`` values that give the artifact's script's parameters (``multi_simulator_unaware.py``: a 5-round
#: window, log interpolated through 0, 0.2, ..., 1), besides the defaults of the variant's own tunables.
SCRIPT_SETTINGS = {"variant": "sia-artifact", "window_rounds": "5", "log_bases": "0.2,0.4,0.6,0.8,1"}
#: Momentum of the fair finish time towards its newest value (the artifact's 0.9 on the running average).
MOMENTUM = 0.9


@dataclass(frozen=True)
class ArtifactPlan:
    """A solved plan (``run[j, r]``), whether the fairness constraints had to be relaxed, each job's priority
    (1 where not relaxed), and the solves' total wall time and nodes."""

    run: np.ndarray
    relaxed: bool
    priority: np.ndarray
    status: str
    solve_s: float
    nodes: int


def momentum_average(series: list[tuple[float, float]], now_s: float, momentum: float = MOMENTUM) -> float:
    """The artifact's fair finish time from ``series`` (time recorded, value): each value weighted by how long
    it stood (until the next record, the last one until ``now_s``), then moved ``1 - momentum`` of the way to
    the newest value. A series recorded only now is its value."""
    times = np.array([t for t, _ in series] + [now_s], dtype=float)
    values = np.array([v for _, v in series], dtype=float)
    windows = np.diff(times)
    if windows.max() <= 0.0:
        avg = float(values[-1])
    else:
        avg = float(windows @ values / windows.sum())
    return momentum * avg + (1.0 - momentum) * float(values[-1])


def uniform_share(capacity: int, n_jobs: int) -> float:
    """The artifact's share of the cluster each job gets in isolation: ``min(1, G / N)``, the same for every
    gang size."""
    return min(1.0, capacity / max(n_jobs, 1))


def fair_value(est: JobEstimates, capacity: int) -> np.ndarray:
    """What a solve records towards each job's fair finish time: ``(age + remaining) / share``."""
    return (est.age_s + est.remaining_s) / uniform_share(capacity, len(est.jobs))


def log_priorities(rho: np.ndarray, remaining_s: np.ndarray, round_s: float, rho_max: float,
                   power: float, finish_power: float) -> np.ndarray:
    """``log`` of each job's priority when the fairness constraints are relaxed: ``power * log(rho)`` for a job
    with ``rho > rho_max`` (``finish_power`` when it can finish within a round), 0 otherwise."""
    rho = np.maximum(np.asarray(rho, dtype=float), 1e-300)
    exponent = np.where(np.asarray(remaining_s) < round_s, finish_power, power)
    return np.where(rho > rho_max, exponent * np.log(rho), 0.0)


def relative_weights(log_priority: np.ndarray) -> np.ndarray:
    """Priorities scaled by the largest, floored at ``_MIN_WEIGHT`` (module docstring)."""
    if len(log_priority) == 0:
        return np.zeros(0)
    return np.maximum(np.exp(log_priority - np.max(log_priority)), _MIN_WEIGHT)


def interpolation_points(log_bases: tuple[float, ...], log_origin: float) -> list[tuple[float, float]]:
    """The points log is interpolated through: ``(0, log(log_origin))`` then each base."""
    bases = sorted(set(b for b in log_bases if b > 0.0))
    return [(0.0, math.log(log_origin))] + [(b, math.log(b)) for b in bases]


class _Rows:
    """Rows of a sparse constraint matrix, added one at a time."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def add(self, entries: list[tuple[int, float]], low: float, high: float) -> None:
        k = len(self.lo)
        for col, v in entries:
            self.rows.append(k)
            self.cols.append(col)
            self.vals.append(v)
        self.lo.append(low)
        self.hi.append(high)

    def matrix(self, ncol: int) -> sp.csc_matrix:
        return sp.csc_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.lo), ncol))


def _satisfies(problem: SparseProblem, x: np.ndarray, tol: float = 1e-6) -> bool:
    """Whether ``x`` is a feasible point of ``problem`` (bounds, rows, integrality): a solve that found no
    plan (infeasible, or stopped before finding one) returns a point that is not."""
    if len(x) != problem.num_cols or not np.all(np.isfinite(x)):
        return False
    if np.any(x < problem.col_lo - tol) or np.any(x > problem.col_hi + tol):
        return False
    ax = problem.A @ x
    if np.any(ax < problem.row_lo - tol) or np.any(ax > problem.row_hi + tol):
        return False
    ints = problem.integer if problem.integer is not None else np.zeros(len(x), dtype=bool)
    return bool(np.all(np.abs(x[ints] - np.round(x[ints])) <= tol))


def plan_window_artifact(est: JobEstimates, capacity: int, fair_finish_s: np.ndarray, *, round_s: float,
                         window_rounds: int, rho_max: float, log_bases: tuple[float, ...], log_origin: float,
                         makespan_k: float, priority_power: float, finish_power: float, mip_gap: float = 1e-3,
                         time_limit_s: float | None = None, node_limit: int | None = None) -> ArtifactPlan:
    """The artifact's plan over the next ``window_rounds`` rounds (module docstring, points 1-4), as MILPs.

    ``fair_finish_s`` is each job's fair finish time (:func:`momentum_average` of its recorded values).
    """
    n, R, H, total, progress, delta, rounds_needed = window_terms(est, round_s, window_rounds)
    share = uniform_share(capacity, n)
    rho_now = (est.age_s + est.remaining_s / share) / np.maximum(fair_finish_s, 1e-9)
    nx = n * R
    iP, iu, iM = nx, nx + n, nx + 2 * n
    ncol = nx + 2 * n + 1
    points = interpolation_points(log_bases, log_origin)

    def build(weights: np.ndarray, hard: bool) -> SparseProblem:
        c = np.zeros(ncol)
        for r in range(R):
            c[r:nx:R] = _EARLY * (R - r) * est.gpus * np.minimum(rho_now, 1e3) / max(capacity, 1)
        c[iu:iu + n] = weights / (n * R)
        c[iM] = -makespan_k
        rows = _Rows()
        for r in range(R):  # capacity per round
            rows.add([(j * R + r, float(est.gpus[j])) for j in range(n)], -np.inf, float(capacity))
        for r in range(R - 1):  # rounds busiest first (symmetry; the objective does not see the order)
            rows.add([(j * R + r, float(est.gpus[j])) for j in range(n)]
                     + [(j * R + r + 1, -float(est.gpus[j])) for j in range(n)], 0.0, np.inf)
        for j in range(n):
            xs = [(j * R + r, 1.0) for r in range(R)]
            rows.add([(iP + j, 1.0)] + [(col, -float(delta[j])) for col, _ in xs], -np.inf, float(progress[j]))
            rows.add(xs, -np.inf, float(rounds_needed[j]))
            for (b0, l0), (b1, l1) in zip(points, points[1:], strict=False):  # u <= secant of each segment
                slope = (l1 - l0) / (b1 - b0)
                rows.add([(iu + j, 1.0), (iP + j, -slope)], -np.inf, l0 - slope * b0)
            # M >= remaining after the window = T (1 - P)
            rows.add([(iM, 1.0), (iP + j, float(total[j]))], float(total[j]), np.inf)
            if hard:  # age + H + T (1 - P) / share <= rho_max * fair finish time
                rows.add([(iP + j, -float(total[j] / share))], -np.inf,
                         float(rho_max * fair_finish_s[j] - est.age_s[j] - H - total[j] / share))
        col_lo = np.concatenate([np.zeros(nx), np.zeros(n), np.full(n, points[0][1]), [0.0]])
        col_hi = np.concatenate([np.ones(nx), np.ones(n), np.zeros(n), [np.inf]])
        integer = np.concatenate([np.ones(nx, dtype=bool), np.zeros(2 * n + 1, dtype=bool)])
        return SparseProblem(c=c, A=rows.matrix(ncol), row_lo=np.array(rows.lo), row_hi=np.array(rows.hi),
                             col_lo=col_lo, col_hi=col_hi, integer=integer, maximize=True)

    def solve(problem: SparseProblem) -> tuple[np.ndarray | None, str, float, int]:
        sol = solve_sparse(problem, integer=True, mip_rel_gap=mip_gap, time_limit_s=time_limit_s,
                           node_limit=node_limit)
        ok = _satisfies(problem, sol.x)
        run = (sol.x[:nx] > 0.5).reshape(n, R) if ok else None
        return run, sol.status, sol.solve_s, sol.nodes

    # A job that misses its fair finish time even when it runs in every round it can makes the hard problem
    # infeasible: no solve is needed to know it.
    best_P = np.minimum(1.0, progress + delta * np.minimum(R, rounds_needed))
    reachable = est.age_s + H + total * (1.0 - best_P) / share <= rho_max * fair_finish_s + 1e-6
    spent, nodes, status = 0.0, 0, "infeasible (a job cannot meet its fair finish time)"
    if n and bool(np.all(reachable)):
        run, status, dt, k = solve(build(np.ones(n), hard=True))
        spent, nodes = spent + dt, nodes + k
        if run is not None:
            return ArtifactPlan(run=run, relaxed=False, priority=np.ones(n), status=status, solve_s=spent,
                                nodes=nodes)
    logp = log_priorities(rho_now, est.remaining_s, round_s, rho_max, priority_power, finish_power)
    weights = relative_weights(logp)
    run, status, dt, k = solve(build(weights, hard=False))
    spent, nodes = spent + dt, nodes + k
    if run is None:  # no plan within the limits (without the fairness rows a plan always exists: nobody runs)
        run = np.zeros((n, R), dtype=bool)
    ranked, dt, k = rank_rounds(run, est.gpus, capacity, weights, mip_gap=mip_gap, time_limit_s=time_limit_s,
                                node_limit=node_limit)
    return ArtifactPlan(run=ranked, relaxed=True, priority=np.exp(logp), status=status, solve_s=spent + dt,
                        nodes=nodes + k)


def rank_rounds(run: np.ndarray, gpus: np.ndarray, capacity: int, weights: np.ndarray, *, mip_gap: float = 1e-3,
                time_limit_s: float | None = None,
                node_limit: int | None = None) -> tuple[np.ndarray, float, int]:
    """``run`` with its rounds re-assigned so that each job keeps its number of rounds, every round fits
    ``capacity``, and ``sum_j weights_j * (mean round index of j)`` is least: high-priority jobs run first.
    Returns the ranked plan (``run`` itself when no better assignment is found), solve time and nodes."""
    n, R = run.shape
    count = run.sum(axis=1)
    if n == 0 or R <= 1 or not count.any():
        return run, 0.0, 0
    nx = n * R
    c = np.zeros(nx)
    for k in np.flatnonzero(count):
        c[k * R:(k + 1) * R] = weights[k] / count[k] * np.arange(R)
    rows = _Rows()
    for r in range(R):
        rows.add([(j * R + r, float(gpus[j])) for j in range(n)], -np.inf, float(capacity))
    for j in range(n):
        rows.add([(j * R + r, 1.0) for r in range(R)], float(count[j]), float(count[j]))
    problem = SparseProblem(c=c, A=rows.matrix(nx), row_lo=np.array(rows.lo), row_hi=np.array(rows.hi),
                            col_lo=np.zeros(nx), col_hi=np.ones(nx), integer=np.ones(nx, dtype=bool),
                            maximize=False)
    sol = solve_sparse(problem, integer=True, mip_rel_gap=mip_gap, time_limit_s=time_limit_s,
                       start=run.reshape(-1).astype(float), node_limit=node_limit)
    if not _satisfies(problem, sol.x):
        return run, sol.solve_s, sol.nodes
    return (sol.x > 0.5).reshape(n, R), sol.solve_s, sol.nodes


def work_conserving_fill(planned: np.ndarray, gpus: np.ndarray, capacity: int,
                         remaining_s: np.ndarray) -> np.ndarray:
    """The round ``planned`` (booleans per job) with the GPUs it leaves idle given to unplanned jobs, longest
    remaining time first, each whose gang still fits (module docstring, point 6)."""
    chosen = np.array(planned, dtype=bool, copy=True)
    left = capacity - float(gpus[chosen].sum())
    for j in np.argsort(-np.asarray(remaining_s, dtype=float), kind="stable"):
        if left <= 0:
            break
        if not chosen[j] and gpus[j] <= left + 1e-9:
            chosen[j] = True
            left -= float(gpus[j])
    return chosen
