"""The exact integer optimum of an assignment problem, found next to its LP relaxation.

A Sia-shaped relaxation is almost integral, and the integer optimum differs from it in a few groups only.
HiGHS's branch and bound proves that at a fixed cost of milliseconds per problem (presolve, root LP, cuts),
which at 64 GPUs is most of a Sia round. The same proof costs a fraction of that when written for this
problem's shape, from the relaxation's resource prices:

For prices ``mu >= 0`` on the resources, every choice ``x`` satisfies
``value(x) <= L(mu) - penalty(x)``, where ``L(mu) = mu @ capacity + sum_g best_g`` with
``best_g = max(0, max_j (value_j - mu[r_j] * size_j))`` over group ``g``'s options, and ``penalty(x)`` sums,
per group, ``best_g`` minus the priced value of what the group picks (0 for no option). So a choice at least
as good as a known feasible one (value ``z``) has ``penalty(x) <= L(mu) - z``: only the options whose own
penalty is within that budget can be in an optimal choice, and only combinations whose penalties sum to
within it. With the relaxation's prices ``L(mu)`` is the LP bound and the budget is the rounding's gap to
it, so a handful of combinations remain; they are enumerated exactly (capacities checked) and the best is
the integer optimum. The bound holds for any prices, so a wrong sign or an inexact dual from HiGHS only
makes the search larger, never wrong. When the combinations would exceed ``max_states`` the caller solves
the MILP instead.
"""

from __future__ import annotations

import numpy as np

from dlsched.solvers.assignment import AssignmentProblem

#: Slack on the penalty budget and on capacities, far above float error and far below any value gap that
#: a scheduler's objective resolves.
TOL = 1e-9


def optimum_near_relaxation(problem: AssignmentProblem, prices: np.ndarray, incumbent: np.ndarray, *,
                            max_states: int = 50_000) -> np.ndarray | None:
    """The optimal choice (one option per group at most, -1 for none), or None past ``max_states``.

    ``prices`` are non-negative resource prices (the relaxation's duals give the tightest budget);
    ``incumbent`` is a feasible choice (the rounded relaxation), whose value sets the budget. Options with
    a non-positive value are never picked unless forced, as :class:`AssignmentProblem` says. (A search
    that first tried a fraction of the budget, doubling it until the best found was within it, was slower
    on Sia's rounds: the rounding's gap is small already.)
    """
    grp, res, size, value = problem.group, problem.resource, problem.size, problem.value
    g, nres = problem.num_groups, problem.num_resources
    mu = np.maximum(np.asarray(prices, dtype=float), 0.0)
    forced = problem.forced_mask
    base = np.full(g, -1, dtype=np.int64)
    fo = np.nonzero(forced)[0]
    base[grp[fo]] = fo
    cap = problem.capacity - np.bincount(res[fo], weights=size[fo], minlength=nres)
    free = base < 0
    live = np.nonzero(~forced & free[grp] & (value > 0) & (size <= cap[res] + TOL))[0]
    live = live[np.argsort(grp[live], kind="stable")]  # contiguous per group, in option order
    priced = value[live] - mu[res[live]] * size[live]
    best = np.zeros(g)
    if len(live):
        lg = grp[live]
        heads = np.nonzero(np.r_[True, lg[1:] != lg[:-1]])[0]
        best[lg[heads]] = np.maximum(np.maximum.reduceat(priced, heads), 0.0)
    bound = float(mu @ cap + best[free].sum())
    tol = TOL * max(1.0, abs(bound))
    full = bound - (problem.objective(incumbent) - float(value[fo].sum())) + tol
    if full < 0:
        return None  # the incumbent is above the bound: inconsistent input
    found = _Space(problem, base, cap, free, live, best, best[grp[live]] - priced, max_states).search(full, tol)
    return found[0] if isinstance(found, tuple) else None


_TOO_MANY = object()


class _Space:
    """One problem's alternatives with their penalties, searched within a budget."""

    def __init__(self, problem: AssignmentProblem, base: np.ndarray, cap: np.ndarray, free: np.ndarray,
                 live: np.ndarray, best: np.ndarray, pen: np.ndarray, max_states: int) -> None:
        self.problem, self.base, self.cap, self.free = problem, base, cap, free
        self.live, self.best, self.pen, self.max_states = live, best, pen, max_states

    def search(self, budget: float, tol: float) -> tuple[np.ndarray, float] | object | None:
        """The best choice whose penalty is within ``budget`` and its value (forced options left out), None
        when there is none, or ``_TOO_MANY`` past ``max_states`` partial combinations."""
        problem, cap, free, best = self.problem, self.cap, self.free, self.best
        res, size, value, nres = problem.resource, problem.size, problem.value, problem.num_resources
        g = problem.num_groups
        choice = self.base.copy()
        keep = self.pen <= budget
        live, pen = self.live[keep], self.pen[keep]
        lg = problem.group[live]
        # per free group its alternatives: no option (when its penalty fits) and its options within the
        # budget; a group with one alternative is decided, the others are enumerated
        idle_ok = free & (best <= budget)
        count = np.bincount(lg, minlength=g) + idle_ok
        if np.any(free & (count == 0)):
            return None
        single = (count == 1) & free
        sole = np.nonzero(single[lg])[0]
        choice[lg[sole]] = live[sole]  # the single alternative is an option (else the group stays at -1)
        cap = cap - np.bincount(res[live[sole]], weights=size[live[sole]], minlength=nres)
        budget -= float(pen[sole].sum()) + float(best[single & idle_ok].sum())
        if np.any(cap < -TOL) or budget < -tol:
            return None
        fixed_value = float(value[live[sole]].sum())
        open_groups = np.nonzero(free & (count > 1))[0]
        if len(open_groups) == 0:
            return choice, fixed_value
        starts = np.searchsorted(lg, open_groups, side="left")
        ends = np.searchsorted(lg, open_groups, side="right")
        # the partial combinations: penalty, usage, value, and per level the parent and the option taken
        p_acc = np.zeros(1)
        u_acc = np.zeros((1, nres))
        v_acc = np.zeros(1)
        levels: list[tuple[np.ndarray, np.ndarray]] = []
        for gi, a0, a1 in zip(open_groups.tolist(), starts.tolist(), ends.tolist(), strict=True):
            opts, alt_pen = live[a0:a1], pen[a0:a1]
            if idle_ok[gi]:
                opts = np.concatenate([[-1], opts])
                alt_pen = np.concatenate([[best[gi]], alt_pen])
            m, a = len(p_acc), len(opts)
            if m * a > self.max_states:
                return _TOO_MANY
            take = opts >= 0
            picked = opts[take]
            use = np.zeros((a, nres))
            use[np.nonzero(take)[0], res[picked]] = size[picked]
            gain = np.zeros(a)
            gain[take] = value[picked]
            new_p = (p_acc[:, None] + alt_pen[None, :]).ravel()
            new_u = (u_acc[:, None, :] + use[None, :, :]).reshape(m * a, nres)
            idx = np.nonzero((new_p <= budget) & np.all(new_u <= cap + TOL, axis=1))[0]
            if len(idx) == 0:
                return None
            p_acc, u_acc = new_p[idx], new_u[idx]
            v_acc = (v_acc[:, None] + gain[None, :]).ravel()[idx]
            levels.append((idx // a, opts[idx % a]))
        at = int(np.argmax(v_acc))
        top = float(v_acc[at])
        for gi, (parent, chosen) in zip(reversed(open_groups.tolist()), reversed(levels), strict=True):
            choice[gi] = int(chosen[at])
            at = int(parent[at])
        return choice, fixed_value + top
