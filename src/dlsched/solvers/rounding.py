"""Rounding an assignment LP relaxation to a feasible choice.

Sia-shaped relaxations are almost integral (a simplex vertex splits at most one group per binding
resource), so rounding the few split groups exactly and filling leftovers greedily lands within a hair of
the LP bound at a fraction of a MILP's cost. Shared by the one-shot ``lp-round`` solve and the incremental
model.
"""

from __future__ import annotations

import numpy as np

from dlsched.solvers.assignment import AssignmentProblem


def round_relaxation(problem: AssignmentProblem, x: np.ndarray, *, exact_groups: int = 8) -> np.ndarray:
    """Turn a fractional LP solution into a feasible choice.

    1. forced options first, then every group the LP assigns integrally (they fit together);
    2. the few groups the LP splits (a simplex vertex splits at most one group per binding resource) are
       decided exactly, by a small branch and bound over their options in the capacity left, when there are
       at most ``exact_groups`` of them; otherwise each, most integral first, takes its largest fractional
       option if it still fits;
    3. leftover capacity is filled greedily: unassigned groups' options in decreasing value order, each taken
       if its group is still free and it fits.
    """
    g, n = problem.num_groups, problem.num_options
    choice = np.full(g, -1, dtype=np.int64)
    left = problem.capacity.astype(float).copy()
    if n == 0:
        return choice
    res, size, grp, value = problem.resource, problem.size, problem.group, problem.value

    def take(o: int) -> bool:
        gi, r = grp[o], res[o]
        if choice[gi] >= 0 or size[o] > left[r] + 1e-9:
            return False
        choice[gi] = o
        left[r] -= size[o]
        return True

    for o in np.nonzero(problem.forced_mask)[0].tolist():
        choice[grp[o]] = o
        left[res[o]] -= size[o]
    order = np.lexsort((-x, grp))
    first = np.ones(n, dtype=bool)
    first[1:] = grp[order[1:]] != grp[order[:-1]]
    best = order[first]  # per group: its option with the largest x
    best = best[(x[best] > 1e-6) & (value[best] > 0)]
    best = best[np.argsort(-x[best], kind="stable")]
    integral = best[x[best] >= 1.0 - 1e-6]
    split = best[x[best] < 1.0 - 1e-6]
    for o in integral.tolist():
        take(o)
    split_groups = [int(grp[o]) for o in split.tolist() if choice[grp[o]] < 0]
    if 0 < len(split_groups) <= exact_groups:
        for o in _best_combination(problem, split_groups, left):
            take(o)
    else:
        for o in split.tolist():
            take(o)
    # step 3: fill leftovers
    free_opts = np.nonzero((choice[grp] < 0) & (value > 0) & (size <= left[res] + 1e-9))[0]
    if len(free_opts):
        for o in free_opts[np.argsort(-value[free_opts], kind="stable")].tolist():
            take(o)
    return choice


def _best_combination(problem: AssignmentProblem, groups: list[int], left: np.ndarray,
                      max_nodes: int = 20_000) -> list[int]:
    """At most one option per group, within ``left``, of greatest total value (branch and bound)."""
    opts = []
    for gi in groups:
        o = np.nonzero((problem.group == gi) & (problem.value > 0) & (problem.size <= left[problem.resource] + 1e-9))[0]
        opts.append(o[np.argsort(-problem.value[o], kind="stable")].tolist())
    top = [problem.value[o[0]] if o else 0.0 for o in opts]
    rest_bound = np.concatenate([np.cumsum(top[::-1])[::-1], [0.0]])
    best_val, best_pick = 0.0, []
    cap = left.copy()
    pick: list[int] = []
    nodes = 0

    def dfs(i: int, val: float) -> None:
        nonlocal best_val, best_pick, nodes
        nodes += 1
        if val > best_val + 1e-12:
            best_val, best_pick = val, list(pick)
        if i == len(opts) or nodes > max_nodes or val + rest_bound[i] <= best_val + 1e-12:
            return
        for o in opts[i]:
            r = problem.resource[o]
            if problem.size[o] <= cap[r] + 1e-9:
                cap[r] -= problem.size[o]
                pick.append(o)
                dfs(i + 1, val + problem.value[o])
                pick.pop()
                cap[r] += problem.size[o]
        dfs(i + 1, val)

    dfs(0, 0.0)
    return best_pick

