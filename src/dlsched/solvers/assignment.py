"""Assignment problems as sparse matrices: each group (job) picks at most one option (configuration).

An option uses ``size`` units of one resource (a GPU type) and is worth ``value``; resources have
capacities; some options may be forced. This is the shape of Sia-like allocation problems. The module
only describes problems and answers (feasibility, objective, usage); the solves live in
:mod:`dlsched.solvers.one_shot` and :mod:`dlsched.solvers.incremental`. It knows nothing of jobs or GPUs:
the meaning of values and sizes belongs to the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dlsched.solvers.highs import INF, SparseProblem


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
    def forced_mask(self) -> np.ndarray:
        """``forced`` as a bool mask over the options (all False when no option is forced)."""
        if self.forced is None:
            return np.zeros(self.num_options, dtype=bool)
        return self.forced

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
        col_lo = self.forced_mask.astype(float)
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
        forced = np.nonzero(self.forced_mask)[0]
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
    #: Resource prices that proved the choice (the relaxation's duals, or a hint's), for the next round's
    #: ``hint`` of :func:`~dlsched.solvers.one_shot.solve_assignment`; None when no solve gave them.
    prices: np.ndarray | None = None


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
