"""Sparse LP/MILP problems solved with HiGHS, and the assignment problems schedulers build on them.

Two layers:

* :class:`SparseProblem` holds a linear program as numpy vectors and one ``scipy.sparse`` matrix and hands it
  to HiGHS whole (``passModel``); :func:`solve_sparse` solves it as a MILP or as an LP (simplex or interior
  point). Building the problem this way costs milliseconds where per-variable modelling layers cost more than
  the solve itself.
* :class:`AssignmentProblem` is the shape of Sia-like allocation problems: groups (jobs) each choose at most
  one option (configuration); an option uses ``size`` units of one resource (a GPU type) and is worth
  ``value``; resources have capacities; some options may be forced. :func:`solve_assignment` solves it
  exactly (MILP), or solves the LP relaxation and rounds it (:func:`round_relaxation`), which at thousands of
  GPUs is 10-30x faster and within a hair of the LP bound because the relaxation is almost integral.
  :class:`IncrementalAssignment` keeps one HiGHS model across rounds and edits it (columns of departed groups
  deleted, new ones added, costs and bounds changed) so each re-solve starts from the last basis.

The module knows nothing of jobs or GPUs; the meaning of values and sizes belongs to the caller.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse as sp

INF = highspy.kHighsInf

#: Solution methods of :func:`solve_assignment`.
METHODS = ("milp", "lp-round", "auto")


# ---------------------------------------------------------------------------------------------------------
# generic sparse problems
# ---------------------------------------------------------------------------------------------------------
@dataclass
class SparseProblem:
    """``max``/``min`` of ``c @ x + offset`` s.t. ``row_lo <= A @ x <= row_hi``, ``col_lo <= x <= col_hi``."""

    c: np.ndarray
    A: sp.csc_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    #: True for integer columns; None means a pure LP.
    integer: np.ndarray | None = None
    maximize: bool = True
    offset: float = 0.0

    @property
    def num_cols(self) -> int:
        return len(self.c)

    @property
    def num_rows(self) -> int:
        return len(self.row_lo)

    def to_highs_lp(self, *, relax: bool = False) -> highspy.HighsLp:
        """The problem as a ``HighsLp`` (integrality dropped when ``relax``)."""
        A = self.A.tocsc() if not sp.isspmatrix_csc(self.A) else self.A
        lp = highspy.HighsLp()
        lp.num_col_ = int(self.num_cols)
        lp.num_row_ = int(self.num_rows)
        lp.col_cost_ = np.ascontiguousarray(self.c, dtype=np.float64)
        lp.col_lower_ = np.ascontiguousarray(self.col_lo, dtype=np.float64)
        lp.col_upper_ = np.ascontiguousarray(self.col_hi, dtype=np.float64)
        lp.row_lower_ = np.ascontiguousarray(self.row_lo, dtype=np.float64)
        lp.row_upper_ = np.ascontiguousarray(self.row_hi, dtype=np.float64)
        lp.offset_ = float(self.offset)
        lp.sense_ = highspy.ObjSense.kMaximize if self.maximize else highspy.ObjSense.kMinimize
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_ = int(self.num_cols)
        lp.a_matrix_.num_row_ = int(self.num_rows)
        lp.a_matrix_.start_ = np.ascontiguousarray(A.indptr, dtype=np.int32)
        lp.a_matrix_.index_ = np.ascontiguousarray(A.indices, dtype=np.int32)
        lp.a_matrix_.value_ = np.ascontiguousarray(A.data, dtype=np.float64)
        if self.integer is not None and not relax and bool(np.any(self.integer)):
            kint, kcont = highspy.HighsVarType.kInteger, highspy.HighsVarType.kContinuous
            lp.integrality_ = [kint if flag else kcont for flag in self.integer]
        return lp


@dataclass
class Solution:
    """What a solve returned: the column values, objective, status and cost."""

    x: np.ndarray
    objective: float
    status: str
    #: Best bound known (dual bound of a MILP, the LP optimum of a relaxation); nan if unknown.
    bound: float
    solve_s: float
    iterations: int = 0
    optimal: bool = True


def new_highs(threads: int = 1, time_limit_s: float | None = None) -> highspy.Highs:
    """A silent HiGHS instance (one thread by default, so runs are reproducible and share a core fairly)."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", int(threads))
    if time_limit_s is not None:
        h.setOptionValue("time_limit", float(time_limit_s))
    return h


def _status(h: highspy.Highs) -> tuple[str, bool]:
    st = h.getModelStatus()
    text = h.modelStatusToString(st)
    return text, st == highspy.HighsModelStatus.kOptimal


def solve_sparse(problem: SparseProblem, *, integer: bool = True, lp_method: str = "ipm", crossover: bool = True,
                 mip_rel_gap: float = 1e-6, time_limit_s: float | None = None, threads: int = 1) -> Solution:
    """Solve with HiGHS: as a MILP when ``integer`` (and the problem has integer columns), else as an LP.

    ``lp_method`` is ``"ipm"`` (interior point; ``crossover`` gives a vertex) or ``"simplex"``.
    A solve that stops early (time limit) returns the best feasible point with ``optimal`` False.
    """
    h = new_highs(threads, time_limit_s)
    is_mip = integer and problem.integer is not None and bool(np.any(problem.integer))
    if is_mip:
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
        # The root reduced-cost heuristic costs most of the time on small assignment problems (measured: 2.5x
        # slower solves) and never changed an optimum there; branch and bound still proves optimality.
        h.setOptionValue("mip_heuristic_run_root_reduced_cost", False)
    else:
        h.setOptionValue("solver", "ipm" if lp_method == "ipm" else "simplex")
        if lp_method == "ipm":
            h.setOptionValue("run_crossover", "on" if crossover else "off")
    h.passModel(problem.to_highs_lp(relax=not is_mip))
    t0 = time.perf_counter()
    h.run()
    dt = time.perf_counter() - t0
    text, optimal = _status(h)
    sol = h.getSolution()
    info = h.getInfo()
    if sol.value_valid:
        x = np.asarray(sol.col_value, dtype=float)
    else:
        x = np.zeros(problem.num_cols)
    if is_mip:
        bound = float(info.mip_dual_bound)
        iters = int(info.simplex_iteration_count)
    else:
        bound = float(info.objective_function_value) if optimal else float("nan")
        iters = int(info.simplex_iteration_count) + int(info.ipm_iteration_count)
    obj = float(problem.c @ x + problem.offset)
    return Solution(x=x, objective=obj, status=text, bound=bound, solve_s=dt, iterations=iters, optimal=optimal)


# ---------------------------------------------------------------------------------------------------------
# assignment problems
# ---------------------------------------------------------------------------------------------------------
@dataclass
class AssignmentProblem:
    """Each group picks at most one option; options use capacity of one resource; maximise total value.

    ``forced`` options must be picked (at most one per group); the caller makes sure forced options fit.
    Options with a non-positive value are never picked unless forced, so callers may drop them up front.
    """

    group: np.ndarray
    resource: np.ndarray
    size: np.ndarray
    value: np.ndarray
    capacity: np.ndarray
    num_groups: int
    forced: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.group = np.asarray(self.group, dtype=np.int64)
        self.resource = np.asarray(self.resource, dtype=np.int64)
        self.size = np.asarray(self.size, dtype=float)
        self.value = np.asarray(self.value, dtype=float)
        self.capacity = np.asarray(self.capacity, dtype=float)
        n = len(self.group)
        if not (len(self.resource) == len(self.size) == len(self.value) == n):
            raise ValueError("option arrays must have one entry per option")
        if self.forced is None:
            self.forced = np.zeros(n, dtype=bool)
        else:
            self.forced = np.asarray(self.forced, dtype=bool)

    @property
    def num_options(self) -> int:
        return len(self.group)

    @property
    def num_resources(self) -> int:
        return len(self.capacity)

    def to_sparse(self) -> SparseProblem:
        """Rows: one per group (sum <= 1), then one per resource (sum of sizes <= capacity)."""
        n, g = self.num_options, self.num_groups
        rows = np.empty(2 * n, dtype=np.int64)
        rows[0::2] = self.group
        rows[1::2] = g + self.resource
        data = np.empty(2 * n, dtype=float)
        data[0::2] = 1.0
        data[1::2] = self.size
        indptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
        A = sp.csc_matrix((data, rows, indptr), shape=(g + self.num_resources, n))
        row_lo = np.full(g + self.num_resources, -INF)
        row_hi = np.concatenate([np.ones(g), self.capacity])
        col_lo = self.forced.astype(float)
        return SparseProblem(c=self.value.copy(), A=A, row_lo=row_lo, row_hi=row_hi, col_lo=col_lo,
                             col_hi=np.ones(n), integer=np.ones(n, dtype=bool), maximize=True)

    def objective(self, choice: np.ndarray) -> float:
        picked = choice[choice >= 0]
        return float(self.value[picked].sum())

    def usage(self, choice: np.ndarray) -> np.ndarray:
        picked = choice[choice >= 0]
        return np.bincount(self.resource[picked], weights=self.size[picked], minlength=self.num_resources)

    def is_feasible(self, choice: np.ndarray) -> bool:
        """One option per group at most, every forced option picked, capacities respected."""
        picked = choice[choice >= 0]
        if np.any(self.group[picked] != np.nonzero(choice >= 0)[0]):
            return False
        forced = np.nonzero(self.forced)[0]
        if not np.all(choice[self.group[forced]] == forced):
            return False
        return bool(np.all(self.usage(choice) <= self.capacity + 1e-9))


@dataclass
class AssignmentResult:
    """Per group the picked option index (-1: none), with the objective, a bound and solver facts."""

    choice: np.ndarray
    objective: float
    bound: float
    method: str
    status: str
    solve_s: float
    build_s: float = 0.0
    iterations: int = 0
    info: dict[str, float] = field(default_factory=dict)


def choice_from_x(problem: AssignmentProblem, x: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Per group the option with the largest value of ``x`` above ``threshold`` (-1 if none)."""
    choice = np.full(problem.num_groups, -1, dtype=np.int64)
    if problem.num_options == 0:
        return choice
    order = np.lexsort((-x, problem.group))  # by group, largest x first
    first = np.ones(len(order), dtype=bool)
    first[1:] = problem.group[order[1:]] != problem.group[order[:-1]]
    best = order[first]
    keep = x[best] > threshold
    choice[problem.group[best[keep]]] = best[keep]
    return choice


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

    for o in np.nonzero(problem.forced)[0].tolist():
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


def solve_assignment(problem: AssignmentProblem, method: str = "milp", *, auto_max_options: int = 4000,
                     time_limit_s: float | None = 10.0, mip_rel_gap: float = 1e-6,
                     lp_method: str = "ipm", threads: int = 1) -> AssignmentResult:
    """Solve an assignment problem.

    ``milp`` is exact (to ``mip_rel_gap``); ``lp-round`` solves the relaxation (interior point with crossover by
    default) and rounds it with :func:`round_relaxation`; ``auto`` uses the MILP up to ``auto_max_options``
    options and the rounded relaxation above. A MILP that hits its time limit returns its incumbent, or falls
    back to the rounded relaxation when it has none.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (one of {', '.join(METHODS)})")
    if method == "auto":
        method = "milp" if problem.num_options <= auto_max_options else "lp-round"
    if problem.num_options == 0:
        return AssignmentResult(choice=np.full(problem.num_groups, -1, dtype=np.int64), objective=0.0,
                                bound=0.0, method=method, status="empty", solve_s=0.0)
    t0 = time.perf_counter()
    sparse = problem.to_sparse()
    build_s = time.perf_counter() - t0
    if method == "milp":
        # The relaxation is almost always integral (every vertex with one fractional job per resource): when
        # the simplex vertex is integral it is the integer optimum, and the branch and bound is skipped.
        lp = solve_sparse(sparse, integer=False, lp_method="simplex", threads=threads)
        if lp.optimal and np.all(np.abs(lp.x - np.round(lp.x)) <= 1e-9):
            choice = choice_from_x(problem, lp.x)
            if problem.is_feasible(choice):
                return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=lp.bound,
                                        method="milp", status="Optimal (integral relaxation)",
                                        solve_s=lp.solve_s, build_s=build_s, iterations=lp.iterations)
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
                                iterations=sol.iterations)
    sol = solve_sparse(sparse, integer=False, lp_method=lp_method, time_limit_s=time_limit_s, threads=threads)
    t1 = time.perf_counter()
    choice = round_relaxation(problem, sol.x)
    round_s = time.perf_counter() - t1
    return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=sol.bound,
                            method="lp-round", status=sol.status, solve_s=sol.solve_s + round_s, build_s=build_s,
                            iterations=sol.iterations, info={"round_s": round_s})


# ---------------------------------------------------------------------------------------------------------
# warm-started, incrementally edited model
# ---------------------------------------------------------------------------------------------------------
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
        self.h.changeColsBounds(n, cols, problem.forced.astype(float), np.ones(n))
        self.h.changeRowsBounds(self.num_resources, np.arange(self.num_resources, dtype=np.int32),
                                np.full(self.num_resources, -INF), problem.capacity.astype(float))
        build_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.h.run()
        solve_s = time.perf_counter() - t1
        text, optimal = _status(self.h)
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


def random_assignment_problem(num_groups: int, resources: Sequence[tuple[int, int]], *, seed: int = 0,
                              max_size: int = 64, p: float = -0.5, lam: float = 1.1) -> AssignmentProblem:
    """A synthetic Sia-shaped instance, for tests and benchmarks.

    ``resources`` lists (nodes, units per node) per resource; options are powers of two up to a node and whole
    nodes beyond, capped at ``max_size`` and at a random per-group doubling limit. Values follow Sia's
    transformed objective for concave speed-ups: ``lam - (r * G)**p`` for ``p < 0``.
    """
    rng = np.random.default_rng(seed)
    sizes_per_res: list[np.ndarray] = []
    for nodes, per in resources:
        single = [1 << i for i in range(per.bit_length()) if (1 << i) <= per]
        if per not in single:
            single.append(per)
        multi = [per * k for k in range(2, nodes + 1)]
        sizes_per_res.append(np.array([s for s in single + multi if s <= max_size], dtype=float))
    speed = rng.uniform(0.5, 3.0, size=(num_groups, len(resources)))
    scal = rng.uniform(0.3, 0.98, size=num_groups)
    cap = np.array([nodes * per for nodes, per in resources], dtype=float)
    current = rng.choice([0, 1, 2, 4, 8, 16, 32], size=num_groups, p=[0.4, 0.2, 0.15, 0.1, 0.08, 0.05, 0.02])
    grp, res, size, val = [], [], [], []
    for g in range(num_groups):
        limit = max(1, 2 * current[g])
        rows = []
        for r, sizes in enumerate(sizes_per_res):
            ks = sizes[sizes <= max(limit, sizes[0])]
            good = speed[g, r] * ks ** scal[g]
            rows.append((r, ks, good))
        gmin = min(float(good.min()) for _, _, good in rows)
        for r, ks, good in rows:
            norm = good / gmin
            v = (lam - norm ** p) if p < 0 else (norm ** p + lam)
            grp.append(np.full(len(ks), g))
            res.append(np.full(len(ks), r))
            size.append(ks)
            val.append(v)
    cat = np.concatenate
    return AssignmentProblem(group=cat(grp), resource=cat(res), size=cat(size), value=cat(val), capacity=cap,
                             num_groups=num_groups)
