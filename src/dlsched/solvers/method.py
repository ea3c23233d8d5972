"""What every warm-started method of :mod:`dlsched.solvers.continual` shares: the round's answer, the time
budget, and the frame of a round (relax, then the thesis's integer shim, or keep the last allocation when out of
time).

Kept apart from the methods so that other round-by-round solvers (POP, :mod:`dlsched.solvers.pop`) answer with
the same :class:`RoundResult` without depending on the methods themselves.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from dlsched.solvers.differential import DifferentialAssignment
from dlsched.solvers.shim import shim


@dataclass
class RoundResult:
    """One round's answer: per row the slot it gets (-1: none), and what it cost."""

    pick: np.ndarray
    objective: float
    #: The relaxation's value where the method knows it (nan otherwise).
    bound: float
    #: Time to reflect the round's edits in the method's own state (model edits).
    sync_s: float
    solve_s: float
    shim_s: float
    info: dict[str, float] = field(default_factory=dict)
    #: True when the method ran out of its time budget and the round kept the previous allocation (repaired).
    fallback: bool = False

    @property
    def total_s(self) -> float:
        return self.sync_s + self.solve_s + self.shim_s


class OutOfTime(Exception):
    """A method passed its round's time budget."""


class Method(ABC):
    """A warm-started solver of a differential assignment problem (subclasses keep their own state).

    :meth:`solve` takes an optional time budget: a method that has not finished within it stops, and the
    round keeps the previous round's allocation, repaired: departed jobs are dropped, the others keep their
    option while it still exists and fits (most valuable first), arrivals get nothing. The result says so
    (``fallback``), and the method's state stays a valid warm start for the next round.
    """

    name = "method"

    def __init__(self, problem: DifferentialAssignment, *, fill: bool = False, upgrade: bool = False) -> None:
        self.problem = problem
        self.fill = fill
        #: After the shim (and fill), move jobs to more valuable options that fit in the GPUs left free.
        self.upgrade = upgrade
        self._deadline: float | None = None
        #: The last allocation: per job key, the offset of its option within its row.
        self._last: dict[Hashable, int] = {}

    @abstractmethod
    def relax(self) -> tuple[np.ndarray, float, float, float, dict[str, float]]:
        """The relaxation's weights per slot, its value (nan if unknown), sync and solve seconds, info."""

    def _check(self) -> None:
        """Raise :class:`OutOfTime` past the deadline (iterative methods call it between steps)."""
        if self._deadline is not None and time.perf_counter() > self._deadline:
            raise OutOfTime

    def _remaining(self) -> float | None:
        """Seconds left (None: no budget); raises :class:`OutOfTime` when none are."""
        self._check()
        return None if self._deadline is None else max(1e-3, self._deadline - time.perf_counter())

    def solve(self, budget_s: float | None = None) -> RoundResult:
        t_start = time.perf_counter()
        self._deadline = None if budget_s is None else t_start + budget_s
        p = self.problem
        try:
            x, bound, sync_s, solve_s, info = self.relax()
        except OutOfTime:
            t0 = time.perf_counter()
            pick = self.repair_last()
            self._remember(pick)
            return RoundResult(pick=pick, objective=p.objective(pick), bound=float("nan"), sync_s=0.0,
                               solve_s=t0 - t_start, shim_s=time.perf_counter() - t0, info={"fallback": 1.0},
                               fallback=True)
        finally:
            self._deadline = None
        t0 = time.perf_counter()
        pick = shim(p.value, p.size, p.resource, p.row_of, p.capacity, x, p.num_rows, fill=self.fill,
                     upgrade=self.upgrade)
        shim_s = time.perf_counter() - t0
        self._remember(pick)
        return RoundResult(pick=pick, objective=p.objective(pick), bound=bound, sync_s=sync_s, solve_s=solve_s,
                           shim_s=shim_s, info=info)

    def _remember(self, pick: np.ndarray) -> None:
        p = self.problem
        rows = np.nonzero(pick >= 0)[0]
        offsets = pick[rows] - p.row_start[rows]
        self._last = {p.row_key(int(r)): int(o) for r, o in zip(rows.tolist(), offsets.tolist(), strict=True)}

    def repair_last(self) -> np.ndarray:
        """The previous allocation on today's problem: departures dropped, the rest kept while it fits."""
        p = self.problem
        pick = np.full(p.num_rows, -1, dtype=np.int64)
        left = p.capacity.astype(float).copy()
        kept = []
        for key, off in self._last.items():
            if key not in p:
                continue
            row = p.row_of_key(key)
            slot = int(p.row_start[row]) + off
            if slot < p.row_stop(row) and p.value[slot] > 0:
                kept.append((-float(p.value[slot]), slot, row))
        for _, slot, row in sorted(kept):
            r = p.resource[slot]
            if p.size[slot] <= left[r] + 1e-9:
                pick[row] = slot
                left[r] -= p.size[slot]
        return pick
