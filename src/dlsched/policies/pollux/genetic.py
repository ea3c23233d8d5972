"""Pollux's genetic search over allocation matrices (GPUs of each job on each virtual node).

The search is Pollux's, vectorised with numpy over the whole population (about 100 individuals, 100
generations): single-point crossover over jobs, Pollux's three-step mutation (reset a job to its current
allocation, zero some entries, grow some entries into free capacity), and its repair (at most one
distributed job per node, per-job replica and node limits, node capacity with lower-attained-service jobs
first, minimum replicas). Survival keeps the best distinct individuals of parents and offspring: Pollux runs
pymoo's NSGA-II with a second objective it then ignores (it takes the best-fitness solution), so a
single-objective elitist GA is the equivalent and avoids pinning pymoo.

The fitness is a power mean of the jobs' speedups (see :mod:`dlsched.policies.pollux.allocation`)::

    FITNESS_p(A) = ( 1/J * sum_j (SPEEDUP_j(A_j) + 1e-3) ** p ) ** (1/p)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Pollux adds this to every speedup before the power mean, so a job without GPUs has a finite term.
SPEEDUP_EPS = 1e-3
#: Integer type of allocation matrices (GPUs of one job on one node); small types keep the search in cache.
STATE_DTYPE = np.int16


@dataclass
class AllocationProblem:
    """One round's search problem over allocation matrices (GPUs of each job on each virtual node).

    ``speedup[j, n, r]`` is job j's speedup on ``r`` GPUs over ``n`` nodes (0 where it cannot run);
    ``base[j, v]`` is the current allocation and ``cell_max[j, v]`` bounds the GPUs job j may take on virtual
    node v (0 on GPU types it refuses). The public methods take and return populations as arrays
    ``[individual, job, vnode]``; inside, the search keeps them as ``[vnode, job, individual]`` so that every
    reduction runs over long contiguous rows (several times faster in numpy).
    """

    speedup: np.ndarray
    base: np.ndarray
    capacity: np.ndarray
    cell_max: np.ndarray
    min_replicas: np.ndarray
    max_replicas: np.ndarray
    restart_factor: np.ndarray
    p: float = -1.0
    #: Pollux scales speedups by the dominant share of a replica times the node count (a constant).
    scale: float = 1.0
    max_nodes: int = 16
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def __post_init__(self) -> None:
        self.num_jobs, self.num_nodes = self.base.shape
        self.base = np.asarray(self.base).astype(STATE_DTYPE)
        self.capacity = np.asarray(self.capacity).astype(STATE_DTYPE)
        self.cell_max = np.asarray(self.cell_max).astype(STATE_DTYPE)
        self.min_replicas = np.asarray(self.min_replicas, dtype=np.int32)
        self.max_replicas = np.asarray(self.max_replicas, dtype=np.int32)
        self.restart_factor = np.asarray(self.restart_factor, dtype=float)
        self._rmax = self.speedup.shape[2] - 1
        self._nmax = self.speedup.shape[1] - 1
        self._jidx = np.arange(self.num_jobs)[:, None]
        # transposed copies for the [vnode, job, individual] layout
        self._base_t = self.base.T[:, :, None]
        self._cell_t = self.cell_max.T
        self._open_t = self._cell_t > 0
        self._cap_t = self.capacity[:, None]
        # Pollux's first growth probability, 1 / (jobs that may use the node), where a node has room
        opened = self._open_t.sum(axis=1, keepdims=True)
        self._grow_share = (self._open_t / np.maximum(opened, 1)).astype(np.float32)[:, :, None]
        self._hash = np.random.default_rng(12345).integers(1, 2**62, size=self.base.size, dtype=np.int64)

    # -- public, [individual, job, vnode] ---------------------------------------------------------------
    def fitness(self, states: np.ndarray) -> np.ndarray:
        """Pollux's fitness of each individual."""
        return self._fitness(_to_internal(states))

    def job_speedups(self, states: np.ndarray) -> np.ndarray:
        """Speedup of every job in every individual, restart factor applied: shape (P, J)."""
        return self._speedups(_to_internal(states)).T

    def repair(self, states: np.ndarray) -> np.ndarray:
        """Feasible versions of the individuals (Pollux's repair)."""
        return _to_public(self._repair(_to_internal(states).copy()))

    def mutate(self, states: np.ndarray) -> np.ndarray:
        return _to_public(self._mutate(_to_internal(states).copy()))

    def search(self, seeds: np.ndarray, population: int, generations: int) -> tuple[np.ndarray, np.ndarray]:
        """Run the GA from ``seeds`` (S, J, V); return the best allocation and the final population.

        ``seeds[0]`` is the current allocation; a copy of it with every waiting job given its minimum GPU
        count joins the seeds.
        """
        seeds = np.asarray(seeds, dtype=STATE_DTYPE)
        start = np.concatenate([seeds, self.fill_waiting(seeds[0])[None]])
        pop = self._repair(_to_internal(start).copy())
        if pop.shape[2] < population:
            extra = pop[:, :, self.rng.integers(pop.shape[2], size=population - pop.shape[2])]
            pop = np.concatenate([pop, self._repair(self._mutate(extra.copy()))], axis=2)
        pop, fit = self._survive(pop, self._fitness(pop), population)
        half = max(1, population // 2)
        for _ in range(generations):
            a = self._tournament(fit, half)
            b = self._tournament(fit, half)
            children = self._repair(self._mutate(self._crossover(pop[:, :, a], pop[:, :, b])))
            pop, fit = self._survive(np.concatenate([pop, children], axis=2),
                                     np.concatenate([fit, self._fitness(children)]), population)
        out = _to_public(pop)
        return out[0].copy(), out

    def fill_waiting(self, state: np.ndarray) -> np.ndarray:
        """``state`` plus its minimum GPU count for every job that has none, where free GPUs allow.

        A constructive seed: from the current allocation alone the search needs many generations to find
        room for every newcomer, which the power mean with p < 0 rewards above all else.
        """
        state = np.asarray(state).astype(STATE_DTYPE)
        free = self.capacity.astype(np.int64) - state.sum(axis=0)
        for j in np.nonzero(state.sum(axis=1) == 0)[0]:
            need = int(max(self.min_replicas[j], 1))
            room = np.where(self.cell_max[j] > 0, np.minimum(free, self.cell_max[j]), 0)
            if room.sum() < need:
                continue
            fits = np.nonzero(room >= need)[0]
            if len(fits):  # best fit on one node
                v = fits[np.argmin(room[fits])]
                state[j, v] = need
                free[v] -= need
                continue
            for v in np.argsort(-room, kind="stable"):
                take = int(min(room[v], need))
                if take <= 0:
                    break
                state[j, v] += take
                free[v] -= take
                need -= take
        return state

    # -- internal, [vnode, job, individual] -------------------------------------------------------------
    def _speedups(self, s: np.ndarray) -> np.ndarray:
        nodes = np.minimum(np.count_nonzero(s, axis=0), self._nmax)
        reps = np.minimum(s.sum(axis=0, dtype=np.int32), self._rmax)
        out = self.speedup[self._jidx, nodes, reps] * self.scale
        moved = (s != self._base_t).any(axis=0)
        return np.where(moved, out * self.restart_factor[:, None], out)

    def _fitness(self, s: np.ndarray) -> np.ndarray:
        return power_mean(self._speedups(s).T, self.p)

    def _crossover(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Single-point crossover over jobs; two children per pair of parents."""
        n = a.shape[2]
        points = self.rng.integers(max(self.num_jobs, 1), size=n)
        mask = (np.arange(self.num_jobs)[:, None] < points[None, :])[None]
        return np.concatenate([np.where(mask, a, b), np.where(mask, b, a)], axis=2)

    def _mutate(self, s: np.ndarray) -> np.ndarray:
        """Pollux's mutation: reset jobs to their current allocation, zero entries, grow into free GPUs."""
        rng = self.rng
        nodes, jobs, pop = s.shape
        reset = rng.random((jobs, pop), dtype=np.float32) < 0.1
        s = np.ascontiguousarray(np.where(reset[None], self._base_t, s))  # flat writes below need C order
        rj, rp = np.nonzero(rng.random((jobs, pop), dtype=np.float32) < 0.1)
        if len(rj):
            sub = s[:, rj, rp]
            sub[rng.random(sub.shape, dtype=np.float32) < 0.1] = 0
            s[:, rj, rp] = sub
        room = (self._cap_t > s.sum(axis=1, dtype=np.int32))[:, None, :]
        prob1 = self._grow_share * room
        grow = (s > 0) & self._open_t[:, :, None] & room
        prob2 = grow / np.maximum(grow.sum(axis=1, keepdims=True, dtype=np.int32), 1).astype(np.float32)
        prob = prob1 + prob2 - prob1 * prob2
        cand = np.flatnonzero(prob)
        hit = cand[rng.random(len(cand), dtype=np.float32) < prob.ravel()[cand]]
        if len(hit):
            flat = s.reshape(-1)
            low = flat[hit]
            high = np.maximum(low, np.broadcast_to(self._cell_t[:, :, None], s.shape).reshape(-1)[hit])
            flat[hit] = low + (rng.random(len(low), dtype=np.float32) * (high - low + 1)).astype(STATE_DTYPE)
        return s

    def _repair(self, s: np.ndarray) -> np.ndarray:
        """Make every individual feasible (Pollux's repair, vectorised)."""
        s = np.minimum(s, self._cell_t[:, :, None])
        on = s > 0
        # at most one distributed job per node
        distributed = on & (on.sum(axis=0, dtype=np.int32) > 1)[None]
        s[(np.cumsum(distributed, axis=1, dtype=np.int32) > 1) & distributed] = 0
        # per-job replica and node limits, visiting nodes from a random one onwards (only columns that break them)
        bj, bp = np.nonzero((s.sum(axis=0, dtype=np.int32) > self.max_replicas[:, None])
                            | (np.count_nonzero(s, axis=0) > self.max_nodes))
        if len(bj):
            sub = s[:, bj, bp]
            nodes = sub.shape[0]
            order = (np.arange(nodes)[:, None] + self.rng.integers(nodes, size=(1, len(bj)))) % nodes
            t = np.take_along_axis(sub, order, axis=0)
            t = np.diff(np.minimum(np.cumsum(t, axis=0, dtype=np.int32), self.max_replicas[bj][None, :]),
                        axis=0, prepend=0).astype(STATE_DTYPE)
            t[np.cumsum(t > 0, axis=0, dtype=np.int32) > self.max_nodes] = 0
            np.put_along_axis(sub, order, t, axis=0)
            s[:, bj, bp] = sub
        # node capacity: jobs earlier in the order keep their GPUs (only individuals over capacity)
        over = np.nonzero((s.sum(axis=1, dtype=np.int32) > self._cap_t).any(axis=0))[0]
        if len(over):
            c = np.minimum(np.cumsum(s[:, :, over], axis=1, dtype=np.int32), self._cap_t[:, :, None])
            s[:, :, over] = np.diff(c, axis=1, prepend=0).astype(STATE_DTYPE)
        # minimum replicas
        short = s.sum(axis=0, dtype=np.int32) < self.min_replicas[:, None]
        if short.any():
            s[:, short] = 0
        return s

    def _survive(self, s: np.ndarray, fit: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``size`` distinct individuals, best first (ties keep the earlier individual).

        Individuals are told apart by a random 64-bit projection of their matrices (collisions are negligible).
        """
        with np.errstate(over="ignore"):
            keys = self._hash @ s.reshape(-1, s.shape[2]).astype(np.int64)
        _, first = np.unique(keys, return_index=True)
        first = np.sort(first)
        order = first[np.argsort(-fit[first], kind="stable")][:size]
        return s[:, :, order], fit[order]

    def _tournament(self, fit: np.ndarray, n: int) -> np.ndarray:
        cand = self.rng.integers(len(fit), size=(n, 2))
        return np.where(fit[cand[:, 0]] >= fit[cand[:, 1]], cand[:, 0], cand[:, 1])


def _to_internal(states: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(states, dtype=STATE_DTYPE).transpose(2, 1, 0))


def _to_public(s: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(s.transpose(2, 1, 0))


def power_mean(values: np.ndarray, p: float) -> np.ndarray:
    """Pollux's power mean over the last axis (geometric for p = 0), with its 1e-3 floor."""
    if p == 0:
        return np.exp(np.mean(np.log(np.maximum(values, SPEEDUP_EPS)), axis=-1))
    return np.mean((values + SPEEDUP_EPS) ** p, axis=-1) ** (1.0 / p)
