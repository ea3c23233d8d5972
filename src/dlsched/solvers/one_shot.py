"""One-shot solves of an assignment problem: exact MILP, or interior-point LP relaxation plus rounding.

Each call builds the sparse problem afresh and hands it to HiGHS. The rounded relaxation is 10-30x faster
than the MILP at thousands of GPUs and within a hair of the LP bound, because Sia-shaped relaxations are
almost integral. For a model kept across scheduling rounds see :mod:`dlsched.solvers.incremental`.
"""

from __future__ import annotations

import time

import numpy as np

from dlsched.solvers.assignment import AssignmentProblem, AssignmentResult, choice_from_x
from dlsched.solvers.highs import solve_sparse
from dlsched.solvers.near_relaxation import optimum_near_relaxation
from dlsched.solvers.rounding import round_relaxation

#: Solution methods of :func:`solve_assignment`.
METHODS = ("milp", "lp-round", "auto")
#: The loosest MILP gap for which ``milp`` proves the optimum from the relaxation itself: that answer is exact,
#: so a caller asking for a looser gap (POP's sub-problems) keeps HiGHS's incumbent within its gap instead.
EXACT_GAP = 1e-6
#: Partial combinations a ``hint`` may cost before the relaxation is solved after all: the hint saves a solve
#: of about half a millisecond at Sia's 64 GPUs, so it is given about as much.
HINT_STATES = 1_000


def _prices(problem: AssignmentProblem, row_dual: np.ndarray | None) -> np.ndarray | None:
    """The resource rows' duals as non-negative prices (any non-negative prices give a valid bound)."""
    return None if row_dual is None else np.abs(row_dual[problem.num_groups:])


def solve_assignment(problem: AssignmentProblem, method: str = "milp", *, auto_max_options: int = 4000,
                     time_limit_s: float | None = 10.0, mip_rel_gap: float = 1e-6,
                     lp_method: str = "ipm", threads: int = 1,
                     hint: tuple[np.ndarray, np.ndarray] | None = None) -> AssignmentResult:
    """Solve an assignment problem.

    ``milp`` is exact (to ``mip_rel_gap``): the simplex relaxation when it is integral, else the optimum
    found next to it (:func:`~dlsched.solvers.near_relaxation.optimum_near_relaxation`, when ``mip_rel_gap``
    is at most :data:`EXACT_GAP` and few combinations remain), else HiGHS's branch and bound. ``hint`` is
    (resource prices, a feasible choice), e.g. the last round's prices (``AssignmentResult.prices``) and its
    choice carried over: when they prove the optimum within :data:`HINT_STATES` combinations, no LP is
    solved at all (a scheduler's problem changes little between rounds). Every ``milp`` path returns the
    optimum; they differ only where two choices tie exactly, which each breaks its own way.

    ``lp-round`` solves the relaxation (interior point with crossover by default) and rounds it with
    :func:`round_relaxation`; ``auto`` uses the MILP up to ``auto_max_options`` options and the rounded
    relaxation above. A MILP that hits its time limit returns its incumbent, or falls back to the rounded
    relaxation when it has none.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (one of {', '.join(METHODS)})")
    if method == "auto":
        method = "milp" if problem.num_options <= auto_max_options else "lp-round"
    if problem.num_options == 0:
        return AssignmentResult(choice=np.full(problem.num_groups, -1, dtype=np.int64), objective=0.0,
                                bound=0.0, method=method, status="empty", solve_s=0.0)
    t0 = time.perf_counter()
    if (method == "milp" and hint is not None and mip_rel_gap <= EXACT_GAP and len(hint[0]) == problem.num_resources
            and len(hint[1]) == problem.num_groups and problem.is_feasible(hint[1])):
        prices = np.asarray(hint[0], dtype=float)
        near = optimum_near_relaxation(problem, prices, hint[1], max_states=HINT_STATES)
        if near is not None and problem.is_feasible(near):
            value = problem.objective(near)
            return AssignmentResult(choice=near, objective=value, bound=value, method="milp",
                                    status="Optimal (enumerated from the hint's prices)",
                                    solve_s=time.perf_counter() - t0, build_s=0.0, prices=prices)
    t_build = time.perf_counter()
    sparse = problem.to_sparse()
    build_s = time.perf_counter() - t_build
    if method == "milp":
        # The relaxation is almost always integral (every vertex with one fractional job per resource): when
        # the simplex vertex is integral it is the integer optimum, and the branch and bound is skipped.
        lp = solve_sparse(sparse, integer=False, lp_method="simplex", threads=threads)
        if lp.optimal and np.all(np.abs(lp.x - np.round(lp.x)) <= 1e-9):
            choice = choice_from_x(problem, lp.x)
            if problem.is_feasible(choice):
                return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=lp.bound,
                                        method="milp", status="Optimal (integral relaxation)",
                                        solve_s=lp.solve_s, build_s=build_s, iterations=lp.iterations,
                                        prices=_prices(problem, lp.row_dual))
        if lp.optimal and lp.row_dual is not None and mip_rel_gap <= EXACT_GAP:
            # a few groups split: the integer optimum is proved from the relaxation's prices, without HiGHS's
            # branch and bound (its fixed cost is most of a small problem's solve); the enumeration is exhaustive,
            # so the bound is the optimum itself
            t1 = time.perf_counter()
            near = optimum_near_relaxation(problem, np.abs(lp.row_dual[problem.num_groups:]),
                                           round_relaxation(problem, lp.x))
            if near is not None and problem.is_feasible(near):
                return AssignmentResult(choice=near, objective=problem.objective(near), bound=problem.objective(near),
                                        method="milp", status="Optimal (enumerated near the relaxation)",
                                        solve_s=lp.solve_s + time.perf_counter() - t1, build_s=build_s,
                                        iterations=lp.iterations, prices=_prices(problem, lp.row_dual))
        sol = solve_sparse(sparse, integer=True, mip_rel_gap=mip_rel_gap, time_limit_s=time_limit_s,
                           threads=threads)
        choice = choice_from_x(problem, sol.x)
        if not problem.is_feasible(choice):  # no incumbent (time limit): round the relaxation instead
            lp = solve_sparse(sparse, integer=False, lp_method=lp_method, threads=threads)
            choice = round_relaxation(problem, lp.x)
            return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=lp.bound,
                                    method="lp-round", status=f"milp {sol.status}; rounded",
                                    solve_s=sol.solve_s + lp.solve_s, build_s=build_s,
                                    iterations=sol.iterations + lp.iterations)
        return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=sol.bound,
                                method="milp", status=sol.status, solve_s=sol.solve_s, build_s=build_s,
                                iterations=sol.iterations, prices=_prices(problem, lp.row_dual))
    sol = solve_sparse(sparse, integer=False, lp_method=lp_method, time_limit_s=time_limit_s, threads=threads)
    t1 = time.perf_counter()
    choice = round_relaxation(problem, sol.x)
    round_s = time.perf_counter() - t1
    return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=sol.bound,
                            method="lp-round", status=sol.status, solve_s=sol.solve_s + round_s, build_s=build_s,
                            iterations=sol.iterations, info={"round_s": round_s})

