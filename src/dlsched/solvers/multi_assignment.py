"""Assignment problems whose options use several resources at once (Hops's location-specific configurations).

Each group (job) picks at most one option; an option takes ``amount`` units from each of several resources
(GPUs on several servers), given as a sparse resources x options matrix; resources have capacities. This
generalises :class:`~dlsched.solvers.assignment.AssignmentProblem`, where an option holds one resource. The
solve is a MILP in HiGHS with a relative gap and a time limit (Hops, section 3.6: a 0.05% gap for large
clusters).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dlsched.solvers.highs import INF, SparseProblem, solve_sparse


@dataclass
class MultiResourceProblem:
    """Maximise the value of picked options; at most one per group; usage within every capacity."""

    group: np.ndarray
    #: resources x options, the units each option takes from each resource.
    usage: sp.csc_matrix
    value: np.ndarray
    capacity: np.ndarray
    num_groups: int
    #: (a, b) resource pairs that are interchangeable: a solution may as well load ``a`` at least as much as
    #: ``b``, so that is required (symmetry breaking; it cuts no value from the optimum).
    ordered: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        self.group = np.asarray(self.group, dtype=np.int64)
        self.value = np.asarray(self.value, dtype=float)
        self.capacity = np.asarray(self.capacity, dtype=float)
        self.usage = sp.csc_matrix(self.usage)
        if self.usage.shape != (len(self.capacity), len(self.group)) or len(self.value) != len(self.group):
            raise ValueError("usage must be resources x options and value one entry per option")

    @property
    def num_options(self) -> int:
        return len(self.group)

    def to_sparse(self) -> SparseProblem:
        """Rows: one per group (sum <= 1), then one per resource (usage <= capacity)."""
        n, g = self.num_options, self.num_groups
        pick = sp.csc_matrix((np.ones(n), (self.group, np.arange(n))), shape=(g, n))
        blocks = [pick, self.usage]
        if self.ordered:
            a = np.array([p[0] for p in self.ordered])
            b = np.array([p[1] for p in self.ordered])
            usage = self.usage.tocsr()
            blocks.append(sp.csr_matrix(usage[a] - usage[b]))
        A = sp.vstack(blocks, format="csc")
        row_lo = np.concatenate([np.full(g + len(self.capacity), -INF), np.zeros(len(self.ordered))])
        row_hi = np.concatenate([np.ones(g), self.capacity, np.full(len(self.ordered), INF)])
        return SparseProblem(c=self.value.copy(), A=A, row_lo=row_lo, row_hi=row_hi, col_lo=np.zeros(n),
                             col_hi=np.ones(n), integer=np.ones(n, dtype=bool), maximize=True)

    def choice_of(self, x: np.ndarray) -> np.ndarray:
        """Per group the option with ``x > 0.5`` (-1: none)."""
        choice = np.full(self.num_groups, -1, dtype=np.int64)
        for o in np.nonzero(x > 0.5)[0]:
            if choice[self.group[o]] < 0:
                choice[self.group[o]] = o
        return choice

    def is_feasible(self, choice: np.ndarray) -> bool:
        picked = choice[choice >= 0]
        if np.any(self.group[picked] != np.nonzero(choice >= 0)[0]):
            return False
        used = np.asarray(self.usage[:, picked].sum(axis=1)).ravel() if len(picked) else np.zeros(len(self.capacity))
        return bool(np.all(used <= self.capacity + 1e-9))

    def objective(self, choice: np.ndarray) -> float:
        return float(self.value[choice[choice >= 0]].sum())


@dataclass
class MultiResourceResult:
    choice: np.ndarray
    objective: float
    status: str
    solve_s: float
    #: The solver's upper bound on the optimum (nan when not solved).
    bound: float = float("nan")
    #: The wall-clock time limit stopped the solve (the plan then depends on the machine's speed and load).
    time_limited: bool = False


def solve_multi_assignment(problem: MultiResourceProblem, *, mip_rel_gap: float = 5e-4,
                           time_limit_s: float | None = 10.0, method: str = "milp",
                           round_gap: float = 0.01, node_limit: int | None = None) -> MultiResourceResult:
    """The MILP's answer (``method="milp"``). Branch and bound starts from the better of the greedy plan
    (options by value, largest first, while they fit) and the rounded LP relaxation
    (:func:`lp_rounded_choice`), so a solve stopped by the time limit is never worse than either.
    ``method="lp-round"`` returns the rounded plan itself with the LP's optimum as the bound; ``"auto"`` does
    so when the rounded plan is within ``round_gap`` (relative) of that bound, else solves the MILP.
    ``node_limit`` stops branch and bound after that many nodes (deterministic, unlike ``time_limit_s``);
    the result's ``time_limited`` says whether the wall-clock limit stopped it instead."""
    t0 = time.perf_counter()
    if problem.num_options == 0:
        return MultiResourceResult(np.full(problem.num_groups, -1, dtype=np.int64), 0.0, "empty", 0.0, 0.0)
    if method not in ("milp", "lp-round", "auto"):
        raise ValueError(f"unknown method '{method}'")
    rounded, bound = lp_rounded_choice(problem)
    value = problem.objective(rounded)
    if method == "lp-round" or (method == "auto" and value >= (1.0 - round_gap) * bound):
        return MultiResourceResult(rounded, value, "lp-round", time.perf_counter() - t0, bound)
    greedy = greedy_choice(problem)
    if problem.objective(rounded) > problem.objective(greedy):
        greedy = rounded
    start = np.zeros(problem.num_options)
    start[greedy[greedy >= 0]] = 1.0
    sol = solve_sparse(problem.to_sparse(), integer=True, mip_rel_gap=mip_rel_gap, time_limit_s=time_limit_s,
                       start=start, node_limit=node_limit)
    choice = problem.choice_of(sol.x)
    status = sol.status
    if not problem.is_feasible(choice) or problem.objective(greedy) > problem.objective(choice):
        choice, status = greedy, f"{sol.status}; greedy"
    return MultiResourceResult(choice, problem.objective(choice), status, time.perf_counter() - t0, sol.bound,
                               time_limited="time limit" in sol.status.lower())


def greedy_choice(problem: MultiResourceProblem, fixed: np.ndarray | None = None) -> np.ndarray:
    """Options by value, largest first, each taken when its group has none yet and it fits (after the
    options ``fixed`` already picks, per group, -1 for none)."""
    left = problem.capacity.astype(float).copy()
    choice = np.full(problem.num_groups, -1, dtype=np.int64)
    usage = problem.usage
    if fixed is not None:
        choice = fixed.copy()
        picked = choice[choice >= 0]
        if len(picked):
            left -= np.asarray(usage[:, picked].sum(axis=1)).ravel()
    order = np.argsort(-problem.value, kind="stable")
    order = order[(problem.value[order] > 0) & (choice[problem.group[order]] < 0)]  # groups still open
    if not usage.has_canonical_format:  # a column may name a row twice: numpy's fancy indexing handles that
        for o in order.tolist():
            if choice[problem.group[o]] >= 0:
                continue
            rows = usage.indices[usage.indptr[o]:usage.indptr[o + 1]]
            amounts = usage.data[usage.indptr[o]:usage.indptr[o + 1]]
            if np.all(left[rows] >= amounts - 1e-9):
                left[rows] -= amounts
                choice[problem.group[o]] = o
        return choice
    # the same walk on Python floats (the same IEEE arithmetic, without numpy's cost per small slice)
    free = left.tolist()
    indptr, indices, data = usage.indptr.tolist(), usage.indices.tolist(), usage.data.tolist()
    group, taken = problem.group.tolist(), (choice >= 0).tolist()
    for o in order.tolist():
        g = group[o]
        if taken[g]:
            continue
        lo, hi = indptr[o], indptr[o + 1]
        if all(free[indices[e]] >= data[e] - 1e-9 for e in range(lo, hi)):
            for e in range(lo, hi):
                free[indices[e]] -= data[e]
            choice[g] = o
            taken[g] = True
    return choice


def lp_rounded_choice(problem: MultiResourceProblem) -> tuple[np.ndarray, float]:
    """The LP relaxation rounded down, then completed greedily; with the LP's optimum, a bound on the MILP's.

    A vertex of the relaxation has at most as many fractional groups as the problem has resource rows, so
    on problems with many groups and few resources (Hops's ILP over server classes) keeping the options at
    1 and filling what the fractional ones leave with :func:`greedy_choice` loses little.
    """
    sol = solve_sparse(problem.to_sparse(), integer=False, lp_method="simplex")
    if not sol.optimal:
        return greedy_choice(problem), float("nan")
    whole = np.nonzero(sol.x > 1.0 - 1e-6)[0]
    choice = np.full(problem.num_groups, -1, dtype=np.int64)
    choice[problem.group[whole]] = whole
    if not problem.is_feasible(choice):
        return greedy_choice(problem), sol.objective
    return greedy_choice(problem, choice), sol.objective
