"""A synthetic stream of Sia-shaped assignment rounds, for tests and the policy-time benchmark.

Each job has configurations on every resource (GPU type): 1, 2, 4 ... GPUs up to a node, then whole nodes,
up to a per-job limit that follows Sia's doubling rule (at most twice what it holds, at least one node);
values follow Sia's transformed objective for concave speed-ups, ``lam - (speed * k**scal / min)**p``.
Between rounds a fraction of the jobs leaves, as many arrive, and a fraction of the others report new goodput
estimates (their value row changes): the churn the thesis measures in figure 4.2. The stream only edits a
:class:`~dlsched.solvers.differential.DifferentialAssignment`; what a value means belongs to the caller.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlsched.solvers.differential import DifferentialAssignment


@dataclass(frozen=True)
class ResourceBlock:
    """One GPU type: how many nodes and GPUs per node."""

    nodes: int
    per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.per_node


def config_sizes(block: ResourceBlock, limit: int) -> np.ndarray:
    """Sia's configurations on one type: powers of two within a node, then whole nodes, up to ``limit``."""
    single = [1 << i for i in range(block.per_node.bit_length()) if (1 << i) <= block.per_node]
    if block.per_node not in single:
        single.append(block.per_node)
    multi = [block.per_node * k for k in range(2, block.nodes + 1) if block.per_node * k <= limit]
    return np.array([s for s in single if s <= max(limit, block.per_node)] + multi, dtype=float)


class ChurnStream:
    """Jobs arriving and leaving a :class:`DifferentialAssignment` round by round (seeded, reproducible)."""

    def __init__(self, blocks: Sequence[ResourceBlock], *, jobs: int, churn: float = 0.05, drift: float = 0.05,
                 seed: int = 0, p: float = -0.5, lam: float = 1.1, max_gpus: int = 64) -> None:
        if not 0.0 <= churn <= 1.0 or not 0.0 <= drift <= 1.0:
            raise ValueError("churn and drift are fractions in [0, 1]")
        self.blocks = list(blocks)
        self.churn = churn
        self.drift = drift
        self.p = p
        self.lam = lam
        self.max_gpus = max_gpus
        self.rng = np.random.default_rng(seed)
        self.problem = DifferentialAssignment([b.gpus for b in self.blocks])
        self._next = 0
        self._params: dict[int, tuple[np.ndarray, float, int]] = {}
        #: Seconds spent inside the problem's edit calls during the last :meth:`step` (not making the options).
        self.edit_s = 0.0
        for _ in range(jobs):
            self._add()

    def _options(self, speed: np.ndarray, scal: float, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        res, size, good = [], [], []
        for r, b in enumerate(self.blocks):
            ks = config_sizes(b, min(limit, self.max_gpus))
            res.append(np.full(len(ks), r))
            size.append(ks)
            good.append(speed[r] * ks ** scal)
        g = np.concatenate(good)
        norm = g / g.min()
        value = (self.lam - norm ** self.p) if self.p < 0 else (norm ** self.p + self.lam)
        return np.concatenate(res), np.concatenate(size), value

    def _add(self) -> None:
        key = self._next
        self._next += 1
        speed = self.rng.uniform(0.5, 3.0, size=len(self.blocks))
        scal = float(self.rng.uniform(0.3, 0.98))
        held = int(self.rng.choice([0, 1, 2, 4, 8, 16, 32], p=[0.4, 0.2, 0.15, 0.1, 0.08, 0.05, 0.02]))
        limit = max(1, 2 * held)
        self._params[key] = (speed, scal, limit)
        options = self._options(speed, scal, limit)
        t0 = time.perf_counter()
        self.problem.add_job(key, *options)
        self.edit_s += time.perf_counter() - t0

    def step(self) -> dict[str, int]:
        """One round's edits: departures, as many arrivals, and drifting goodput rows. Returns their counts."""
        self.edit_s = 0.0
        keys = self.problem.keys()
        n_out = int(self.rng.binomial(len(keys), self.churn)) if keys else 0
        gone = self.rng.choice(len(keys), size=n_out, replace=False) if n_out else np.zeros(0, dtype=np.int64)
        for i in gone.tolist():
            t0 = time.perf_counter()
            self.problem.remove_job(keys[i])
            self.edit_s += time.perf_counter() - t0
            del self._params[keys[i]]
        for _ in range(n_out):
            self._add()
        keys = self.problem.keys()
        n_drift = int(self.rng.binomial(len(keys), self.drift)) if keys else 0
        for i in self.rng.choice(len(keys), size=n_drift, replace=False).tolist():
            speed, scal, limit = self._params[keys[i]]
            speed = speed * self.rng.uniform(0.9, 1.1, size=len(speed))
            self._params[keys[i]] = (speed, scal, limit)
            _, _, value = self._options(speed, scal, limit)
            t0 = time.perf_counter()
            self.problem.set_values(keys[i], value)
            self.edit_s += time.perf_counter() - t0
        return {"departed": n_out, "arrived": n_out, "drifted": n_drift}
