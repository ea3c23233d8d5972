"""Who a Hops plan considers, and how much each counts (section 3.6): the service window, the sensitivity
adjustment that widens it for a plan of fragments, and the priority weights of equation 11.

Pure functions of the queue and its numbers, apart from the planner (:mod:`dlsched.policies.hops.allocation`)
that calls them, so they can be read and tested against the paper on their own.
"""

from __future__ import annotations

import numpy as np

from dlsched.core import JobView


def service_window(queue: list[JobView], capacity: int) -> list[JobView]:
    """The head of ``queue`` whose minimum requirements first add up to ``capacity`` (boundary included)."""
    total, out = 0, []
    for j in queue:
        if total >= capacity:
            break
        out.append(j)
        total += j.spec.lower_gpus
    return out


#: Smallest weight relative to the largest: below it a MILP solver's tolerances cannot tell a weight from 0,
#: and a job with free GPUs in reach would be left out for nothing.
MIN_RELATIVE_WEIGHT = 1e-6


def sensitivity_adjustment(queue: list[JobView], window_len: int, rho: list[float], idle_gpus: int) -> list[int]:
    """Section 3.6's sensitivity adjustment for a plan of fragments: the queue positions to plan.

    ``rho_set`` is the mean sensitivity of the jobs in the window (the first ``window_len``), ``rho_queue``
    that of the whole queue. While ``rho_set > rho_queue``, jobs past the window boundary are judged in
    queue order: one whose sensitivity is below ``rho_queue`` and whose minimum requirement is less than the
    idle GPUs joins the window (``rho_set`` is then recomputed); the traversal stops when ``rho_set <=
    rho_queue`` or the queue ends.
    """
    chosen = list(range(window_len))
    if not queue or window_len == 0:
        return chosen
    rho_queue = float(np.mean(rho))
    total = float(sum(rho[:window_len]))
    i = window_len
    while total / len(chosen) > rho_queue and i < len(queue):
        if rho[i] < rho_queue and queue[i].spec.lower_gpus < idle_gpus:
            chosen.append(i)
            total += rho[i]
        i += 1
    return chosen


def priority_weights(priorities: np.ndarray, lam: float) -> np.ndarray:
    """``(prior + bias) ** lam`` with the paper's bias rule (equation 11).

    Computed in logarithms and scaled so that the largest weight is 1 (scaling every weight by one factor
    does not change the optimum), then floored at :data:`MIN_RELATIVE_WEIGHT`; large ``lam`` would otherwise
    overflow or vanish in floating point.
    """
    if len(priorities) == 0:
        return priorities
    bias = 0.0 if np.all(priorities > 0) else abs(float(priorities.min())) + 0.01
    logs = lam * np.log(priorities + bias)
    return np.maximum(np.exp(logs - logs.max()), MIN_RELATIVE_WEIGHT)
