"""The exact optimum of a tiny assignment problem by enumeration: the ground truth solver tests check against."""

from __future__ import annotations

import itertools

import numpy as np

from dlsched.solvers import AssignmentProblem


def brute_force(problem: AssignmentProblem) -> float:
    """Best objective over every combination (tiny problems only)."""
    per_group = [[-1] + [int(o) for o in np.nonzero(problem.group == g)[0]] for g in range(problem.num_groups)]
    best = -np.inf
    for combo in itertools.product(*per_group):
        choice = np.array(combo, dtype=np.int64)
        if problem.is_feasible(choice):
            best = max(best, problem.objective(choice))
    return best
