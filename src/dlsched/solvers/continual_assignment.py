"""A warm-started method, or POP, kept in step with the per-round assignment problems a scheduler rebuilds.

:class:`ContinualAssignment` is what an allocation stage holds: it edits a
:class:`~dlsched.solvers.differential.DifferentialAssignment` by what changed since the last round and solves
it with a method of :mod:`dlsched.solvers.continual` or with :class:`~dlsched.solvers.pop.POP`. It lives apart
from both so that neither needs the other.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from dlsched.solvers.assignment import AssignmentProblem, AssignmentResult
from dlsched.solvers.continual import WARM_METHODS
from dlsched.solvers.differential import DifferentialAssignment
from dlsched.solvers.method import Method
from dlsched.solvers.pop import POP


def pop_parts(method: str) -> int | None:
    """K of a ``pop-K`` method name (K >= 1), else None."""
    head, _, k = method.partition("-")
    return int(k) if head == "pop" and k.isdigit() and int(k) >= 1 else None


class ContinualAssignment:
    """A warm-started method kept in step with per-round :class:`AssignmentProblem`\\ s of keyed groups.

    For callers that rebuild their options each round (a scheduler's allocation stage): each :meth:`solve`
    edits the kept :class:`DifferentialAssignment` by what changed since the last round (groups gone,
    groups new or with a different option set, value rows of the others) and solves with the named method.
    Forced options are kept out of the problem: their capacity is taken off and their groups get them.
    """

    def __init__(self, num_resources: int, method: str = "continual", *, fill: bool = False,
                 upgrade: bool = False, prox_steps: int | None = None, prox_eta: float | None = None) -> None:
        k = pop_parts(method)
        if method not in WARM_METHODS and k is None:
            raise ValueError(f"unknown method {method!r} (one of {', '.join(WARM_METHODS)}, or pop-K)")
        if (prox_steps is not None or prox_eta is not None) and method != "continual":
            raise ValueError(f"prox_steps and prox_eta apply to the continual method only, not {method!r}")
        self.problem = DifferentialAssignment(np.zeros(num_resources))
        self.method: Method | POP
        if k is not None:
            # one process: the simulation's policy time is then the sum of the parts; the critical path
            # (the slowest part, POP's time with K cores) is in each round's info
            self.method = POP(self.problem, k, workers=1)
        else:
            tuned = {"prox_steps": prox_steps, "eta": prox_eta}
            kw: dict[str, Any] = {name: value for name, value in tuned.items() if value is not None}
            self.method = WARM_METHODS[method](self.problem, fill=fill, upgrade=upgrade, **kw)
        self._sig: dict[Hashable, bytes] = {}

    def solve(self, problem: AssignmentProblem, group_keys: Sequence[Hashable], signatures: Sequence[bytes],
              budget_s: float | None = None) -> AssignmentResult:
        """``signatures[g]`` names group ``g``'s option set (same bytes: same options in the same order)."""
        t0 = time.perf_counter()
        if len(group_keys) != problem.num_groups or len(signatures) != problem.num_groups:
            raise ValueError("one key and one signature per group are required")
        store = self.problem
        forced = problem.forced_mask
        order = np.argsort(problem.group, kind="stable")
        bounds = np.searchsorted(problem.group[order], np.arange(problem.num_groups + 1))
        used = np.bincount(problem.resource[forced], weights=problem.size[forced], minlength=problem.num_resources)
        cap = np.maximum(0.0, problem.capacity - used)
        forced_group = np.zeros(problem.num_groups, dtype=bool)
        forced_group[problem.group[forced]] = True
        member: list[tuple[int, Hashable, np.ndarray]] = []
        seen = set()
        for g, key in enumerate(group_keys):
            opts = order[bounds[g]:bounds[g + 1]]
            if forced_group[g] or len(opts) == 0:
                continue
            seen.add(key)
            if key in store and self._sig[key] == signatures[g]:
                row = store.row_of_key(key)
                start = int(store.row_start[row])
                if not np.array_equal(store.value[start:start + len(opts)], problem.value[opts]):
                    store.set_values(key, problem.value[opts])
            else:
                if key in store:
                    store.remove_job(key)
                store.add_job(key, problem.resource[opts], problem.size[opts], problem.value[opts])
                self._sig[key] = signatures[g]
            member.append((g, key, opts))
        for key in [k for k in store.keys() if k not in seen]:
            store.remove_job(key)
            del self._sig[key]
        for r in range(problem.num_resources):
            if store.capacity[r] != cap[r]:
                store.set_capacity(r, float(cap[r]))
        build_s = time.perf_counter() - t0
        res = self.method.solve(budget_s)
        choice = np.full(problem.num_groups, -1, dtype=np.int64)
        fo = np.nonzero(forced)[0]
        choice[problem.group[fo]] = fo
        for g, key, opts in member:
            row = store.row_of_key(key)
            slot = int(res.pick[row])
            if slot >= 0:
                choice[g] = opts[slot - int(store.row_start[row])]
        return AssignmentResult(choice=choice, objective=problem.objective(choice), bound=res.bound,
                                method=self.method.name, status="fallback" if res.fallback else "shim",
                                solve_s=res.total_s, build_s=build_s,
                                info={"shim_s": res.shim_s, **res.info})
