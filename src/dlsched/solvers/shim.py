"""The thesis's integer shim: from an LP relaxation's weights to a feasible, binary allocation (section 4.4.1).

"For each job, the shim simply picks the configuration with highest weight in the solution to the
LP-relaxation without violating GPU constraints. If it finds no such configuration for the job, it receives
no allocation in this round." Jobs are visited in decreasing order of their largest weight (ties: the more
valuable first), so the jobs the relaxation assigns whole (weight 1, which fit together whenever the
relaxation is feasible) are served before the few it splits. Those whole jobs are taken in one vectorised
step while every job's first choice fits; only the jobs from the first one that does not fit onwards are
visited one at a time, so the shim costs a sort of the positive weights plus a loop over the split jobs.

``fill`` (not in the thesis, off by default) afterwards gives jobs left without an allocation their most
valuable option that still fits.
"""

from __future__ import annotations

import numpy as np

#: Weights at or below this are zero (first-order methods leave tiny positive values).
WEIGHT_EPS = 1e-6


def shim(value: np.ndarray, size: np.ndarray, resource: np.ndarray, row_of: np.ndarray, capacity: np.ndarray,
         x: np.ndarray, num_rows: int, *, fill: bool = False) -> np.ndarray:
    """Per row the slot it gets (-1: none); feasible for ``capacity`` whatever ``x`` is.

    Slots with non-positive value are never picked (they add nothing and a dead slot has value 0).
    """
    pick = np.full(num_rows, -1, dtype=np.int64)
    left = capacity.astype(float).copy()
    cand = np.nonzero((x > WEIGHT_EPS) & (value > 0))[0]
    if len(cand):
        order = cand[np.lexsort((-x[cand], row_of[cand]))]  # by row, largest weight first
        first = np.ones(len(order), dtype=bool)
        first[1:] = row_of[order[1:]] != row_of[order[:-1]]
        heads = np.nonzero(first)[0]
        top = order[heads]  # each row's highest-weight option
        job_order = np.lexsort((-value[top], -x[top]))
        top_sorted = top[job_order]
        # every job's first choice, in job order, while all of them fit: one cumulative sum per resource
        res = resource[top_sorted]
        sz = size[top_sorted]
        cum = np.zeros(len(top_sorted))
        for r in np.unique(res).tolist():
            m = res == r
            cum[m] = np.cumsum(sz[m])
        fits = cum <= capacity[res] + 1e-9
        bad = np.nonzero(~fits)[0]
        cut = int(bad[0]) if len(bad) else len(top_sorted)
        taken = top_sorted[:cut]
        pick[row_of[taken]] = taken
        np.subtract.at(left, resource[taken], size[taken])
        # the rest one job at a time: its options by decreasing weight, the first that fits
        bounds = np.append(heads, len(order))
        for j in job_order[cut:].tolist():
            for o in order[bounds[j]:bounds[j + 1]].tolist():
                r = resource[o]
                if size[o] <= left[r] + 1e-9:
                    pick[row_of[o]] = o
                    left[r] -= size[o]
                    break
    if fill:
        _fill(value, size, resource, row_of, left, pick)
    return pick


def _fill(value: np.ndarray, size: np.ndarray, resource: np.ndarray, row_of: np.ndarray, left: np.ndarray,
          pick: np.ndarray) -> None:
    """Jobs without an allocation, most valuable option first, take it if it fits (greedy, in place)."""
    free = np.nonzero((value > 0) & (pick[row_of] < 0) & (size <= left[resource] + 1e-9))[0]
    for o in free[np.argsort(-value[free], kind="stable")].tolist():
        r, g = resource[o], row_of[o]
        if pick[g] < 0 and size[o] <= left[r] + 1e-9:
            pick[g] = o
            left[r] -= size[o]
