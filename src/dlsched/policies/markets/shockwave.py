"""Shockwave (Zheng et al., NSDI'23): a market over future rounds, solved as one MILP per plan.

Shockwave plans which jobs run in each of the next ``window_rounds`` rounds. Its market equilibrium is the
allocation that maximises social welfare, the sum of log utilities (Nash social welfare: an equilibrium of
a Fisher market with equal budgets), where a job's utility is its progress by the end of the window; on top
of it a finish-time-fairness regulariser penalises jobs whose predicted ``rho`` exceeds ``rho_max``, and a
makespan regulariser penalises the work left for after the window. Per job ``j`` with gang ``g_j``, progress
``p_j`` and ``delta_j`` progress per round it runs (a round over its total run time)::

    x[j, r] in {0, 1}                      job j holds its gang in round r of the window
    sum_j g_j x[j, r] <= G                 every round
    P_j = min(1, p_j + delta_j sum_r x[j, r])   progress at the window's end
    rho_j = (age_j + H + (1 - P_j) T_j) / T_id_j    (predicted finish-time fairness; H the window)

    maximise  (1/n) sum_j log(P_j)  -  ftf_weight (1/n) sum_j max(0, rho_j - rho_max)
              -  makespan_weight sum_j g_j (1 - P_j) T_j / (G H)

``log`` is replaced by its tangents at ``log_bases`` (exact at those points, an upper bound elsewhere: the
MILP stays linear), as Shockwave's solver does. The plan's first round is executed; the plan is kept while
the job set is unchanged, and re-solved when a job arrives or leaves, when a job the plan expected to have
finished is still running (its estimate was short), or when the window is used up. The objective depends on how often a job runs in the window, not
when, so among equal plans the busiest rounds come first and, within them, a tiny bonus (proportional to
the job's current rho) runs the jobs whose fairness is worst first.

Variants. ``variant=paper`` (the default) is the formulation above, from the Shockwave paper's text.
``variant=sia-artifact`` is the port the Sia thesis ran (its artifact's ``sia-simulator/shockwave.py``):
fairness as hard constraints with a priority-weighted fallback, the largest remaining time as the makespan
term, a re-solve every round and a work-conserving fill of idle GPUs (:mod:`.shockwave_artifact` lists each
difference). Its own tunables: ``log_origin``, ``makespan_k``, ``priority_power``, ``finish_power``; it
ignores ``ftf_weight``, ``makespan_weight`` and ``warm_start``.

Dynamic adaptation. Shockwave predicts how a job's epoch duration changes as its batch size changes
(regimes fitted from the job's history) and plans with those predictions. The jobs it runs here are
TunedJobs, rigid, whose batch size does not change, so ``delta_j`` comes from the job's current estimate
and observations, and a re-plan picks up any change in them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dlsched.core import ClusterView, InputError, JobView
from dlsched.core.ranges import DAY_S, ranged
from dlsched.policies.markets.lease import JobEstimates, LeaseAllocation, job_estimates, window_terms
from dlsched.policies.markets.shockwave_artifact import (
    fair_value,
    momentum_average,
    plan_window_artifact,
    work_conserving_fill,
)
from dlsched.policies.stages import Plan
from dlsched.solvers.highs import SparseProblem, solve_sparse

#: Weight of running earlier within the window, times GPUs and current rho (a tie-breaker, far below any
#: objective term).
_EARLY = 1e-6
#: The formulations ``variant`` selects (module docstring).
VARIANTS = ("paper", "sia-artifact")


def _parse_bases(raw: str, key: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise InputError(f"cannot read '{raw}' as comma-separated progress values", field=key) from None
    if not values or any(not (0.0 < v <= 1.0) for v in values):
        raise InputError(f"log bases must be in (0, 1], got '{raw}'", field=key)
    return values


@dataclass(frozen=True)
class WindowPlan:
    """A solved plan: ``run[j, r]`` for each job and round of the window, and the solve's status."""

    run: np.ndarray
    objective: float
    status: str
    solve_s: float
    nodes: int = 0


def plan_window(est: JobEstimates, capacity: int, *, round_s: float, window_rounds: int, ftf_weight: float,
                makespan_weight: float, rho_max: float, log_bases: tuple[float, ...],
                mip_gap: float = 1e-3, time_limit_s: float | None = None,
                start_run: np.ndarray | None = None, node_limit: int | None = None) -> WindowPlan:
    """Shockwave's schedule over the next ``window_rounds`` rounds (module docstring), as a MILP.

    ``start_run`` (jobs x rounds, booleans) is a plan to start the search from, typically the rest of the
    previous plan: it is made feasible (:func:`feasible_start`) and handed to the solver as its first
    incumbent, so a re-plan never ends worse than carrying on with the old plan, and prunes from the start.
    """
    n, R, H, total, progress, delta, rounds_needed = window_terms(est, round_s, window_rounds)
    # columns: x (n*R, binary), P (n), u (n: log of P), s (n: rho excess)
    nx = n * R
    iP, iu, is_ = nx, nx + n, nx + 2 * n
    ncol = nx + 3 * n
    c = np.zeros(ncol)
    rho_now = np.minimum(est.rho(), 1e3)
    for r in range(R):
        c[r:nx:R] = _EARLY * (R - r) * est.gpus * rho_now / max(capacity, 1)
    c[iu:iu + n] = 1.0 / n
    c[is_:is_ + n] = -ftf_weight / n
    # makespan term: -w * sum g (1 - P) T / (G H) = const + w * sum g T P / (G H)
    c[iP:iP + n] = makespan_weight * est.gpus * total / (capacity * H)
    offset = -makespan_weight * float(np.sum(est.gpus * total)) / (capacity * H)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def add(entries: list[tuple[int, float]], low: float, high: float) -> None:
        k = len(lo)
        for col, v in entries:
            rows.append(k)
            cols.append(col)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    for r in range(R):  # capacity per round
        add([(j * R + r, float(est.gpus[j])) for j in range(n)], -np.inf, float(capacity))
    # The objective depends on how often each job runs, not when, so rounds can be reordered: keep the busiest
    # first. This removes the solver's symmetric copies of every plan and agrees with the bonus for running early.
    for r in range(R - 1):
        add([(j * R + r, float(est.gpus[j])) for j in range(n)] + [(j * R + r + 1, -float(est.gpus[j]))
                                                                     for j in range(n)], 0.0, np.inf)
    for j in range(n):
        xs = [(j * R + r, 1.0) for r in range(R)]
        # P_j <= p_j + delta_j sum_r x (and P_j <= 1: the last round may finish the job part way through it);
        # every term of the objective grows with P_j, so the bound is met with equality below 1
        add([(iP + j, 1.0)] + [(col, -float(delta[j])) for col, _ in xs], -np.inf, float(progress[j]))
        add(xs, -np.inf, float(rounds_needed[j]))  # no planning past the job's end
        for b in log_bases:  # u_j <= log b + (P_j - b) / b
            add([(iu + j, 1.0), (iP + j, -1.0 / b)], -np.inf, math.log(b) - 1.0)
        # s_j >= rho_j - rho_max, rho_j = (age + H + T - T P) / T_id
        add([(is_ + j, 1.0), (iP + j, float(total[j] / est.isolated_s[j]))],
            float((est.age_s[j] + H + total[j]) / est.isolated_s[j] - rho_max), np.inf)
    A = sp.csc_matrix((vals, (rows, cols)), shape=(len(lo), ncol))
    col_lo = np.concatenate([np.zeros(nx), np.zeros(n), np.full(n, -1e3), np.zeros(n)])
    col_hi = np.concatenate([np.ones(nx), np.ones(n), np.full(n, 0.0), np.full(n, np.inf)])
    integer = np.concatenate([np.ones(nx, dtype=bool), np.zeros(3 * n, dtype=bool)])
    problem = SparseProblem(c=c, A=A, row_lo=np.array(lo), row_hi=np.array(hi), col_lo=col_lo, col_hi=col_hi,
                            integer=integer, maximize=True, offset=offset)
    start = None
    if start_run is not None:
        run0 = fill_rounds(feasible_start(start_run, est.gpus, capacity, rounds_needed), est.gpus, capacity,
                           rounds_needed, priority=rho_now)
        P0 = np.minimum(1.0, progress + delta * run0.sum(axis=1))
        u0 = np.clip(np.min([math.log(b) + (P0 - b) / b for b in log_bases], axis=0), -1e3, 0.0)
        s0 = np.maximum(0.0, (est.age_s + H + total) / est.isolated_s - rho_max - total / est.isolated_s * P0)
        start = np.concatenate([run0.reshape(-1).astype(float), P0, u0, s0])
    sol = solve_sparse(problem, integer=True, mip_rel_gap=mip_gap, time_limit_s=time_limit_s, start=start,
                       node_limit=node_limit)
    run = (sol.x[:nx] > 0.5).reshape(n, R) if n else np.zeros((0, R), dtype=bool)
    return WindowPlan(run=run, objective=sol.objective, status=sol.status, solve_s=sol.solve_s, nodes=sol.nodes)


def feasible_start(run: np.ndarray, gpus: np.ndarray, capacity: int, rounds_needed: np.ndarray) -> np.ndarray:
    """A copy of ``run`` that meets the plan's constraints: no job planned for more rounds than it needs
    (its latest rounds dropped), no round over ``capacity`` GPUs (its last jobs dropped), and rounds ordered
    busiest first (the objective does not depend on the order)."""
    run = np.array(run, dtype=bool, copy=True)
    for j in range(run.shape[0]):
        planned = np.flatnonzero(run[j])
        extra = len(planned) - int(rounds_needed[j])
        if extra > 0:
            run[j, planned[len(planned) - extra:]] = False
    for r in range(run.shape[1]):
        used = np.cumsum(np.where(run[:, r], gpus, 0.0))
        run[:, r] &= used <= capacity + 1e-9
    load = (run * gpus[:, None]).sum(axis=0)
    return run[:, np.argsort(-load, kind="stable")]


def fill_rounds(run: np.ndarray, gpus: np.ndarray, capacity: int, rounds_needed: np.ndarray,
                priority: np.ndarray) -> np.ndarray:
    """``run`` (a feasible plan) with every round's free GPUs given to jobs that fit and still need rounds,
    highest ``priority`` first, then reordered busiest first.

    Why: a re-plan starts from the rest of the previous plan, in which a job that arrived since has no
    round. When the solve is cut short by its node or time limit before it finds anything better, that
    start is the plan, and the newcomers would wait for the next re-plan while GPUs stay idle. Every term of
    the objective grows with a job's progress, so running a job in a free slot never lowers it: the filled
    start is at least as good."""
    run = np.array(run, dtype=bool, copy=True)
    order = np.argsort(-np.asarray(priority, dtype=float), kind="stable")
    planned = run.sum(axis=1)
    for r in range(run.shape[1]):
        left = capacity - float((run[:, r] * gpus).sum())
        for j in order:
            if not run[j, r] and planned[j] < rounds_needed[j] and gpus[j] <= left + 1e-9:
                run[j, r] = True
                planned[j] += 1
                left -= gpus[j]
    load = (run * gpus[:, None]).sum(axis=0)
    return run[:, np.argsort(-load, kind="stable")]


@dataclass
class ShockwaveAllocation(LeaseAllocation):
    """Shockwave's planner; the fields are its tunables. State: the lease (:class:`.lease.LeaseAllocation`),
    the current plan (``plan_jobs``: its job ids, ``plan_run``: their rounds, ``_plan_finishes``: which jobs it
    expects to finish), the round of the plan to run
    next (``_plan_round``), and each solve's wall time (``solve_s``)."""

    #: Round (lease) length in seconds (the thesis runs Shockwave with 360 s rounds).
    lease_s: float = ranged(360.0, 1.0, DAY_S)
    #: Rounds planned ahead in one solve.
    window_rounds: int = ranged(20, 1, 500)
    #: Weight of the finish-time-fairness regulariser (the thesis's and Shockwave's 10).
    ftf_weight: float = ranged(10.0, 0.0, 1e6)
    #: Weight of the makespan regulariser (the thesis's and Shockwave's 1e-1).
    makespan_weight: float = ranged(0.1, 0.0, 1e6)
    #: Predicted rho above which the fairness regulariser applies.
    rho_max: float = ranged(1.0, 0.0, 1e6)
    #: Progress values where log's tangents approximate it.
    log_bases: tuple[float, ...] = field(default=(0.01, 0.2, 0.4, 0.6, 0.8, 1.0),
                                         metadata={"parse": _parse_bases})
    #: Relative optimality gap at which the MILP stops.
    mip_gap: float = ranged(1e-3, 0.0, 1.0)
    #: Branch-and-bound nodes after which a solve stops with the best plan found (a re-plan never ends worse
    #: than the plan it starts from). A node limit, not a time limit, ends the solve so that a run gives the
    #: same plans on a loaded machine as on an idle one: with a 15 s wall-clock limit, runs of the same code
    #: and configuration differed (docs/fidelity.md, "Shockwave in the calibrated world").
    node_limit: int = ranged(500, 1, 10_000_000)
    #: Wall-clock guard on one solve in seconds (the best plan found by then is used). It should not bind
    #: before ``node_limit``: when it does, the run depends on the machine's load.
    time_limit_s: float = ranged(300.0, 0.1, 3600.0)
    #: Start each re-plan from the rest of the previous plan (an incumbent for branch and bound); "false"
    #: solves every plan from scratch.
    warm_start: bool = True
    #: ``paper`` (the Shockwave paper's formulation) or ``sia-artifact`` (the port the Sia thesis ran).
    variant: str = "paper"
    #: sia-artifact: the progress whose log stands for progress 0 in the log's interpolation (the artifact's
    #: 1e-6).
    log_origin: float = ranged(1e-6, 0.0, 0.5, lo_open=True)
    #: sia-artifact: weight per second of the largest remaining time after the window (the artifact's 1e-9).
    makespan_k: float = ranged(1e-9, 0.0, 1e6)
    #: sia-artifact: exponent lambda of an unfair job's priority rho^lambda when the fairness constraints are
    #: infeasible (the artifact's 12).
    priority_power: float = ranged(12.0, 0.0, 1000.0)
    #: sia-artifact: the exponent instead for a job that can finish within a round (the artifact's 100).
    finish_power: float = ranged(100.0, 0.0, 1000.0)
    name: str = "shockwave"

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant '{self.variant}' (one of: {', '.join(VARIANTS)})")
        super().__post_init__()
        self._fair_series: dict[str, list[tuple[float, float]]] = {}
        self.relaxed_solves = 0
        self.plan_jobs: list[str] = []
        self.plan_run = np.zeros((0, 0), dtype=bool)
        self._plan_finishes = np.zeros(0, dtype=bool)
        self._plan_round = 0
        self.solve_s: list[float] = []

    def _outlived(self, ids: list[str]) -> bool:
        """True when a job the plan expected to have finished by now is still here (its estimate was short):
        the rest of the plan gives it nothing, so it is re-planned."""
        done = self.plan_run[:, :self._plan_round].any(axis=1) & ~self.plan_run[:, self._plan_round:].any(axis=1)
        return bool(np.any(done & self._plan_finishes))

    def _rest_of_plan(self, ids: list[str]) -> np.ndarray:
        """The current plan's rounds not yet run, for the jobs in ``ids`` (new jobs: none), padded to the
        window; before the first plan, a plan where nobody runs (:func:`fill_rounds` then fills it)."""
        if not self.plan_jobs:
            return np.zeros((len(ids), self.window_rounds), dtype=bool)
        row = {jid: i for i, jid in enumerate(self.plan_jobs)}
        rest = self.plan_run[:, self._plan_round:]
        out = np.zeros((len(ids), self.window_rounds), dtype=bool)
        width = min(rest.shape[1], self.window_rounds)
        for i, jid in enumerate(ids):
            if jid in row:
                out[i, :width] = rest[row[jid], :width]
        return out

    def describe(self) -> str:
        if self.variant == "sia-artifact":
            return (f"{self.name} (variant=sia-artifact, lease_s={self.lease_s:g}, window_rounds={self.window_rounds}, "
                    f"rho_max={self.rho_max:g}, makespan_k={self.makespan_k:g}, "
                    f"priority_power={self.priority_power:g}, finish_power={self.finish_power:g})")
        return (f"{self.name} (lease_s={self.lease_s:g}, window_rounds={self.window_rounds}, "
                f"ftf_weight={self.ftf_weight:g}, makespan_weight={self.makespan_weight:g}, "
                f"rho_max={self.rho_max:g})")

    def decide(self, view: ClusterView, jobs: list[JobView], capacity: int, plan: Plan) -> list[str]:
        if self.variant == "sia-artifact":
            return self._decide_artifact(view, jobs, capacity, plan)
        ids = [j.job_id for j in jobs]
        if ids != self.plan_jobs or self._plan_round >= self.plan_run.shape[1] or self._outlived(ids):
            est = job_estimates(jobs, capacity)
            solved = plan_window(est, capacity, round_s=self.lease_s, window_rounds=self.window_rounds,
                                 ftf_weight=self.ftf_weight, makespan_weight=self.makespan_weight,
                                 rho_max=self.rho_max, log_bases=self.log_bases, mip_gap=self.mip_gap,
                                 time_limit_s=self.time_limit_s, node_limit=self.node_limit,
                                 start_run=self._rest_of_plan(ids) if self.warm_start else None)
            self.plan_jobs, self.plan_run, self._plan_round = ids, solved.run, 0
            self._plan_finishes = solved.run.sum(axis=1) >= np.ceil(est.remaining_s / self.lease_s - 1e-9)
            self.solve_s.append(solved.solve_s)
            plan.info["shockwave.solve_s"] = solved.solve_s
            plan.info["shockwave.nodes"] = float(solved.nodes)
        column = self.plan_run[:, self._plan_round]
        self._plan_round += 1
        return _fitting(jobs, column, capacity)

    def _decide_artifact(self, view: ClusterView, jobs: list[JobView], capacity: int, plan: Plan) -> list[str]:
        """The sia-artifact variant: record each job's fair-finish value, solve a fresh plan, run its first
        round and give the GPUs it leaves idle to the unplanned jobs with the longest remaining time."""
        ids = {j.job_id for j in jobs}
        for gone in [k for k in self._fair_series if k not in ids]:
            del self._fair_series[gone]
        est = job_estimates(jobs, capacity)
        for j, value in zip(jobs, fair_value(est, capacity), strict=True):
            self._fair_series.setdefault(j.job_id, []).append((view.time_s, float(value)))
        fair = np.array([momentum_average(self._fair_series[j.job_id], view.time_s) for j in jobs])
        solved = plan_window_artifact(est, capacity, fair, round_s=self.lease_s, window_rounds=self.window_rounds,
                                      rho_max=self.rho_max, log_bases=self.log_bases, log_origin=self.log_origin,
                                      makespan_k=self.makespan_k, priority_power=self.priority_power,
                                      finish_power=self.finish_power, mip_gap=self.mip_gap,
                                      time_limit_s=self.time_limit_s, node_limit=self.node_limit)
        self.solve_s.append(solved.solve_s)
        self.relaxed_solves += int(solved.relaxed)
        plan.info["shockwave.solve_s"] = solved.solve_s
        plan.info["shockwave.nodes"] = float(solved.nodes)
        plan.info["shockwave.relaxed"] = float(solved.relaxed)
        column = work_conserving_fill(solved.run[:, 0], est.gpus, capacity, est.remaining_s)
        return _fitting(jobs, column, capacity)


def _fitting(jobs: list[JobView], column: np.ndarray, capacity: int) -> list[str]:
    """The jobs a plan's round runs, in job order, while their GPUs fit: the MILP's rounds fit, so this only
    guards against its tolerances."""
    chosen, left = [], capacity
    for i in np.flatnonzero(column):
        if jobs[i].spec.num_gpus <= left:
            chosen.append(jobs[i].job_id)
            left -= jobs[i].spec.num_gpus
    return chosen
