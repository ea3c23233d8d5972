"""Pollux (OSDI'21) as Sia compares against it (Sia thesis, sections 3.2 and 3.4.3): the allocation stage.

Pollux gives every job a *speedup function*: the goodput the job would reach on ``num_replicas`` GPUs
spread over ``num_nodes`` nodes (at its best batch size) relative to its goodput on a fair share of the
cluster. Each round a genetic algorithm (:mod:`~dlsched.policies.pollux.genetic`) searches allocation
matrices (jobs x virtual nodes) for the one that maximises the cluster *fitness*, a power mean of the jobs'
speedups with ``p = -1`` by default, where a job whose allocation differs from its current one has its
speedup multiplied by Pollux's restart factor ``max(age - restarts * delay, 0) / (age + delay)`` (delay
30 s): young jobs and jobs that restarted often are costly to move. With ``p < 0`` a job left without GPUs
contributes ``1e-3 ** p`` and dominates the mean, so the search gives every job a GPU whenever it can. The
population is seeded with the previous round's final population and the current allocation.

On a cluster of several GPU types the search sees virtual nodes as identical (Sia thesis, section 3.4.3): it
knows only which types a job refuses, and a job it spreads over types is cut to its majority type. By
default each job's speedups follow AdaptDL's ``GoodputFunction.optimize`` (``batch_search="adaptdl"``) and
are relative to the fair share of Sia's artifact, ceil(G / J) GPUs on one node (``speedup_base="fair"``).

The demands carry the search's per-virtual-node counts as ``spread`` hints, which Pollux's placement
(:mod:`~dlsched.policies.pollux.placement`) turns into GPUs. Jobs pick their own batch size for the GPUs
they get (``batch_size=None``), as AdaptDL jobs do. The speedups come from a heterogeneity-unaware,
learn-as-you-go goodput estimator (no profiling).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dlsched.core import Cluster, ClusterView, JobView
from dlsched.core.ranges import DAY_S, ranged
from dlsched.policies.pollux.genetic import STATE_DTYPE, AllocationProblem
from dlsched.policies.pollux.speedup import VirtualCluster, fix_mixed_types, speedup_table, trim_counts
from dlsched.policies.stages import AllocationTraits, Demand, EstimatingAllocation, Plan

SPEEDUP_BASES = ("fair", "fair-spread", "one-gpu")


@dataclass
class PolluxAllocation(EstimatingAllocation):
    """Pollux's search; the fields are its tunables, with the defaults of the paper and the Sia comparison.

    State carried across rounds: the estimator, the largest GPU count each job has run on (exploration
    limit), the last round's jobs and final population (seeds of the next search), the random generator.
    """

    #: Power-mean exponent of the fitness (fairness knob; more negative is fairer).
    p: float = ranged(-1.0, -100.0, 100.0)
    #: Restart penalty: a moved job's speedup is scaled by max(age - restarts*d, 0) / (age + d), d in seconds.
    restart_delay_s: float = ranged(30.0, 0.0, DAY_S)
    #: Genetic search size (both bound one round's work: the search runs population x generations steps).
    population: int = ranged(100, 2, 1000)
    generations: int = ranged(100, 0, 1000)
    #: Largest GPU count for one job, and most (virtual) nodes one job may span (Sia's Pollux: 64, 16).
    #: The search keeps counts in 16-bit integers, hence the upper bounds.
    max_replicas: int = ranged(64, 1, 4096)
    max_nodes: int = ranged(16, 1, 1024)
    #: A job may grow to at most twice the largest GPU count it has run on (Pollux's exploration limit).
    explore: bool = True
    #: Where a speedup is 1: "fair" (Pollux as Sia's artifact runs it: ceil(G / J) GPUs on one node, G GPUs and
    #: J jobs), "fair-spread" (the same count packed on ceil(count / node size) nodes, a share that can be
    #: placed) or "one-gpu" (AdaptDL's scheduler).
    speedup_base: str = "fair"
    #: How each job's best batch is searched for its speedups: "adaptdl" (AdaptDL's GoodputFunction.optimize)
    #: or "dense" (a finer grid with memory-filling batches; see dlsched.estimators.goodput).
    batch_search: str = "adaptdl"
    seed: int = 0
    name: str = "pollux"

    traits: ClassVar[AllocationTraits] = AllocationTraits(uses_order=False, plans_spread=True,
                                                          names_gpu_type=True)

    def __post_init__(self) -> None:
        if self.p == 0:
            raise ValueError(f"p must be non-zero (a power mean with p = 0 is undefined), got {self.p}")
        if self.speedup_base not in SPEEDUP_BASES:
            raise ValueError(f"speedup_base must be one of {', '.join(SPEEDUP_BASES)}, got '{self.speedup_base}'")
        from dlsched.estimators.goodput import LearnedGoodputEstimator
        from dlsched.estimators.goodput_batches import BATCH_SEARCHES

        if self.batch_search not in BATCH_SEARCHES:
            raise ValueError(f"batch_search must be one of {', '.join(BATCH_SEARCHES)}, got '{self.batch_search}'")
        self.estimator = LearnedGoodputEstimator(mode="none", hetero_aware=False, batch_search=self.batch_search)
        self.rng = np.random.default_rng(self.seed)
        self._vc: VirtualCluster | None = None
        self._cluster: Cluster | None = None
        self._max_seen: dict[str, int] = {}
        self._prev_jobs: list[str] = []
        self._prev_pop: np.ndarray | None = None
        #: Wall time of the genetic search in each round (for benchmarks).
        self.search_s: list[float] = []

    def describe(self) -> str:
        return f"{self.name} (p={self.p}, population={self.population}, generations={self.generations})"

    # -- inputs of the search ----------------------------------------------------------------------------
    def virtual(self, cluster: Cluster) -> VirtualCluster:
        if self._cluster is not cluster:
            self._cluster, self._vc = cluster, VirtualCluster.of(cluster)
        assert self._vc is not None
        return self._vc

    @staticmethod
    def _reference_type(cluster: Cluster) -> str:
        """The GPU type named to the (type-blind) estimator: the most plentiful, least powerful on ties."""
        counts = cluster.gpus_per_type
        return max(cluster.type_names, key=lambda t: (counts[t], -cluster.type_names.index(t)))

    def _max_replicas(self, j: JobView, total: int) -> int:
        cap = min(j.spec.upper_gpus, self.max_replicas, total)
        if self.explore:
            seen = max(self._max_seen.get(j.job_id, 0), len(j.placement))
            cap = min(cap, max(2 * seen, 1))
        return max(cap, min(j.spec.lower_gpus, self.max_replicas, total))

    def _goodput_fn(self, j: JobView, gtype: str) -> Callable[[np.ndarray], np.ndarray | None]:
        est = self.require_estimator()

        def fn(shapes: np.ndarray) -> np.ndarray | None:
            first = est.estimate(j, gtype, int(shapes[0, 0]), int(shapes[0, 1]))
            if first is None:
                return None
            return np.asarray(est.goodput_many(j, gtype, shapes), dtype=float)

        return fn

    def _base_shape(self, num_jobs: int, total: int, vsize: int) -> tuple[int, int]:
        """Where speedup is 1: one GPU, or Pollux's fair share (1/J of the cluster's GPUs).

        Pollux's paper defines the fair share as an exclusive 1/J share of the cluster; Sia's artifact (and
        Pollux's OSDI'21 simulator) evaluates it as ceil(G / J) replicas on ceil(N / G) = 1 node, whatever
        the node size, which ``fair`` follows; ``fair-spread`` packs the share on as many nodes as it needs.
        """
        if self.speedup_base == "one-gpu":
            return (1, 1)
        r = max(1, min(math.ceil(total / max(num_jobs, 1)), total))
        if self.speedup_base == "fair":
            return (1, r)
        return (min(math.ceil(r / vsize), r), r)

    # -- one round -----------------------------------------------------------------------------------------
    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        cluster = view.cluster
        vc = self.virtual(cluster)
        t_est = time.perf_counter()
        self.require_estimator().update(view)
        t_est = time.perf_counter() - t_est
        for j in view.jobs:
            seen = max((o.num_gpus for o in j.throughput_obs), default=0)
            self._max_seen[j.job_id] = max(self._max_seen.get(j.job_id, 0), seen, len(j.placement))
        live = {j.job_id for j in view.jobs}
        self._max_seen = {k: v for k, v in self._max_seen.items() if k in live}
        # Pollux ranks by attained service (its repair serves lower-service jobs first)
        jobs = sorted((j for j in ordered if not j.profiling),
                      key=lambda j: (j.attained_service_s, j.spec.submit_time_s, j.job_id))
        plan = Plan()
        if not jobs:
            self._prev_jobs, self._prev_pop = [], None
            return plan
        total = cluster.num_gpus
        num_v = vc.num_vnodes
        max_nodes = min(self.max_nodes, num_v)
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
        # the restart penalty's delay: what the runtime measured of the job's start-up, else the tunable
        d = np.array([self.restart_delay_s if j.measured_startup_s is None else j.measured_startup_s for j in jobs])
        factor = np.where(d > 0, np.maximum(ages - restarts * d, 0.0) / (ages + np.where(d > 0, d, 1.0)), 1.0)
        problem = AllocationProblem(
            speedup=speed, base=base, capacity=vc.capacity, cell_max=cell_max, min_replicas=min_rep,
            max_replicas=max_rep, restart_factor=factor, p=self.p, scale=num_v / total, max_nodes=max_nodes,
            rng=self.rng)
        seeds = self._seeds(jobs, base)
        t0 = time.perf_counter()
        best, pop = problem.search(seeds, self.population, self.generations)
        self.search_s.append(time.perf_counter() - t0)
        self._prev_jobs, self._prev_pop = [j.job_id for j in jobs], pop
        plan.info["pollux.fitness"] = float(problem.fitness(best[None])[0])
        plan.info["pollux.estimator_s"] = t_est
        plan.info["pollux.speedup_s"] = t_speed
        plan.info["pollux.search_s"] = self.search_s[-1]
        plan.demands = self._demands(cluster, vc, jobs, best)
        return plan

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

    @staticmethod
    def _demands(cluster: Cluster, vc: VirtualCluster, jobs: Sequence[JobView], state: np.ndarray) -> list[Demand]:
        """One demand per job the search gave GPUs: one type only, at a GPU count the job accepts.

        A job the search spread over several types keeps the GPUs of its primary type (the thesis's fix); the
        rest idle this round. A job left with more GPUs than any count it accepts is trimmed to the largest
        accepted count. A job left with fewer GPUs than every count it accepts (a rigid gang cut by the fix)
        is topped up to its smallest accepted count with GPUs of its type that no job holds after the fix,
        on the virtual nodes it already uses first, then the emptiest ones, as Sia's artifact repairs rigid
        jobs; it waits this round only if its type has too few such GPUs.
        """
        counts = np.zeros((len(jobs), vc.num_vnodes), dtype=np.int64)
        short: list[int] = []
        for i, j in enumerate(jobs):
            c = fix_mixed_types(np.asarray(state[i], dtype=np.int64), vc.type_index)
            k = int(c.sum())
            if k == 0:
                continue
            k_ok = next((n for n in range(k, 0, -1) if j.spec.allows_gpu_count(n)), 0)
            if k_ok:
                counts[i] = trim_counts(c, k - k_ok)
            else:
                counts[i] = c
                short.append(i)
        free = vc.capacity - counts.sum(axis=0)
        for i in short:
            c = counts[i]
            k = int(c.sum())
            target = next((n for n in range(k + 1, cluster.num_gpus + 1) if jobs[i].spec.allows_gpu_count(n)), 0)
            ti = int(vc.type_index[np.nonzero(c)[0][0]])
            room = np.where(vc.type_index == ti, free, 0)
            if target == 0 or int(room.sum()) < target - k:
                free += c
                counts[i] = 0
                continue
            add = target - k
            for v in sorted(np.nonzero(room)[0].tolist(), key=lambda v: (c[v] == 0, -room[v], v)):
                take = min(int(room[v]), add)
                c[v] += take
                free[v] -= take
                add -= take
                if add == 0:
                    break
        demands = []
        for i, j in enumerate(jobs):
            used = np.nonzero(counts[i])[0]
            if len(used) == 0:
                continue
            gtype = cluster.type_names[int(vc.type_index[used[0]])]
            spread = tuple((vc.gpus[v], int(counts[i, v])) for v in used.tolist())
            demands.append(Demand(job=j, num_gpus=int(counts[i].sum()), gpu_type=gtype,
                                  num_nodes=len(set(vc.node[used].tolist())), spread=spread))
        return demands
