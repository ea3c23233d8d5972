"""A warm-started assignment LP kept in one HiGHS model and edited between scheduling rounds.

Consecutive rounds of a scheduler change little (a few jobs arrive or leave, values drift), so editing the
previous model and re-solving from its basis is much cheaper than building and solving a new one.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence

import highspy
import numpy as np

from dlsched.solvers.assignment import AssignmentProblem, AssignmentResult
from dlsched.solvers.highs import INF, model_status, new_highs
from dlsched.solvers.rounding import round_relaxation


class IncrementalAssignment:
    """An assignment LP kept in one HiGHS model and edited between solves (continual optimisation).

    Options and groups carry stable keys. Each :meth:`solve` deletes the columns and rows of keys that are
    gone, appends the new ones, overwrites every column's cost and bounds and the resource capacities, and
    re-solves the relaxation with dual/primal simplex from the previous basis, then rounds it like
    :func:`solve_assignment`'s ``lp-round``. Consecutive rounds of a scheduler change little, so a re-solve
    takes a few hundred simplex iterations instead of thousands.

    The integer problem is never solved here; for exact answers use :func:`solve_assignment` with ``milp``.
    """

    def __init__(self, num_resources: int, threads: int = 1) -> None:
        self.num_resources = num_resources
        self.h = new_highs(threads)
        self.h.setOptionValue("solver", "simplex")
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        # resource rows come first and never move
        lo = np.full(num_resources, -INF)
        hi = np.zeros(num_resources)
        self.h.addRows(num_resources, lo, hi, 0, np.zeros(num_resources, dtype=np.int32),
                       np.zeros(0, dtype=np.int32), np.zeros(0))
        self.col_keys: list[Hashable] = []
        self.row_keys: list[Hashable] = []  # group rows, after the resource rows
        self._col_index: dict[Hashable, int] = {}
        self._row_index: dict[Hashable, int] = {}
        self.solves = 0

    def _delete(self, keep_cols: np.ndarray, keep_rows: np.ndarray) -> None:
        if not keep_cols.all():
            gone = np.nonzero(~keep_cols)[0].astype(np.int32)
            self.h.deleteCols(len(gone), gone)  # the remaining columns keep their order
            self.col_keys = [k for k, keep in zip(self.col_keys, keep_cols, strict=True) if keep]
            self._col_index = {k: i for i, k in enumerate(self.col_keys)}
        if not keep_rows.all():
            gone = (self.num_resources + np.nonzero(~keep_rows)[0]).astype(np.int32)
            self.h.deleteRows(len(gone), gone)
            self.row_keys = [k for k, keep in zip(self.row_keys, keep_rows, strict=True) if keep]
            self._row_index = {k: i for i, k in enumerate(self.row_keys)}

    def solve(self, problem: AssignmentProblem, option_keys: Sequence[Hashable],
              group_keys: Sequence[Hashable]) -> AssignmentResult:
        """Edit the model to ``problem`` (options and groups named by the keys) and solve the relaxation."""
        t0 = time.perf_counter()
        n = problem.num_options
        if len(option_keys) != n or len(group_keys) != problem.num_groups:
            raise ValueError("one key per option and per group is required")
        want_cols = set(option_keys)
        want_rows = set(group_keys)
        keep_cols = np.fromiter((k in want_cols for k in self.col_keys), dtype=bool, count=len(self.col_keys))
        keep_rows = np.fromiter((k in want_rows for k in self.row_keys), dtype=bool, count=len(self.row_keys))
        self._delete(keep_cols, keep_rows)
        # new group rows
        new_groups = [k for k in group_keys if k not in self._row_index]
        if new_groups:
            m = len(new_groups)
            self.h.addRows(m, np.full(m, -INF), np.ones(m), 0, np.zeros(m, dtype=np.int32),
                           np.zeros(0, dtype=np.int32), np.zeros(0))
            for k in new_groups:
                self._row_index[k] = len(self.row_keys)
                self.row_keys.append(k)
        row_of_group = np.fromiter((self.num_resources + self._row_index[k] for k in group_keys), dtype=np.int64,
                                   count=problem.num_groups)
        # new columns
        is_new = np.fromiter((k not in self._col_index for k in option_keys), dtype=bool, count=n)
        new_idx = np.nonzero(is_new)[0]
        if len(new_idx):
            m = len(new_idx)
            starts = np.arange(0, 2 * m, 2, dtype=np.int32)
            index = np.empty(2 * m, dtype=np.int32)
            r_res = problem.resource[new_idx].astype(np.int32)
            r_grp = row_of_group[problem.group[new_idx]].astype(np.int32)
            index[0::2] = r_res  # resource rows have lower indices, so each column's entries stay sorted
            index[1::2] = r_grp
            vals = np.empty(2 * m)
            vals[0::2] = problem.size[new_idx]
            vals[1::2] = 1.0
            self.h.addCols(m, problem.value[new_idx], np.zeros(m), np.ones(m), 2 * m, starts, index, vals)
            for i in new_idx.tolist():
                k = option_keys[i]
                self._col_index[k] = len(self.col_keys)
                self.col_keys.append(k)
        cols = np.fromiter((self._col_index[k] for k in option_keys), dtype=np.int32, count=n)
        old = ~is_new
        if old.any():
            # sizes of kept columns must not change (the key names the option); costs and bounds may
            sel = cols[old]
            self.h.changeColsCost(len(sel), sel, problem.value[old])
        self.h.changeColsBounds(n, cols, problem.forced_mask.astype(float), np.ones(n))
        self.h.changeRowsBounds(  # type: ignore[attr-defined]  # exists on Highs, missing from highspy's stubs
            self.num_resources, np.arange(self.num_resources, dtype=np.int32),
            np.full(self.num_resources, -INF), problem.capacity.astype(float))
        build_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.h.run()
        solve_s = time.perf_counter() - t1
        text, optimal = model_status(self.h)
        info = self.h.getInfo()
        sol = self.h.getSolution()
        xs = np.asarray(sol.col_value, dtype=float) if sol.value_valid else np.zeros(len(self.col_keys))
        x = xs[cols] if len(xs) else np.zeros(n)
        t2 = time.perf_counter()
        choice = round_relaxation(problem, x)
        round_s = time.perf_counter() - t2
        self.solves += 1
        bound = float(info.objective_function_value) if optimal else float("nan")
        return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=bound,
                                method="incremental", status=text, solve_s=solve_s + round_s, build_s=build_s,
                                iterations=int(info.simplex_iteration_count), info={"round_s": round_s})
