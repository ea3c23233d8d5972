"""Sparse LP/MILP problems handed to HiGHS whole (no commercial solver, no modelling layer).

:class:`SparseProblem` holds a linear program as numpy vectors and one ``scipy.sparse`` matrix and passes it
to HiGHS in one call (``passModel``); :func:`solve_sparse` solves it as a MILP or as an LP (simplex or
interior point). Building the problem this way costs milliseconds where per-variable modelling layers cost
more than the solve itself. Everything that talks to ``highspy`` directly for a whole problem lives here;
the assignment problems built on top live in :mod:`dlsched.solvers.assignment`.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

INF = highspy.kHighsInf


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
    #: Branch-and-bound nodes a MILP solve explored (0 for an LP).
    nodes: int = 0
    #: An LP's row duals (HiGHS's signs), when it has them; None for a MILP.
    row_dual: np.ndarray | None = None


_banner_silenced = False


def _first_highs() -> highspy.Highs:
    """The process's first HiGHS instance, built with the C-level stdout pointed at /dev/null.

    HiGHS prints its banner to file descriptor 1 when the first instance is built, before any option can
    switch output off; on stdout it would corrupt ``--format json`` and piped tables.
    """
    global _banner_silenced
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    _banner_silenced = True
    return h


def new_highs(threads: int = 1, time_limit_s: float | None = None) -> highspy.Highs:
    """A silent HiGHS instance (one thread by default, so runs are reproducible and share a core fairly)."""
    h = highspy.Highs() if _banner_silenced else _first_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", int(threads))
    if time_limit_s is not None:
        h.setOptionValue("time_limit", float(time_limit_s))
    return h


def model_status(h: highspy.Highs) -> tuple[str, bool]:
    """The model status as text, and whether it is proven optimal."""
    st = h.getModelStatus()
    text = h.modelStatusToString(st)
    return text, st == highspy.HighsModelStatus.kOptimal


def solve_sparse(problem: SparseProblem, *, integer: bool = True, lp_method: str = "ipm", crossover: bool = True,
                 mip_rel_gap: float = 1e-6, time_limit_s: float | None = None, threads: int = 1,
                 start: np.ndarray | None = None, node_limit: int | None = None) -> Solution:
    """Solve with HiGHS: as a MILP when ``integer`` (and the problem has integer columns), else as an LP.

    ``lp_method`` is ``"ipm"`` (interior point; ``crossover`` gives a vertex) or ``"simplex"``.
    A solve that stops early (time limit) returns the best feasible point with ``optimal`` False.
    ``start`` is a feasible point of a MILP (one value per column) that branch and bound starts from as its
    incumbent: a policy that re-plans a slightly changed problem hands in its previous plan, so the search
    prunes with a good bound from the first node and a time limit never leaves it worse than that plan.
    ``node_limit`` stops branch and bound after that many nodes: a work limit that, unlike a time limit,
    stops every run of the same problem at the same point (one thread), whatever else the machine is doing.
    """
    h = new_highs(threads, time_limit_s)
    is_mip = integer and problem.integer is not None and bool(np.any(problem.integer))
    if is_mip:
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
        # The root reduced-cost heuristic costs most of the time on small assignment problems (measured: 2.5x
        # slower solves) and never changed an optimum there; branch and bound still proves optimality.
        h.setOptionValue("mip_heuristic_run_root_reduced_cost", False)
        if node_limit is not None:
            h.setOptionValue("mip_max_nodes", int(node_limit))
    else:
        h.setOptionValue("solver", "ipm" if lp_method == "ipm" else "simplex")
        if lp_method == "ipm":
            h.setOptionValue("run_crossover", "on" if crossover else "off")
    h.passModel(problem.to_highs_lp(relax=not is_mip))
    if start is not None and is_mip:
        if start.shape != (problem.num_cols,):
            raise ValueError(f"start has {start.shape} values, the problem {problem.num_cols} columns")
        incumbent = highspy.HighsSolution()
        incumbent.col_value = [float(v) for v in start]
        incumbent.value_valid = True
        h.setSolution(incumbent)
    t0 = time.perf_counter()
    h.run()
    dt = time.perf_counter() - t0
    text, optimal = model_status(h)
    sol = h.getSolution()
    info = h.getInfo()
    if sol.value_valid:
        x = np.asarray(sol.col_value, dtype=float)
    else:
        x = np.zeros(problem.num_cols)
    nodes = 0
    if is_mip:
        bound = float(info.mip_dual_bound)
        iters = int(info.simplex_iteration_count)
        nodes = int(info.mip_node_count)
    else:
        bound = float(info.objective_function_value) if optimal else float("nan")
        iters = int(info.simplex_iteration_count) + int(info.ipm_iteration_count)
    obj = float(problem.c @ x + problem.offset)
    row_dual = np.asarray(sol.row_dual, dtype=float) if not is_mip and sol.dual_valid else None
    return Solution(x=x, objective=obj, status=text, bound=bound, solve_s=dt, iterations=iters, optimal=optimal,
                    nodes=nodes, row_dual=row_dual)

