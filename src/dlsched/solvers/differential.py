"""A differential interface to an assignment problem: edits cost what they change (thesis section 4.3.2).

Rebuilding a scheduler's problem every round passes over every option of every job even when a few jobs
arrived or left. :class:`DifferentialAssignment` keeps the problem in growable slot arrays instead: a job's
options occupy a contiguous run of slots, new jobs are appended, removed jobs leave tombstones (value 0,
upper bound 0) that a compaction drops once they outnumber the live slots, so every edit costs time in the
size of the edit (amortised) and never a pass over all options:

* :meth:`~DifferentialAssignment.add_job` appends the job's columns and its row;
* :meth:`~DifferentialAssignment.remove_job` tombstones them;
* :meth:`~DifferentialAssignment.set_capacity` changes one resource count;
* :meth:`~DifferentialAssignment.set_values` rewrites one job's goodput row.

Solvers that keep state of their own (a HiGHS model, a warm start) subscribe with
:meth:`~DifferentialAssignment.subscribe` and hear of removals, value changes, capacity changes and
compactions; appended slots they read themselves (everything at or past the slots they last saw is new).
Slot order is row order (rows are appended and compaction keeps order), so per-job reductions are
``np.*.reduceat`` over :attr:`row_start`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol

import numpy as np

from dlsched.solvers.assignment import AssignmentProblem

#: Compaction waits until tombstones outnumber live slots and there are at least this many of them.
MIN_COMPACT = 4096


class Subscriber(Protocol):
    """What a stateful solver hears from the problem (all indices are slots or rows before the edit)."""

    def on_remove(self, row: int, start: int, stop: int) -> None: ...

    def on_values(self, start: int, stop: int) -> None: ...

    def on_capacity(self, resource: int) -> None: ...

    def on_compact(self, keep_slots: np.ndarray, keep_rows: np.ndarray) -> None: ...


class DifferentialAssignment:
    """An assignment problem (each job picks at most one option within resource capacities), edited in place.

    Slot arrays (``value``, ``size``, ``resource``, ``upper``, ``row_of``) are valid up to :attr:`num_slots`;
    row arrays (``row_start``, ``row_alive``) up to :attr:`num_rows`. Dead slots have value 0 and upper 0,
    dead rows have no live slot, so solvers may treat the arrays as the whole problem.
    """

    def __init__(self, capacity: Sequence[float] | np.ndarray, *, compact_ratio: float = 1.0) -> None:
        self.capacity = np.asarray(capacity, dtype=float).copy()
        if self.capacity.ndim != 1 or np.any(self.capacity < 0):
            raise ValueError("capacity must be a vector of non-negative counts")
        self.num_resources = len(self.capacity)
        self.compact_ratio = float(compact_ratio)
        self._value = np.zeros(64)
        self._size = np.ones(64)
        self._resource = np.zeros(64, dtype=np.int64)
        self._upper = np.zeros(64)
        self._row_of = np.zeros(64, dtype=np.int64)
        self._row_start = np.zeros(16, dtype=np.int64)
        self._row_alive = np.zeros(16, dtype=bool)
        self._row_key: list[Hashable] = []
        self.num_slots = 0
        self.num_rows = 0
        self.live_slots = 0
        self._where: dict[Hashable, int] = {}  # job key -> row
        self._subscribers: list[Subscriber] = []
        #: Count of edits (add, remove, values, capacity) since construction; for tests and profiles.
        self.edits = 0
        self.compactions = 0

    # -- views ---------------------------------------------------------------------------------------------
    @property
    def value(self) -> np.ndarray:
        return self._value[: self.num_slots]

    @property
    def size(self) -> np.ndarray:
        return self._size[: self.num_slots]

    @property
    def resource(self) -> np.ndarray:
        return self._resource[: self.num_slots]

    @property
    def upper(self) -> np.ndarray:
        return self._upper[: self.num_slots]

    @property
    def row_of(self) -> np.ndarray:
        return self._row_of[: self.num_slots]

    @property
    def row_start(self) -> np.ndarray:
        return self._row_start[: self.num_rows]

    @property
    def row_alive(self) -> np.ndarray:
        return self._row_alive[: self.num_rows]

    def row_stop(self, row: int) -> int:
        return int(self._row_start[row + 1]) if row + 1 < self.num_rows else self.num_slots

    def row_key(self, row: int) -> Hashable:
        return self._row_key[row]

    def row_of_key(self, key: Hashable) -> int:
        return self._where[key]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    def __len__(self) -> int:
        return len(self._where)

    def keys(self) -> list[Hashable]:
        return list(self._where)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    # -- edits ---------------------------------------------------------------------------------------------
    def add_job(self, key: Hashable, resource: Sequence[int] | np.ndarray, size: Sequence[float] | np.ndarray,
                value: Sequence[float] | np.ndarray) -> int:
        """Append a job's options (its columns) and its row; returns the row. Costs O(its options)."""
        if key in self._where:
            raise KeyError(f"job {key!r} is already in the problem")
        res = np.asarray(resource, dtype=np.int64)
        sz = np.asarray(size, dtype=float)
        val = np.asarray(value, dtype=float)
        k = len(res)
        if not (len(sz) == len(val) == k):
            raise ValueError("resource, size and value need one entry per option")
        if k == 0:
            raise ValueError("a job needs at least one option")
        if (res.min() < 0 or res.max() >= self.num_resources):
            raise ValueError("option resource out of range")
        if sz.min() <= 0:
            raise ValueError("option sizes must be positive")
        self._grow_slots(self.num_slots + k)
        self._grow_rows(self.num_rows + 1)
        row, s0 = self.num_rows, self.num_slots
        sl = slice(s0, s0 + k)
        self._resource[sl] = res
        self._size[sl] = sz
        self._value[sl] = val
        self._upper[sl] = 1.0
        self._row_of[sl] = row
        self._row_start[row] = s0
        self._row_alive[row] = True
        self._row_key.append(key)
        self._where[key] = row
        self.num_slots += k
        self.num_rows += 1
        self.live_slots += k
        self.edits += 1
        return row

    def remove_job(self, key: Hashable) -> None:
        """Tombstone a job's columns and row. Costs O(its options) (plus an amortised compaction)."""
        row = self._where.pop(key)
        start, stop = int(self._row_start[row]), self.row_stop(row)
        self._value[start:stop] = 0.0
        self._upper[start:stop] = 0.0
        self._row_alive[row] = False
        self.live_slots -= stop - start
        self.edits += 1
        for s in self._subscribers:
            s.on_remove(row, start, stop)
        dead = self.num_slots - self.live_slots
        if dead >= MIN_COMPACT and dead > self.compact_ratio * self.live_slots:
            self.compact()

    def set_values(self, key: Hashable, value: Sequence[float] | np.ndarray) -> None:
        """Rewrite one job's goodput row (the value of each of its options). Costs O(its options)."""
        row = self._where[key]
        start, stop = int(self._row_start[row]), self.row_stop(row)
        val = np.asarray(value, dtype=float)
        if len(val) != stop - start:
            raise ValueError(f"job {key!r} has {stop - start} options, got {len(val)} values")
        self._value[start:stop] = val
        self.edits += 1
        for s in self._subscribers:
            s.on_values(start, stop)

    def set_capacity(self, resource: int, count: float) -> None:
        """Change how many units of one resource there are (GPUs of a type joining or leaving). O(1)."""
        if not 0 <= resource < self.num_resources:
            raise ValueError("resource out of range")
        if count < 0:
            raise ValueError("capacity must be non-negative")
        self.capacity[resource] = float(count)
        self.edits += 1
        for s in self._subscribers:
            s.on_capacity(resource)

    def compact(self) -> None:
        """Drop tombstones (one pass, amortised over the removals that made them); subscribers remap."""
        keep_slots = np.nonzero(self.upper > 0)[0]
        keep_rows = np.nonzero(self.row_alive)[0]
        new_row = np.full(self.num_rows, -1, dtype=np.int64)
        new_row[keep_rows] = np.arange(len(keep_rows))
        lengths = np.diff(np.append(self.row_start, self.num_slots))[keep_rows]
        for name in ("_value", "_size", "_resource", "_upper", "_row_of"):
            arr = getattr(self, name)
            arr[: len(keep_slots)] = arr[keep_slots]
        self._row_of[: len(keep_slots)] = new_row[self._row_of[: len(keep_slots)]]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else np.zeros(0, dtype=np.int64)
        self._row_start[: len(keep_rows)] = starts
        self._row_alive[: len(keep_rows)] = True
        self._row_key = [self._row_key[r] for r in keep_rows.tolist()]
        self._where = {k: i for i, k in enumerate(self._row_key)}
        self.num_slots = len(keep_slots)
        self.num_rows = len(keep_rows)
        self.compactions += 1
        for s in self._subscribers:
            s.on_compact(keep_slots, keep_rows)

    # -- whole-problem reads (one pass; for baselines, checks and tests) -------------------------------------
    def snapshot(self) -> tuple[AssignmentProblem, np.ndarray, np.ndarray]:
        """The live problem as an :class:`AssignmentProblem`, with its options' slots and its groups' rows."""
        slots = np.nonzero(self.upper > 0)[0]
        rows = np.nonzero(self.row_alive)[0]
        group_of_row = np.full(self.num_rows, -1, dtype=np.int64)
        group_of_row[rows] = np.arange(len(rows))
        problem = AssignmentProblem(group=group_of_row[self.row_of[slots]], resource=self.resource[slots],
                                    size=self.size[slots], value=self.value[slots], capacity=self.capacity.copy(),
                                    num_groups=len(rows))
        return problem, slots, rows

    def choice_to_slots(self, choice: np.ndarray, slots: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """A snapshot's per-group choice as a per-row slot choice (-1: none)."""
        out = np.full(self.num_rows, -1, dtype=np.int64)
        picked = choice >= 0
        out[rows[picked]] = slots[choice[picked]]
        return out

    def objective(self, pick: np.ndarray) -> float:
        """Total value of a per-row slot choice."""
        sel = pick[pick >= 0]
        return float(self.value[sel].sum())

    def usage(self, pick: np.ndarray) -> np.ndarray:
        sel = pick[pick >= 0]
        return np.bincount(self.resource[sel], weights=self.size[sel], minlength=self.num_resources)

    def is_feasible(self, pick: np.ndarray) -> bool:
        """Per-row slot choice: live slots of their own row only, capacities respected."""
        if len(pick) != self.num_rows:
            return False
        rows = np.nonzero(pick >= 0)[0]
        sel = pick[rows]
        if np.any(sel >= self.num_slots) or np.any(self.upper[sel] <= 0) or np.any(self.row_of[sel] != rows):
            return False
        return bool(np.all(self.usage(pick) <= self.capacity + 1e-9))

    # -- growth --------------------------------------------------------------------------------------------
    def _grow_slots(self, need: int) -> None:
        if need <= len(self._value):
            return
        cap = max(need, 2 * len(self._value))
        for name in ("_value", "_size", "_resource", "_upper", "_row_of"):
            arr = getattr(self, name)
            new = np.zeros(cap, dtype=arr.dtype)
            new[: self.num_slots] = arr[: self.num_slots]
            setattr(self, name, new)

    def _grow_rows(self, need: int) -> None:
        if need <= len(self._row_start):
            return
        cap = max(need, 2 * len(self._row_start))
        for name in ("_row_start", "_row_alive"):
            arr = getattr(self, name)
            new = np.zeros(cap, dtype=arr.dtype)
            new[: self.num_rows] = arr[: self.num_rows]
            setattr(self, name, new)
