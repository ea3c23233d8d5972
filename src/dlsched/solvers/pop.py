"""POP-k: the problem split at random into k sub-problems solved in parallel (the thesis's baseline, [67]).

Jobs are assigned to one of k sub-problems at random when first seen and stay there while they live; each
resource's capacity is split as evenly as whole units allow (remainders to randomly chosen parts). Each
sub-problem is solved exactly as a MILP (HiGHS; its relaxation first, since an integral vertex ends the
search) in worker processes, and the allocations are combined. A machine with fewer cores than k cannot show
k-way parallelism, so each round reports both the measured wall time and the critical path (the slowest
sub-problem's build and solve, as measured in its worker): the wall time POP would have with k cores.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Hashable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from dlsched.solvers.assignment import AssignmentProblem
from dlsched.solvers.differential import DifferentialAssignment
from dlsched.solvers.method import RoundResult
from dlsched.solvers.one_shot import solve_assignment


def _solve_part(args: tuple[AssignmentProblem, float | None, float]) -> tuple[np.ndarray, float]:
    """One sub-problem in a worker: its choice and the seconds it took there."""
    problem, time_limit_s, gap = args
    t0 = time.perf_counter()
    res = solve_assignment(problem, "milp", time_limit_s=time_limit_s, mip_rel_gap=gap)
    return res.choice, time.perf_counter() - t0


def split_capacity(capacity: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """A (k, resources) array of whole-unit capacities summing to ``capacity``, as even as possible."""
    cap = np.floor(capacity).astype(np.int64)
    out = np.tile(cap // k, (k, 1))
    for r, extra in enumerate((cap % k).tolist()):
        out[rng.choice(k, size=extra, replace=False), r] += 1
    return out.astype(float)


class POP:
    """POP-k over a :class:`DifferentialAssignment` (jobs keep their sub-problem while they live)."""

    def __init__(self, problem: DifferentialAssignment, k: int = 16, *, workers: int = 2, seed: int = 0,
                 time_limit_s: float | None = None, mip_rel_gap: float = 1e-4) -> None:
        if k < 1:
            raise ValueError("POP needs at least one sub-problem")
        self.problem = problem
        self.k = k
        self.name = f"pop-{k}"
        self.workers = workers
        self.time_limit_s = time_limit_s
        self.mip_rel_gap = mip_rel_gap
        self.rng = np.random.default_rng(seed)
        self._part: dict[Hashable, int] = {}
        self._pool: ProcessPoolExecutor | None = None
        #: Per part its GPUs of each type, drawn again only when the cluster's counts change.
        self._caps: np.ndarray | None = None
        self.last_critical_s = 0.0

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def _parts_of(self, rows: np.ndarray) -> np.ndarray:
        p = self.problem
        out = np.empty(len(rows), dtype=np.int64)
        for i, r in enumerate(rows.tolist()):
            key = p.row_key(r)
            part = self._part.get(key)
            if part is None:
                part = int(self.rng.integers(self.k))
                self._part[key] = part
            out[i] = part
        live = set(p.keys())
        if len(self._part) > 2 * len(live) + 1024:  # forget departed jobs now and then (amortised)
            self._part = {key: v for key, v in self._part.items() if key in live}
        return out

    def solve(self, budget_s: float | None = None) -> RoundResult:
        """One round; ``budget_s`` (if given) bounds each sub-problem's MILP search (its best answer then)."""
        t0 = time.perf_counter()
        limit = self.time_limit_s if budget_s is None else budget_s
        p = self.problem
        full, slots, rows = p.snapshot()
        part_of_group = self._parts_of(rows)
        if self._caps is None or not np.array_equal(self._caps.sum(axis=0), np.floor(p.capacity)):
            self._caps = split_capacity(p.capacity, self.k, self.rng)  # GPUs stay in their part, too
        caps = self._caps
        part_of_opt = part_of_group[full.group]
        subs, maps = [], []
        for i in range(self.k):
            groups = np.nonzero(part_of_group == i)[0]
            opts = np.nonzero(part_of_opt == i)[0]
            local = np.full(full.num_groups, -1, dtype=np.int64)
            local[groups] = np.arange(len(groups))
            subs.append((AssignmentProblem(group=local[full.group[opts]], resource=full.resource[opts],
                                           size=full.size[opts], value=full.value[opts], capacity=caps[i],
                                           num_groups=len(groups)), limit, self.mip_rel_gap))
            maps.append((groups, opts))
        if self.workers > 1:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
            answers = list(self._pool.map(_solve_part, subs))
        else:
            answers = [_solve_part(s) for s in subs]
        choice = np.full(full.num_groups, -1, dtype=np.int64)
        for (groups, opts), (sub_choice, _) in zip(maps, answers, strict=True):
            got = sub_choice >= 0
            choice[groups[got]] = opts[sub_choice[got]]
        pick = p.choice_to_slots(choice, slots, rows)
        wall = time.perf_counter() - t0
        critical = max((s for _, s in answers), default=0.0)
        self.last_critical_s = critical
        return RoundResult(pick=pick, objective=p.objective(pick), bound=float("nan"), sync_s=0.0, solve_s=wall,
                           shim_s=0.0, info={"critical_path_s": critical, "parts": float(self.k)})
