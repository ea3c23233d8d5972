"""Sia's placer: turn per-job (GPU type, node count, GPU count) allocations into exact GPUs.

Rules (thesis section 3.3.1):

a. a partial-node allocation (fewer GPUs than a node holds) lives on one node, never split;
b. a whole-node allocation (a node's worth of GPUs or more) takes whole, otherwise empty nodes;
c. a job whose allocation did not change keeps its GPUs (no needless restart);
d. when fragmentation leaves no valid spot for an allocation, the placer evicts as few kept jobs as possible
   from their GPUs (they are placed again elsewhere, and so restart) and retries, but only when every evicted
   job finds a spot again; otherwise the new allocation waits (an eviction is a rearrangement, never a
   preemption: preempting a running gang for a waiting one of a shape that cannot sit beside it would swap
   them back and forth every round).

With Sia's configuration set (powers of two up to a node, whole nodes beyond) any allocation within the
per-type GPU counts has a placement, so (d) always succeeds for Sia's own allocations; allocations outside
that set (rigid jobs with odd GPU counts) may not, and come back unplaced. Multi-node rigid allocations that
are not a multiple of the node size take whole nodes plus one partial node for the remainder.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import Cluster, Placement


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """One gang to place: ``num_gpus`` GPUs of ``gpu_type``.

    ``current`` is the job's placement from the last round (kept when it still matches the request);
    ``pinned`` requests keep ``current`` unconditionally and are never evicted (non-preemptible jobs, jobs in
    checkpoint-restore).
    """

    key: Hashable
    gpu_type: str
    num_gpus: int
    current: Placement = field(default_factory=Placement.empty)
    pinned: bool = False


@dataclass
class PlacementOutcome:
    placements: dict[Hashable, Placement]
    #: Requests that found no valid placement (only possible for allocations outside Sia's configuration set).
    unplaced: list[Hashable]
    #: Requests that matched their current GPUs but were moved to make room for another gang.
    evicted: list[Hashable]


class _TypePool:
    """Free GPUs of one GPU type, node by node, and which kept request sits on which node."""

    def __init__(self, cluster: Cluster, gtype: str, blocked: np.ndarray | None) -> None:
        self.cluster = cluster
        self.nodes = list(cluster.nodes_of_type[gtype])
        self.size = {n: cluster.nodes[n].num_gpus for n in self.nodes}
        self.node_size = max(self.size.values())
        self.free: dict[int, list[int]] = {}
        for n in self.nodes:
            gpus = list(cluster.gpus_of_node(n))
            if blocked is not None:
                gpus = [g for g in gpus if not blocked[g]]
            self.free[n] = gpus
        #: position of each node in :attr:`nodes`, and free GPUs / size per position (for vectorised fits)
        self.pos = {n: i for i, n in enumerate(self.nodes)}
        self.node_ids = np.array(self.nodes, dtype=np.int64)
        self.count = np.array([len(self.free[n]) for n in self.nodes], dtype=np.int64)
        self.sizes = np.array([self.size[n] for n in self.nodes], dtype=np.int64)
        #: node -> keys of evictable (kept, not pinned) requests on it
        self.kept_on: dict[int, set[Hashable]] = {n: set() for n in self.nodes}
        self.pinned_nodes: set[int] = set()

    def clone(self) -> _TypePool:
        """A copy for a trial: its own free lists, counts and kept sets; the cluster and the node layout,
        which no trial changes, shared (a deep copy also copied the whole cluster, per trial)."""
        other = copy.copy(self)
        other.free = {n: list(gs) for n, gs in self.free.items()}
        other.count = self.count.copy()
        other.kept_on = {n: set(ks) for n, ks in self.kept_on.items()}
        other.pinned_nodes = set(self.pinned_nodes)
        return other

    def nfree(self, n: int) -> int:
        return int(self.count[self.pos[n]])

    def take(self, gpus: list[int]) -> None:
        by_node: dict[int, set[int]] = {}
        for g in gpus:
            by_node.setdefault(int(self.cluster.gpu_node[g]), set()).add(g)
        for n, gs in by_node.items():
            self.free[n] = [g for g in self.free[n] if g not in gs]
            self.count[self.pos[n]] = len(self.free[n])

    def give_back(self, gpus: tuple[int, ...]) -> None:
        touched = set()
        for g in gpus:
            n = int(self.cluster.gpu_node[g])
            self.free[n].append(g)
            touched.add(n)
        for n in touched:
            self.free[n].sort()
            self.count[self.pos[n]] = len(self.free[n])

    def is_free(self, gpus: tuple[int, ...]) -> bool:
        for g in gpus:
            n = int(self.cluster.gpu_node[g])
            if n not in self.free or g not in self.free[n]:
                return False
        return True


def is_valid_shape(cluster: Cluster, placement: Placement) -> bool:
    """Rules (a) and (b): partial-node gangs on one node; larger gangs on whole nodes (plus one remainder)."""
    if not placement:
        return True
    counts = placement.node_counts(cluster)
    nodes = placement.by_node(cluster)
    if len(counts) == 1:
        return True
    partial = [n for n, gs in nodes.items() if len(gs) < cluster.nodes[n].num_gpus]
    return len(partial) <= 1


class SiaPlacer:
    """Places Sia allocations on exact GPUs; see the module docstring for the rules."""

    name = "sia"

    def place(self, cluster: Cluster, requests: list[PlacementRequest],
              blocked: np.ndarray | None = None) -> PlacementOutcome:
        """Place every request; ``blocked`` masks GPUs nobody may use (reservations)."""
        out = PlacementOutcome(placements={}, unplaced=[], evicted=[])
        by_type: dict[str, list[PlacementRequest]] = {}
        for r in requests:
            by_type.setdefault(r.gpu_type, []).append(r)
        for gtype, reqs in by_type.items():
            self._place_type(cluster, gtype, reqs, blocked, out)
        return out

    def fit_free(self, cluster: Cluster, gpu_type: str, num_gpus: int, taken: np.ndarray) -> Placement | None:
        """A valid spot for one more gang among GPUs not in ``taken``, moving nobody; None if there is none."""
        pool = _TypePool(cluster, gpu_type, taken)
        gpus = self._fit(pool, num_gpus)
        return None if gpus is None else Placement.of(gpus)

    # -- one GPU type ------------------------------------------------------------------------------------
    def _place_type(self, cluster: Cluster, gtype: str, reqs: list[PlacementRequest], blocked: np.ndarray | None,
                    out: PlacementOutcome) -> None:
        pool = _TypePool(cluster, gtype, blocked)
        kept: dict[Hashable, Placement] = {}
        pending: list[PlacementRequest] = []
        # (c) keep current GPUs where the allocation is unchanged: pinned first, then larger gangs first
        order = sorted(reqs, key=lambda r: (not r.pinned, -r.num_gpus))
        for r in order:
            cur = r.current
            if cur and len(cur) == r.num_gpus and all(cluster.gpu_type_of[g] == gtype for g in cur.gpus) \
                    and pool.is_free(cur.gpus) and (r.pinned or is_valid_shape(cluster, cur)):
                pool.take(list(cur.gpus))
                kept[r.key] = cur
                nodes = {int(cluster.gpu_node[g]) for g in cur.gpus}
                for n in nodes:
                    if r.pinned:
                        pool.pinned_nodes.add(n)
                    else:
                        pool.kept_on[n].add(r.key)
            else:
                pending.append(r)
        by_key = {r.key: r for r in reqs}
        # new gangs, largest first (whole-node gangs before partial ones of the same size)
        queue = sorted(pending, key=lambda r: -r.num_gpus)
        placed: dict[Hashable, Placement] = {}
        while queue:
            r = queue.pop(0)
            gpus = self._fit(pool, r.num_gpus)
            if gpus is None:
                victims = self._victims(pool, r.num_gpus, kept, cluster)
                if victims is None or not self._rehomes(pool, r.num_gpus, [kept[v] for v in victims]):
                    # no eviction makes room without leaving an evicted gang nowhere to go: the new gang
                    # waits rather than preempt a running one (which would swap them back next round)
                    out.unplaced.append(r.key)
                    continue
                for v in victims:
                    pl = kept.pop(v)
                    pool.give_back(pl.gpus)
                    for n in {int(cluster.gpu_node[g]) for g in pl.gpus}:
                        pool.kept_on[n].discard(v)
                    out.evicted.append(v)
                # evicted gangs are placed again (after this one), largest first
                queue.extend(by_key[v] for v in victims)
                queue.sort(key=lambda q: -q.num_gpus)
                gpus = self._fit(pool, r.num_gpus)
                if gpus is None:  # cannot happen when victims were computed right; be safe
                    out.unplaced.append(r.key)
                    continue
            pool.take(gpus)
            placed[r.key] = Placement.of(gpus)
        out.placements.update(kept)
        out.placements.update(placed)

    @classmethod
    def _rehomes(cls, pool: _TypePool, k: int, evicted: list[Placement]) -> bool:
        """Whether, with ``evicted`` gangs taken off their GPUs, a gang of ``k`` and then every evicted gang
        (largest first) find valid spots. Tried on a copy of ``pool``; ``pool`` is left as it was."""
        trial = pool.clone()
        for pl in evicted:
            trial.give_back(pl.gpus)
        for size in [k, *sorted((len(pl) for pl in evicted), reverse=True)]:
            gpus = cls._fit(trial, size)
            if gpus is None:
                return False
            trial.take(gpus)
        return True

    @staticmethod
    def _fit(pool: _TypePool, k: int) -> list[int] | None:
        """GPUs for a gang of ``k`` following rules (a) and (b), without disturbing anyone; None if none."""
        R = pool.node_size
        count = pool.count
        if k < R:
            # (a) best fit: the fullest node that still holds the whole gang (lowest node id on ties)
            fits = np.nonzero(count >= k)[0]
            if not len(fits):
                return None
            best = int(pool.node_ids[fits[np.argmin(count[fits])]])
            return pool.free[best][:k]
        # (b) whole empty nodes, plus one partial node for a remainder (rigid gangs only)
        whole, rest = divmod(k, R)
        empty = np.nonzero((pool.sizes == R) & (count == R))[0][:whole]
        if len(empty) < whole:
            return None
        gpus: list[int] = []
        for i in empty.tolist():
            gpus += pool.free[int(pool.node_ids[i])]
        if rest:
            avail = count >= rest
            avail[empty] = False
            cand = np.nonzero(avail)[0]
            if not len(cand):
                return None
            n = int(pool.node_ids[cand[np.argmin(count[cand])]])
            gpus += pool.free[n][:rest]
        return gpus

    @staticmethod
    def _victims(pool: _TypePool, k: int, kept: dict[Hashable, Placement], cluster: Cluster) -> list[Hashable] | None:
        """The fewest kept (unpinned) gangs whose eviction makes room for ``k`` GPUs; None if impossible."""
        R = pool.node_size

        def here(key: Hashable, n: int) -> int:
            return sum(1 for g in kept[key].gpus if int(cluster.gpu_node[g]) == n)

        def on_node(n: int) -> list[tuple[int, Hashable]]:
            """(GPUs on node n, key) of the kept gangs on n, most GPUs first (ties: stable by key text)."""
            return sorted(((here(key, n), key) for key in pool.kept_on[n]), key=lambda t: (-t[0], str(t[1])))

        def to_free_node(n: int) -> list[Hashable] | None:
            """Every kept gang touching node n (a node with pinned gangs cannot be freed)."""
            if n in pool.pinned_nodes:
                return None
            return [key for _, key in on_node(n)]

        if k < R:
            best: tuple[int, int, list[Hashable]] | None = None  # (gangs, GPUs, gangs to evict)
            for n in pool.nodes:
                if pool.size[n] < k:
                    continue
                need = k - pool.nfree(n)
                if need <= 0:
                    return []
                chosen: list[Hashable] = []
                got = 0
                for count, key in on_node(n):  # largest first: the fewest gangs free enough GPUs
                    chosen.append(key)
                    got += count  # a gang spanning nodes frees only its GPUs on this node
                    if got >= need:
                        break
                if got < need:
                    continue
                cost = (len(chosen), sum(len(kept[c]) for c in chosen))
                if best is None or cost < best[:2]:
                    best = (cost[0], cost[1], chosen)
            return None if best is None else best[2]
        whole, rest = divmod(k, R)
        cands: list[tuple[int, int, int, list[Hashable]]] = []
        for n in pool.nodes:
            if pool.size[n] != R:
                continue
            victims = to_free_node(n)
            if victims is None:
                continue
            freed_gpus = pool.nfree(n) + sum(here(v, n) for v in victims)
            if freed_gpus < R:  # blocked GPUs on the node
                continue
            cands.append((len(victims), sum(len(kept[v]) for v in victims), n, victims))
        cands.sort(key=lambda c: (c[0], c[1], c[2]))
        if len(cands) < whole:
            return None
        chosen = []
        for c in cands[:whole]:
            for v in c[3]:
                if v not in chosen:
                    chosen.append(v)
        if rest:
            # the remainder fits on a node outside the chosen ones, possibly after more evictions
            used = {c[2] for c in cands[:whole]}
            others = [n for n in pool.nodes if n not in used]
            if not any(pool.nfree(n) >= rest for n in others):
                extra: list[Hashable] | None = None
                for n in others:
                    if n in pool.pinned_nodes or pool.size[n] < rest:
                        continue
                    evict = [key for key in to_free_node(n) or [] if key not in chosen]
                    if extra is None or len(evict) < len(extra):
                        extra = evict
                if extra is None:
                    return None
                chosen += extra
        return chosen
