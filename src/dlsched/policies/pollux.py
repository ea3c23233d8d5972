"""Pollux (OSDI'21) as Sia compares against it (Sia thesis, sections 3.2 and 3.4.3).

Pollux gives every job a *speedup function*: the goodput the job would reach on ``num_replicas`` GPUs
spread over ``num_nodes`` nodes (at its best batch size) relative to its goodput on a fair share of the
cluster. Each round a genetic algorithm searches allocation matrices (jobs x nodes, GPUs of each job on
each node) for the one that maximises the cluster *fitness*, a power mean of the jobs' speedups::

    FITNESS_p(A) = ( 1/J * sum_j (SPEEDUP_j(A_j) + 1e-3) ** p ) ** (1/p),      p = -1 by default

where a job whose allocation differs from its current one has its speedup multiplied by Pollux's restart
factor ``max(age - restarts * delay, 0) / (age + delay)`` (delay 30 s): young jobs and jobs that restarted
often are costly to move. With ``p < 0`` a job left without GPUs contributes ``1e-3 ** p`` and dominates the
mean, so the search gives every job a GPU whenever it can.

The search is Pollux's, vectorised with numpy over the whole population (about 100 individuals, 100
generations): single-point crossover over jobs, Pollux's three-step mutation (reset a job to its current
allocation, zero some entries, grow some entries into free capacity), and its repair (at most one
distributed job per node, per-job replica and node limits, node capacity with lower-attained-service jobs
first, minimum replicas). The population is seeded with the previous round's final population and the
current allocation. Survival keeps the best distinct individuals of parents and offspring: Pollux runs
pymoo's NSGA-II with a second objective it then ignores (it takes the best-fitness solution), so a
single-objective elitist GA is the equivalent and avoids pinning pymoo.

Pollux is heterogeneity-unaware. On a heterogeneous cluster this module does what the Sia authors did
(section 3.4.3): nodes are presented as virtual nodes of the smallest node's size (8-GPU nodes become two
4-GPU nodes), the speedup functions come from a heterogeneity-unaware goodput estimator, and a job the
search spreads over several GPU types keeps only the GPUs of the type where it has most (ties go to the
more powerful type); the rest idle for the round.

Jobs pick their own batch size for the GPUs they get (``batch_size=None``), as AdaptDL jobs do.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import Cluster, ClusterView, Decision, InputError, JobView, Placement
from dlsched.estimators.base import GoodputEstimator

#: Pollux adds this to every speedup before the power mean, so a job without GPUs has a finite term.
SPEEDUP_EPS = 1e-3
#: Integer type of allocation matrices (GPUs of one job on one node); small types keep the search in cache.
STATE_DTYPE = np.int16


@dataclass
class PolluxTunables:
    """Pollux's knobs, with the defaults of the paper and of the Sia comparison."""

    #: Power-mean exponent of the fitness (fairness knob; more negative is fairer).
    p: float = -1.0
    #: Restart penalty: a moved job's speedup is scaled by max(age - restarts*d, 0) / (age + d), d in seconds.
    restart_delay_s: float = 30.0
    #: Genetic search size.
    population: int = 100
    generations: int = 100
    #: Largest GPU count for one job, and most (virtual) nodes one job may span (Sia's Pollux: 64, 16).
    max_replicas: int = 64
    max_nodes: int = 16
    #: A job may grow to at most twice the largest GPU count it has run on (Pollux's exploration limit).
    explore: bool = True
    #: Speedups relative to the goodput on a fair share of the cluster ("fair", Pollux) or on one GPU.
    speedup_base: str = "fair"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.population < 2:
            raise InputError(f"population must be at least 2, got {self.population}", field="population")
        if self.generations < 0:
            raise InputError(f"generations must be >= 0, got {self.generations}", field="generations")
        if self.max_replicas < 1 or self.max_nodes < 1:
            raise InputError("max_replicas and max_nodes must be at least 1", field="max_replicas")
        if self.restart_delay_s < 0:
            raise InputError(f"restart_delay_s must be >= 0, got {self.restart_delay_s}", field="restart_delay_s")
        if self.speedup_base not in ("fair", "one-gpu"):
            raise InputError(f"speedup_base must be 'fair' or 'one-gpu', got '{self.speedup_base}'",
                             field="speedup_base")


# ---------------------------------------------------------------------------------------------------------
# Virtual nodes
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VirtualCluster:
    """The cluster as Pollux sees it: every node cut into virtual nodes of the smallest node's size."""

    #: GPUs of a full virtual node.
    size: int
    #: Global GPU ids of each virtual node.
    gpus: tuple[tuple[int, ...], ...]
    #: Physical node and GPU-type index (into ``cluster.type_names``, least powerful first) of each one.
    node: np.ndarray
    type_index: np.ndarray
    capacity: np.ndarray
    #: Virtual node of every GPU.
    gpu_vnode: np.ndarray

    @classmethod
    def of(cls, cluster: Cluster) -> VirtualCluster:
        size = min(n.num_gpus for n in cluster.nodes)
        type_pos = {t: i for i, t in enumerate(cluster.type_names)}
        gpus: list[tuple[int, ...]] = []
        node: list[int] = []
        tidx: list[int] = []
        for n in cluster.nodes:
            ids = list(cluster.gpus_of_node(n.node_id))
            for start in range(0, len(ids), size):
                gpus.append(tuple(ids[start:start + size]))
                node.append(n.node_id)
                tidx.append(type_pos[n.gpu_type])
        gpu_vnode = np.zeros(cluster.num_gpus, dtype=np.int64)
        for v, ids in enumerate(gpus):
            gpu_vnode[list(ids)] = v
        return cls(size=size, gpus=tuple(gpus), node=np.array(node, dtype=np.int64),
                   type_index=np.array(tidx, dtype=np.int64),
                   capacity=np.array([len(g) for g in gpus], dtype=np.int64), gpu_vnode=gpu_vnode)

    @property
    def num_vnodes(self) -> int:
        return len(self.gpus)

    def state_of(self, placement: Placement) -> np.ndarray:
        """GPUs of a placement on each virtual node."""
        out = np.zeros(self.num_vnodes, dtype=np.int64)
        if placement:
            np.add.at(out, self.gpu_vnode[list(placement.gpus)], 1)
        return out


# ---------------------------------------------------------------------------------------------------------
# The genetic search
# ---------------------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------------------
# Speedup functions
# ---------------------------------------------------------------------------------------------------------
def shape_grid(max_nodes: int, max_replicas: int, vsize: int) -> np.ndarray:
    """Every (nodes, replicas) a job can hold: nodes <= replicas <= nodes * vsize."""
    rows = [(n, r) for n in range(1, max_nodes + 1) for r in range(n, min(max_replicas, n * vsize) + 1)]
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def speedup_table(goodput: Callable[[np.ndarray], np.ndarray | None], base_shape: tuple[int, int],
                  max_nodes: int, max_replicas: int, vsize: int) -> np.ndarray:
    """``table[n, r]``: goodput of (n nodes, r GPUs) over the goodput of ``base_shape``.

    ``goodput`` maps an array of (nodes, GPUs) rows to goodputs, or returns None when the job's model is
    still unknown; then the speedup is linear in the GPU count (Pollux's initial speedup function).
    """
    table = np.zeros((max_nodes + 1, max_replicas + 1))
    shapes = shape_grid(max_nodes, max_replicas, vsize)
    if not len(shapes):
        return table
    values = goodput(np.vstack([np.array([base_shape]), shapes]))
    if values is not None:
        values = np.asarray(values, dtype=float)
        base = values[0]
        if base > 0 and np.isfinite(base) and np.any(values[1:] > 0):
            table[shapes[:, 0], shapes[:, 1]] = np.maximum(np.nan_to_num(values[1:] / base), 0.0)
            return table
    table[shapes[:, 0], shapes[:, 1]] = shapes[:, 1] / max(base_shape[1], 1)
    return table


# ---------------------------------------------------------------------------------------------------------
# The scheduler
# ---------------------------------------------------------------------------------------------------------
class PolluxScheduler:
    """Pollux's policy: speedup functions from a heterogeneity-unaware goodput estimator, GA search."""

    allows_packing = False
    rigid = False

    def __init__(self, tunables: PolluxTunables | None = None, estimator: GoodputEstimator | None = None,
                 name: str = "pollux") -> None:
        self.tunables = tunables or PolluxTunables()
        self.estimator = estimator
        self.name = name
        self.rng = np.random.default_rng(self.tunables.seed)
        self._vc: VirtualCluster | None = None
        self._cluster: Cluster | None = None
        self._max_seen: dict[str, int] = {}
        self._prev_jobs: list[str] = []
        self._prev_pop: np.ndarray | None = None
        #: Wall time of the genetic search in each round (for benchmarks).
        self.search_s: list[float] = []

    def describe(self) -> str:
        t = self.tunables
        return f"{self.name} (p={t.p}, population={t.population}, generations={t.generations})"

    # -- inputs of the search ----------------------------------------------------------------------------
    def _virtual(self, cluster: Cluster) -> VirtualCluster:
        if self._cluster is not cluster:
            self._cluster, self._vc = cluster, VirtualCluster.of(cluster)
        assert self._vc is not None
        return self._vc

    def _reference_type(self, cluster: Cluster) -> str:
        """The GPU type named to the (type-blind) estimator: the most plentiful, least powerful on ties."""
        counts = cluster.gpus_per_type
        return max(cluster.type_names, key=lambda t: (counts[t], -cluster.type_names.index(t)))

    def _max_replicas(self, j: JobView, total: int) -> int:
        t = self.tunables
        cap = min(j.spec.upper_gpus, t.max_replicas, total)
        if t.explore:
            seen = max(self._max_seen.get(j.job_id, 0), len(j.placement))
            cap = min(cap, max(2 * seen, 1))
        return max(cap, min(j.spec.lower_gpus, t.max_replicas, total))

    def _goodput_fn(self, j: JobView, gtype: str) -> Callable[[np.ndarray], np.ndarray | None]:
        est = self.estimator

        def fn(shapes: np.ndarray) -> np.ndarray | None:
            if est is None:
                return None
            first = est.estimate(j, gtype, int(shapes[0, 0]), int(shapes[0, 1]))
            if first is None:
                return None
            return np.asarray(est.goodput_many(j, gtype, shapes), dtype=float)

        return fn

    def _base_shape(self, num_jobs: int, total: int, vsize: int) -> tuple[int, int]:
        """Where speedup is 1: one GPU, or Pollux's fair share (1/J of the cluster) packed on nodes."""
        if self.tunables.speedup_base == "one-gpu":
            return (1, 1)
        r = max(1, min(math.ceil(total / max(num_jobs, 1)), self.tunables.max_replicas, total))
        return (min(math.ceil(r / vsize), r), r)

    # -- one round -----------------------------------------------------------------------------------------
    def schedule(self, view: ClusterView) -> Decision:
        t = self.tunables
        cluster = view.cluster
        vc = self._virtual(cluster)
        t_est = time.perf_counter()
        if self.estimator is not None:
            self.estimator.update(view)
        t_est = time.perf_counter() - t_est
        for j in view.jobs:
            seen = max((o.num_gpus for o in j.throughput_obs), default=0)
            self._max_seen[j.job_id] = max(self._max_seen.get(j.job_id, 0), seen, len(j.placement))
        live = {j.job_id for j in view.jobs}
        self._max_seen = {k: v for k, v in self._max_seen.items() if k in live}
        jobs = sorted((j for j in view.jobs if not j.profiling),
                      key=lambda j: (j.attained_service_s, j.spec.submit_time_s, j.job_id))
        decision = Decision()
        if not jobs:
            self._prev_jobs, self._prev_pop = [], None
            return decision
        total = cluster.num_gpus
        num_v = vc.num_vnodes
        max_nodes = min(t.max_nodes, num_v)
        ref = self._reference_type(cluster)
        max_rep = np.array([self._max_replicas(j, total) for j in jobs], dtype=np.int64)
        min_rep = np.array([j.spec.lower_gpus for j in jobs], dtype=np.int64)
        rmax = int(max_rep.max())
        speed = np.zeros((len(jobs), max_nodes + 1, rmax + 1))
        base_shape = self._base_shape(len(jobs), total, vc.size)
        t_speed = time.perf_counter()
        for i, j in enumerate(jobs):
            speed[i] = speedup_table(self._goodput_fn(j, ref), base_shape, max_nodes, rmax, vc.size)
            speed[i, :, max_rep[i] + 1:] = 0.0
        t_speed = time.perf_counter() - t_speed
        base = np.stack([vc.state_of(j.placement) for j in jobs])
        type_names = cluster.type_names
        allowed = np.array([[j.spec.allows_gpu_type(type_names[ti]) for ti in vc.type_index] for j in jobs])
        cell_max = np.where(allowed, vc.capacity[None, :], 0)
        ages = np.array([max(j.age_s, 0.0) for j in jobs])
        restarts = np.array([j.restarts for j in jobs], dtype=float)
        d = t.restart_delay_s
        factor = np.maximum(ages - restarts * d, 0.0) / (ages + d) if d > 0 else np.ones(len(jobs))
        problem = AllocationProblem(
            speedup=speed, base=base, capacity=vc.capacity, cell_max=cell_max, min_replicas=min_rep,
            max_replicas=max_rep, restart_factor=factor, p=t.p, scale=num_v / total, max_nodes=max_nodes,
            rng=self.rng)
        seeds = self._seeds(jobs, base)
        t0 = time.perf_counter()
        best, pop = problem.search(seeds, t.population, t.generations)
        self.search_s.append(time.perf_counter() - t0)
        self._prev_jobs, self._prev_pop = [j.job_id for j in jobs], pop
        decision.info["pollux.fitness"] = float(problem.fitness(best[None])[0])
        decision.info["pollux.estimator_s"] = t_est
        decision.info["pollux.speedup_s"] = t_speed
        decision.info["pollux.search_s"] = self.search_s[-1]
        self._place(view, vc, jobs, best, decision)
        return decision

    def _seeds(self, jobs: Sequence[JobView], base: np.ndarray) -> np.ndarray:
        """The current allocation plus last round's final population, mapped onto this round's jobs."""
        seeds = [base[None]]
        if self._prev_pop is not None and self._prev_pop.shape[2] == base.shape[1]:
            index = {k: i for i, k in enumerate(self._prev_jobs)}
            src = [index.get(j.job_id, -1) for j in jobs]
            prev = np.zeros((len(self._prev_pop), *base.shape), dtype=STATE_DTYPE)
            keep = [i for i, s in enumerate(src) if s >= 0]
            if keep:
                prev[:, keep] = self._prev_pop[:, [src[i] for i in keep]]
            seeds.append(prev)
        return np.concatenate(seeds)

    # -- from the matrix to exact GPUs ------------------------------------------------------------------
    def _place(self, view: ClusterView, vc: VirtualCluster, jobs: Sequence[JobView], state: np.ndarray,
               decision: Decision) -> None:
        final = np.zeros_like(state)
        for i, j in enumerate(jobs):
            counts = fix_mixed_types(state[i], vc.type_index)
            k = int(counts.sum())
            if k == 0:
                continue
            k_ok = next((c for c in range(k, 0, -1) if j.spec.allows_gpu_count(c)), 0)
            if k_ok == 0:
                continue
            final[i] = trim_counts(counts, k - k_ok)
        # keep GPUs a job already holds on a virtual node, then hand out the free ones
        chosen: list[list[int]] = [[] for _ in jobs]
        cur_by_job = [set(j.placement.gpus) for j in jobs]
        for v, ids in enumerate(vc.gpus):
            wanted = final[:, v]
            if not wanted.any():
                continue
            taken: set[int] = set()
            need: list[tuple[int, int]] = []
            for i in np.nonzero(wanted)[0]:
                mine = [g for g in ids if g in cur_by_job[i]][: int(wanted[i])]
                chosen[i] += mine
                taken.update(mine)
                if len(mine) < wanted[i]:
                    need.append((int(i), int(wanted[i]) - len(mine)))
            free = [g for g in ids if g not in taken]
            for i, n in need:
                chosen[i] += free[:n]
                free = free[n:]
        for i, j in enumerate(jobs):
            if chosen[i]:
                decision.place(j.job_id, Placement.of(chosen[i]))


def fix_mixed_types(counts: np.ndarray, type_index: np.ndarray) -> np.ndarray:
    """Keep only the GPUs on the job's primary type: most GPUs, the more powerful type on ties."""
    used = np.nonzero(counts)[0]
    if len(used) == 0:
        return counts
    types = np.unique(type_index[used])
    if len(types) == 1:
        return counts
    per_type = np.array([counts[type_index == ti].sum() for ti in types])
    primary = types[np.lexsort((types, per_type))[-1]]
    return np.where(type_index == primary, counts, 0)


def trim_counts(counts: np.ndarray, drop: int) -> np.ndarray:
    """Remove ``drop`` GPUs, emptying the nodes with fewest GPUs first (fewer nodes, same gang)."""
    out = counts.copy()
    for v in np.argsort(out, kind="stable"):
        if drop <= 0:
            break
        if out[v] == 0:
            continue
        take = min(int(out[v]), drop)
        out[v] -= take
        drop -= take
    return out
