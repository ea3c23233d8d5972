"""Baseline placement stages: packed and random, sticky and non-sticky.

Sticky placements (Tiresias) let a job that keeps running keep its GPUs; non-sticky ones (Gandiva-style
packing, random) place every selected job afresh each round, so jobs may migrate and pay restarts.
Every placement keeps a job on one GPU type.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import Cluster, ClusterView, Decision, Placement
from dlsched.policies.stages import Demand, PlacementStage, Plan, ProfileRequest, Shape


class FreePool:
    """Free GPUs per node, updated as a placement stage hands GPUs out."""

    def __init__(self, cluster: Cluster, busy: np.ndarray | None = None) -> None:
        self.cluster = cluster
        self.free_mask = np.ones(cluster.num_gpus, dtype=bool) if busy is None else ~busy
        self.free_per_node = np.bincount(cluster.gpu_node[self.free_mask], minlength=len(cluster.nodes))
        self._type_nodes = {t: np.array(ids, dtype=np.int64) for t, ids in cluster.nodes_of_type.items()}

    def free_of_type(self, gtype: str) -> int:
        return int(self.free_per_node[self._type_nodes[gtype]].sum())

    def nodes_of_type(self, gtype: str) -> np.ndarray:
        return self._type_nodes[gtype]

    def free_gpus_on(self, node: int) -> list[int]:
        r = self.cluster.gpus_of_node(node)
        return [g for g in r if self.free_mask[g]]

    def is_free(self, gpus: tuple[int, ...]) -> bool:
        return bool(self.free_mask[list(gpus)].all())

    def take(self, gpus) -> None:
        for g in gpus:
            self.free_mask[g] = False
            self.free_per_node[self.cluster.gpu_node[g]] -= 1

    def allowed_types(self, demand: Demand, shape: Shape | None = None) -> list[str]:
        """Types the job accepts for ``shape`` (default: the demand's own) that have enough free GPUs, most
        powerful first."""
        shape = shape or Shape(demand.gpu_type, demand.num_gpus, demand.num_nodes)
        spec = demand.job.spec
        types = [shape.gpu_type] if shape.gpu_type else list(reversed(self.cluster.type_names))
        return [t for t in types if t in self._type_nodes and spec.allows_gpu_type(t)
                and self.free_of_type(t) >= shape.num_gpus]


def packed_on_fewest_nodes(pool: FreePool, demand: Demand) -> list[int] | None:
    """``demand``'s GPUs, free and to itself, on the type that packs them onto the fewest nodes (types tried
    in :meth:`FreePool.allowed_types` order, so ties go to the first); None if no type has room."""
    best: tuple[int, list[int]] | None = None
    for t in pool.allowed_types(demand):
        got = packed_gpus(pool, t, demand.num_gpus)
        if got is not None and (best is None or got[1] < best[0]):
            best = (got[1], got[0])
    return None if best is None else best[1]


def packed_gpus(pool: FreePool, gtype: str, k: int) -> tuple[list[int], int] | None:
    """Pick ``k`` free GPUs of a type on as few nodes as possible; returns (GPUs, nodes used).

    If one node can hold the job, take the fullest such node (best fit, keeps big holes for big jobs).
    Otherwise take the emptiest nodes first and finish on the best-fitting node for the remainder.
    """
    nodes = pool.nodes_of_type(gtype)
    free = pool.free_per_node[nodes]
    fits = np.nonzero(free >= k)[0]
    if len(fits):
        best = fits[np.argmin(free[fits])]
        return pool.free_gpus_on(int(nodes[best]))[:k], 1
    if free.sum() < k:
        return None
    avail = [int(i) for i in np.argsort(-free, kind="stable") if free[i] > 0]  # most free first
    chosen: list[int] = []
    need, used = k, 0
    while need > 0:
        fit = [i for i in avail if free[i] >= need]
        if fit:  # finish on the fullest node that holds the rest
            i = fit[-1]
            chosen += pool.free_gpus_on(int(nodes[i]))[:need]
            return chosen, used + 1
        i = avail.pop(0)
        chosen += pool.free_gpus_on(int(nodes[i]))
        need -= int(free[i])
        used += 1
    return chosen, used


def random_gpus(pool: FreePool, gtype: str, k: int, rng: np.random.Generator) -> list[int] | None:
    """Pick ``k`` free GPUs of a type uniformly at random."""
    gpus = [g for n in pool.nodes_of_type(gtype) for g in pool.free_gpus_on(int(n))]
    if len(gpus) < k:
        return None
    return [gpus[i] for i in rng.choice(len(gpus), size=k, replace=False)]


def place_profiles(pool: FreePool, profiles: list[ProfileRequest], decision: Decision) -> None:
    """Profile each new job on packed free GPUs of every type it asks for (types without room are skipped)."""
    for req in profiles:
        if req.gpus:
            if pool.is_free(req.gpus):
                pool.take(req.gpus)
                decision.profiles[req.job.job_id] = Placement.of(list(req.gpus))
            continue
        gpus: list[int] = []
        for gtype, k in req.shapes:
            if gtype not in pool.cluster.nodes_of_type or pool.free_of_type(gtype) < k:
                continue
            got = packed_gpus(pool, gtype, k)
            if got is not None:
                pool.take(got[0])
                gpus += got[0]
        if gpus:
            decision.profiles[req.job.job_id] = Placement.of(gpus)


def start_placement(view: ClusterView, plan: Plan) -> tuple[FreePool, Decision, list[Demand]]:
    """What every placement does first: reserved GPUs out of reach, pinned jobs kept where they run, and
    profiling GPUs handed out. Returns the pool left, the decision so far and the demands still to place."""
    pool = FreePool(view.cluster, None if plan.reserved is None else plan.reserved.copy())
    decision = Decision()
    rest: list[Demand] = []
    for d in plan.demands:
        cur = d.job.placement
        if d.pinned and cur and pool.is_free(cur.gpus):
            pool.take(cur.gpus)
            decision.place(d.job.job_id, cur, d.batch_size)
        else:
            rest.append(d)
    place_profiles(pool, plan.profiles, decision)
    return pool, decision, rest


def keeps_current(view: ClusterView, pool: FreePool, d: Demand) -> bool:
    """Whether a running job's current GPUs satisfy its demand and are still free."""
    cur = d.job.placement
    return bool(cur) and len(cur) == d.num_gpus and pool.is_free(cur.gpus) \
        and (d.gpu_type is None or view.cluster.gpu_type_of[cur.gpus[0]] == d.gpu_type)


def keep_current_placements(view: ClusterView, pool: FreePool, decision: Decision,
                            demands: list[Demand]) -> list[Demand]:
    """Give every demand whose job's current GPUs still satisfy it those GPUs (taken from ``pool`` and placed
    in ``decision``); the demands left to place, in their order."""
    rest: list[Demand] = []
    for d in demands:
        if keeps_current(view, pool, d):
            pool.take(d.job.placement.gpus)
            decision.place(d.job.job_id, d.job.placement, d.batch_size)
        else:
            rest.append(d)
    return rest


class _BaselinePlacement(PlacementStage):
    """Shared driver: sticky keeps running jobs in place, then places the rest in the plan's order, each on
    its preferred shape or else the first fallback shape that fits."""

    sticky: bool
    name: str

    @abstractmethod
    def choose(self, pool: FreePool, demand: Demand, shape: Shape) -> list[int] | None:
        """The GPUs for one demand's shape, or None if it cannot be placed this round."""

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        pool, decision, demands = start_placement(view, plan)
        pending = keep_current_placements(view, pool, decision, demands) if self.sticky else demands
        for d in pending:
            self.place_first_fitting(pool, decision, d)
        return decision

    def place_first_fitting(self, pool: FreePool, decision: Decision, d: Demand) -> None:
        """Place ``d`` on its preferred shape, or else the first fallback shape that :meth:`choose` fits."""
        for shape in d.shapes():
            gpus = self.choose(pool, d, shape)
            if gpus is not None:
                pool.take(gpus)
                decision.place(d.job.job_id, Placement.of(gpus), d.batch_size)
                return


@dataclass
class PackedPlacement(_BaselinePlacement):
    """Consolidate each job on as few nodes as possible (Tiresias when sticky, Gandiva-style when not)."""

    sticky: bool = True
    name: str = "packed-sticky"

    def choose(self, pool: FreePool, demand: Demand, shape: Shape) -> list[int] | None:
        best: tuple[int, int, list[int]] | None = None
        for rank, t in enumerate(pool.allowed_types(demand, shape)):
            got = packed_gpus(pool, t, shape.num_gpus)
            if got is not None and (best is None or got[1] < best[0]):
                best = (got[1], rank, got[0])
        return None if best is None else best[2]


@dataclass
class RandomPlacement(_BaselinePlacement):
    """Random free GPUs of a random type that has room (PAL's random baselines)."""

    sticky: bool = True
    seed: int = 0
    name: str = "random-sticky"
    rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def choose(self, pool: FreePool, demand: Demand, shape: Shape) -> list[int] | None:
        types = pool.allowed_types(demand, shape)
        if not types:
            return None
        t = types[int(self.rng.integers(len(types)))]
        return random_gpus(pool, t, shape.num_gpus, self.rng)
