"""Gavel (OSDI'20): heterogeneity-aware policies as linear programs.

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
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from dlsched.core import InputError
from dlsched.solvers.highs import SparseProblem, new_highs, solve_sparse

OBJECTIVES = ("max-sum-throughput", "finish-time-fairness", "max-min")
#: ``ipm``: interior point without crossover, which like Gavel's cvxpy/ECOS returns a point inside the optimal
#: face, so equivalent jobs share time evenly (Gavel's time-sharing); ``simplex``: a vertex, where equivalent
#: jobs do not share (fewer preemptions, a kinder Gavel than the original).
LP_METHODS = ("ipm", "simplex")


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
    ipm_sol = h.getSolution()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal or not ipm_sol.value_valid:
        sol2 = solve_sparse(prob, integer=False, lp_method="simplex")  # IPM trouble: fall back to a vertex
        return sol2.x if sol2.optimal else None
    return np.asarray(ipm_sol.col_value, dtype=float)


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
