"""Gavel (OSDI'20): heterogeneity-aware policies as linear programs, as pure functions.

Gavel decides, for every job ``j`` and GPU type ``t``, the fraction of time ``X[j, t]`` the job should spend
on that type, from a throughput matrix ``T[j, t]``: the throughput of the job's fixed configuration (its
``s_j`` GPUs, its batch size) on type ``t``, in steps per second. :func:`solve_allocation` is the entry point,
``solve_allocation(objective, tput, scale, capacity, ...)``, called with arrays as Gavel's policies are called
with dicts; it keeps no state.

What Gavel's code optimises (``scheduler/policies/`` of the Gavel repository, the non-packing ``*WithPerf``
policies; the paper, section 4, where it is explicit):

* Every policy: ``T`` raw, as given (``Policy.flatten`` does not normalise), and the base constraints::

      X >= 0,    sum_t X[j, t] <= 1,    sum_j s_j X[j, t] <= gpus_t

  with ``s_j`` the job's scale factor (GPU count). The answer is clipped to [0, 1]. We also fix
  ``X[j, t] = 0`` where ``T[j, t] = 0`` (a gang larger than the type, a type the job refuses): time there
  gains no objective, and the mechanism must not lease it.
* ``max-sum-throughput`` (``ThroughputSumWithPerf``, no instance costs, no SLOs): maximise
  ``sum_jt T[j, t] X[j, t]`` over raw throughputs. The code computes ``1 / T.sum(axis=1)`` (a per-job scale)
  and never uses it; there are no priority weights and no scale factors in the objective.
* ``max-min`` (``MaxMinFairnessPolicyWithPerf``): maximise ``min_j s_j * sum_t T[j, t] X[j, t] / (w_j P_j)``
  with ``w_j`` the job's priority weight (1: our jobs carry none) and ``P_j`` its throughput under Gavel's
  proportional allocation (``ProportionalPolicy``; the paper's ``X^equal``): every job gets each type for a
  share of time proportional to the type's GPU count, ``X^prop[j, t] = gpus_t / sum_t' gpus_t'`` (the paper's
  example: one V100 and one K80 give ``[0.5, 0.5]``), so ``P_j = sum_t T[j, t] gpus_t / sum_t' gpus_t'``.
* ``finish-time-fairness`` (``FinishTimeFairnessPolicyWithPerf``): minimise ``max_j rho_j`` with::

      rho_j = (age_j + W_j / sum_t T[j, t] X[j, t]) / (I_j + W_j / iso_j)

  ``age_j`` the time since the job arrived, ``W_j`` its remaining steps, ``iso_j = sum_t T[j, t] X^iso[j, t]``
  its throughput under Gavel's isolated allocation (``IsolatedPolicy``; the paper's "1/n of the cluster"):
  each type's GPUs split equally over the ``n`` jobs, divided by the job's scale factor, the row then capped
  at running all the time, ``X^iso[j, t] = (gpus_t / (n s_j)) / max(1, sum_t' gpus_t' / (n s_j))``. ``I_j`` is
  only in the code: the isolated time the job has accumulated, each solve adding the steps done since the
  previous solve over the previous ``iso_j``; the caller keeps it (:class:`~.allocation.GavelAllocation`)
  and passes it as ``isolated_time_s``. Priority weights are computed and unused (a TODO in the code).

Gavel solves these with cvxpy/ECOS. Here they are LPs built as sparse matrices and solved with HiGHS
(:mod:`dlsched.solvers.highs`); ``rho`` is non-linear in ``X``, so finish-time fairness is solved by bisection
on ``rho`` over LP feasibility problems (``sum_t T[j, t] X[j, t] >= W_j / (rho D_j - age_j)``, ``D_j`` the
denominator), maximising throughput among the feasible allocations.

Earlier versions of Gavel's code, which this module followed before, are kept as options: throughputs
normalised by their row sum (``normalize=True``; Gavel's packing policies once did this), and the isolated
throughput taken from a max-min LP over unit throughputs (Gavel's ``MaxMinFairnessPolicy``) as max-min's
reference (``maxmin_reference="max-min-lp"``) and finish-time fairness's (``ftf_isolated="max-min-lp"``).
Wall-clock age in ``rho``'s denominator is the caller's choice: pass the ages as ``isolated_time_s``.
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
#: Max-min's reference throughput: Gavel's proportional allocation, or the max-min LP over unit throughputs.
MAXMIN_REFERENCES = ("proportional", "max-min-lp")
#: Finish-time fairness's isolated throughput: Gavel's equal split, or the max-min LP over unit throughputs.
FTF_ISOLATED = ("equal-share", "max-min-lp")


# ---------------------------------------------------------------------------------------------------------
# Throughputs and reference allocations
# ---------------------------------------------------------------------------------------------------------
def clean(throughputs: np.ndarray) -> np.ndarray:
    """Throughputs with anything not finite and positive set to 0 (the job cannot run there)."""
    t = np.asarray(throughputs, dtype=float)
    return np.where(np.isfinite(t) & (t > 0), t, 0.0)


def normalized(throughputs: np.ndarray) -> np.ndarray:
    """Each job's throughputs over their sum across types (the ``normalize`` option); 0 rows stay 0."""
    t = clean(throughputs)
    total = t.sum(axis=1, keepdims=True)
    return np.divide(t, total, out=np.zeros_like(t), where=total > 0)


def proportional_throughputs(tput: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Gavel's ``ProportionalPolicy``: each job's throughput with every type's time in proportion to its GPUs.

    ``X^prop[j, t] = gpus_t / sum gpus``, the same for every job, so ``P_j`` is the capacity-weighted mean of
    the job's throughputs (a type the job cannot use counts as throughput 0).
    """
    cap = np.maximum(np.asarray(capacity, dtype=float), 0.0)
    total = cap.sum()
    if total <= 0:
        return np.zeros(len(tput))
    return tput @ (cap / total)


def equal_share_throughputs(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Gavel's ``IsolatedPolicy``: each job's throughput on a ``1/n`` share of every type, in gangs of ``s_j``.

    ``X^iso[j, t] = gpus_t / (n s_j)``, scaled down so a job runs at most all the time (``sum_t X <= 1``).
    """
    n = len(tput)
    if n == 0:
        return np.zeros(0)
    cap = np.maximum(np.asarray(capacity, dtype=float), 0.0)
    x = cap[None, :] / (n * np.maximum(np.asarray(scale, dtype=float), 1e-12)[:, None])
    x = x / np.maximum(x.sum(axis=1, keepdims=True), 1.0)
    return (tput * x).sum(axis=1)


def isolated_throughputs(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray,
                         method: str = "ipm") -> np.ndarray:
    """Each job's throughput under the max-min allocation over unit throughputs (the ``max-min-lp`` options)."""
    runnable = _runnable_bounds(tput)
    unit = runnable.reshape(tput.shape) * scale[:, None]
    x = _max_min(unit, scale, capacity, runnable, method)
    return (tput * np.clip(x, 0.0, 1.0)).sum(axis=1)


def reference_throughputs(kind: str, tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray,
                          method: str = "ipm") -> np.ndarray:
    """The throughput a fairness policy compares a job's against: one of :data:`MAXMIN_REFERENCES` or
    :data:`FTF_ISOLATED`."""
    tput = clean(tput)
    scale = np.asarray(scale, dtype=float)
    capacity = np.asarray(capacity, dtype=float)
    if kind == "proportional":
        return proportional_throughputs(tput, capacity)
    if kind == "equal-share":
        return equal_share_throughputs(tput, scale, capacity)
    if kind == "max-min-lp":
        return isolated_throughputs(tput, scale, capacity, method)
    known = sorted({*MAXMIN_REFERENCES, *FTF_ISOLATED})
    raise InputError(f"unknown reference allocation '{kind}' (one of: {', '.join(known)})", field="reference")


# ---------------------------------------------------------------------------------------------------------
# The LPs
# ---------------------------------------------------------------------------------------------------------
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
    """Gavel's max-sum-throughput: maximise ``sum T X`` over the base constraints; returns X (J x K)."""
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


def max_min_fairness(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray, reference: np.ndarray,
                     method: str = "ipm") -> np.ndarray:
    """Gavel's max-min fairness: maximise the smallest ``s_j * sum_t T[j, t] X[j, t] / reference_j``."""
    num_jobs, num_types = tput.shape
    if num_jobs == 0:
        return np.zeros((0, num_types))
    ref = np.asarray(reference, dtype=float)[:, None]
    weights = np.divide(tput * scale[:, None], ref, out=np.zeros_like(tput), where=ref > 0)
    runnable = _runnable_bounds(tput) * (ref[:, 0] > 0).repeat(num_types)
    return _clip(_max_min(weights, scale, capacity, runnable, method).ravel(), tput)


def max_rho(x: np.ndarray, tput: np.ndarray, ages_s: np.ndarray, remaining: np.ndarray,
            isolated_time_s: np.ndarray, iso: np.ndarray) -> float:
    """Finish-time fairness's objective for allocation ``x``: the largest ``rho_j`` (module docstring)."""
    rate = (tput * x).sum(axis=1)
    live = (iso > 0) & (remaining > 0)
    if not live.any():
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        num = ages_s + np.where(rate > 0, remaining / np.where(rate > 0, rate, 1.0), np.inf)
        den = isolated_time_s + remaining / np.where(iso > 0, iso, 1.0)
        return float(np.max((num / den)[live]))


def finish_time_fairness(tput: np.ndarray, scale: np.ndarray, capacity: np.ndarray, ages_s: np.ndarray,
                         remaining: np.ndarray, isolated_time_s: np.ndarray, iso: np.ndarray,
                         method: str = "ipm", *, rel_tol: float = 1e-4, max_iter: int = 60) -> np.ndarray:
    """Gavel's finish-time fairness: minimise the largest ``rho_j`` (module docstring) by bisection.

    ``remaining[j]`` is the job's remaining work in units of ``tput`` x seconds, ``iso`` its isolated
    throughput and ``isolated_time_s`` the isolated time counted so far (``rho``'s denominator is
    ``isolated_time_s + remaining / iso``).
    """
    num_jobs, num_types = tput.shape
    if num_jobs == 0:
        return np.zeros((0, num_types))
    live = (iso > 0) & (remaining > 0)
    if not live.any():
        return max_sum_throughput(tput, scale, capacity, method)
    ages = np.maximum(ages_s, 0.0)
    denom = np.where(live, np.maximum(isolated_time_s, 0.0)
                     + np.divide(remaining, iso, out=np.zeros_like(iso), where=iso > 0), 1.0)
    A = _base_rows(num_jobs, num_types, scale)
    n = num_jobs * num_types
    rate_rows = sp.csc_matrix((tput.ravel(), (np.repeat(np.arange(num_jobs), num_types), np.arange(n))),
                              shape=(num_jobs, n))
    A = sp.vstack([A, rate_rows], format="csc")
    row_hi = np.concatenate([np.ones(num_jobs), capacity.astype(float), np.full(num_jobs, np.inf)])
    col_hi = _runnable_bounds(tput)
    best_rate = tput.max(axis=1)

    def attempt(rho: float) -> np.ndarray | None:
        slack = rho * denom - ages
        if np.any(live & (slack <= 0)):
            return None
        need = np.where(live, np.divide(remaining, slack, out=np.zeros_like(slack), where=slack > 0), 0.0)
        if np.any(need > best_rate * (1 + 1e-9)):
            return None
        row_lo = np.concatenate([np.full(num_jobs + num_types, -np.inf), need * (1 - 1e-9)])
        return _solve(tput.ravel(), A, row_lo, row_hi, col_hi, method)

    lo = float(np.max(np.where(live, ages / denom, 0.0)))
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
                     isolated_time_s: np.ndarray | None = None, normalize: bool = False,
                     maxmin_reference: str = "proportional", ftf_isolated: str = "equal-share",
                     method: str = "ipm") -> np.ndarray:
    """X[j, t] for one of :data:`OBJECTIVES`, Gavel's by default (module docstring).

    ``tput`` (J x K, steps per second; 0 where a job cannot run), ``scale`` (J, GPUs per job), ``capacity``
    (K, GPUs per type). Finish-time fairness also takes ``ages_s`` (time since each job arrived; 0),
    ``remaining`` (remaining steps, in ``tput``'s units x seconds; 1) and ``isolated_time_s`` (isolated time
    accumulated so far; 0, as for jobs Gavel sees for the first time). ``normalize`` divides each job's
    throughputs (and its remaining work) by their sum over types first; ``maxmin_reference`` and
    ``ftf_isolated`` pick the reference allocations (:data:`MAXMIN_REFERENCES`, :data:`FTF_ISOLATED`).
    """
    t = clean(tput)
    if t.ndim != 2:
        raise InputError(f"throughputs must be a jobs x types matrix, got shape {t.shape}", field="tput")
    rows = t.sum(axis=1)
    if normalize:
        t = normalized(t)
    scale = np.asarray(scale, dtype=float)
    capacity = np.asarray(capacity, dtype=float)
    if objective == "max-sum-throughput":
        return max_sum_throughput(t, scale, capacity, method)
    if objective == "max-min":
        if maxmin_reference not in MAXMIN_REFERENCES:
            raise InputError(f"unknown max-min reference '{maxmin_reference}' (one of: "
                             f"{', '.join(MAXMIN_REFERENCES)})", field="maxmin_reference")
        ref = reference_throughputs(maxmin_reference, t, scale, capacity, method)
        return max_min_fairness(t, scale, capacity, ref, method)
    if objective == "finish-time-fairness":
        if ftf_isolated not in FTF_ISOLATED:
            raise InputError(f"unknown isolated allocation '{ftf_isolated}' (one of: {', '.join(FTF_ISOLATED)})",
                             field="ftf_isolated")
        n = len(t)
        ages = np.zeros(n) if ages_s is None else np.asarray(ages_s, dtype=float)
        rem = np.ones(n) if remaining is None else np.asarray(remaining, dtype=float)
        if normalize and remaining is not None:
            rem = np.divide(rem, rows, out=np.zeros_like(rem), where=rows > 0)
        spent = np.zeros(n) if isolated_time_s is None else np.asarray(isolated_time_s, dtype=float)
        iso = reference_throughputs(ftf_isolated, t, scale, capacity, method)
        return finish_time_fairness(t, scale, capacity, ages, rem, spent, iso, method)
    raise InputError(f"unknown Gavel objective '{objective}' (one of: {', '.join(OBJECTIVES)})", field="objective")
