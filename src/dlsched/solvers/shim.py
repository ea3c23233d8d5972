"""The thesis's integer shim: from an LP relaxation's weights to a feasible, binary allocation (section 4.4.1).

"For each job, the shim simply picks the configuration with highest weight in the solution to the
LP-relaxation without violating GPU constraints. If it finds no such configuration for the job, it receives
no allocation in this round." Jobs are visited in decreasing order of their largest weight (ties: the more
valuable first), so the jobs the relaxation assigns whole (weight 1, which fit together whenever the
relaxation is feasible) are served before the few it splits. Those whole jobs are taken in one vectorised
step while every job's first choice fits; only the jobs from the first one that does not fit onwards are
visited one at a time, so the shim costs a sort of the positive weights plus a loop over the split jobs.

``fill`` (not in the thesis, off by default) afterwards gives jobs left without an allocation their most
valuable option that still fits. ``upgrade`` (not in the thesis, off by default) then spends the GPUs still
free: a job may move to a more valuable option (a larger count, or another type) when the GPUs it adds fit in
what is left, best gain per added GPU first, for a few passes. Each pass is one vectorised filter of the
options that gain and fit now, plus a loop over at most one candidate per job; the allocation stays feasible
and its objective can only grow.
"""

from __future__ import annotations

import numpy as np

#: Weights at or below this are zero (first-order methods leave tiny positive values).
WEIGHT_EPS = 1e-6


def shim(value: np.ndarray, size: np.ndarray, resource: np.ndarray, row_of: np.ndarray, capacity: np.ndarray,
         x: np.ndarray, num_rows: int, *, fill: bool = False, upgrade: bool = False) -> np.ndarray:
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
    if upgrade:
        for _ in range(UPGRADE_PASSES):
            if not _upgrade(value, size, resource, row_of, left, pick):
                break
    return pick


#: At most this many upgrade passes (each changes at most one option per job; later passes use what it freed).
UPGRADE_PASSES = 4


def _upgrade(value: np.ndarray, size: np.ndarray, resource: np.ndarray, row_of: np.ndarray, left: np.ndarray,
             pick: np.ndarray) -> int:
    """One pass moving jobs to more valuable options that fit in the free GPUs; the number of jobs moved.

    A job's candidate is its option with the highest gain per GPU it takes from what is left (its own GPUs are
    given back when it moves within a type; a move to another type frees them afterwards). Candidates are
    visited best ratio first and re-checked against what is left at that moment, so the result is feasible.
    """
    has = pick >= 0
    cur = np.where(has, pick, 0)
    cur_val = np.where(has, value[cur], 0.0)
    cur_res = np.where(has, resource[cur], -1)
    cur_size = np.where(has, size[cur], 0.0)
    g = row_of
    gain = value - cur_val[g]
    same = resource == cur_res[g]
    need = np.where(same, size - cur_size[g], size)
    cand = np.nonzero((value > 0) & (gain > 1e-12) & (need <= left[resource] + 1e-9))[0]
    if not len(cand):
        return 0
    ratio = gain[cand] / np.maximum(need[cand], 0.5)
    order = cand[np.lexsort((-ratio, g[cand]))]  # by row, best ratio first
    heads = np.ones(len(order), dtype=bool)
    heads[1:] = g[order[1:]] != g[order[:-1]]
    best = order[heads]
    best = best[np.argsort(-(gain[best] / np.maximum(need[best], 0.5)), kind="stable")]
    moved = 0
    for o in best.tolist():
        row = g[o]
        c = pick[row]
        r = resource[o]
        if c >= 0 and value[c] >= value[o]:
            continue
        freed = size[c] if c >= 0 and resource[c] == r else 0.0
        if size[o] - freed > left[r] + 1e-9:
            continue
        if c >= 0:
            left[resource[c]] += size[c]
        left[r] -= size[o]
        pick[row] = o
        moved += 1
    return moved


def _fill(value: np.ndarray, size: np.ndarray, resource: np.ndarray, row_of: np.ndarray, left: np.ndarray,
          pick: np.ndarray) -> None:
    """Jobs without an allocation, most valuable option first, take it if it fits (greedy, in place)."""
    free = np.nonzero((value > 0) & (pick[row_of] < 0) & (size <= left[resource] + 1e-9))[0]
    for o in free[np.argsort(-value[free], kind="stable")].tolist():
        r, g = resource[o], row_of[o]
        if pick[g] < 0 and size[o] <= left[r] + 1e-9:
            pick[g] = o
            left[r] -= size[o]
