"""PM-First and PAL placement (PAL, SC'24, section III, Algorithms 1 and 2).

Both are placement stages: the scheduling policy (FIFO, LAS, SRTF, ...) orders the jobs and the allocation
stage cuts that queue where the summed demand first exceeds the cluster (the "cut queue": the jobs the
policy guarantees a turn this round). Placement keeps that set and re-sorts only the cut queue by
application class, most variability-sensitive first, so class A jobs pick GPUs before class B, and so on.
A job outside the cut never runs ahead of one inside it. Both policies are non-sticky: every selected job is
placed afresh each round (a job whose new GPUs equal its old ones does not restart).

* **PM-First** (Algorithm 1) gives each job the free GPUs with the best PM-scores for its class. Among GPUs
  of the same (binned) score it prefers nodes whose count of such free GPUs best matches the job's demand,
  as PAL's implementation does, which keeps small jobs on few nodes at no variability cost.
* **PAL** (Algorithm 2) weighs variability against locality with the class's L x V matrix: locality levels
  (within a node, within a rack when the cluster file names racks, across) times the PM-score bins. A job
  that one node (or rack) could hold walks the matrix from the smallest product: at a (within, V_i) entry it
  takes the best packed allocation among free GPUs scoring at most V_i, if a node has enough of them; at an
  (across, V_i) entry it takes PM-First's GPUs if enough free GPUs score at most V_i. Larger jobs use PM-First.

The policy sees per-GPU PM-scores only as offline profiling measured them (``ClusterView.gpu_scores``) and
bins them itself (:mod:`dlsched.estimators.pm_scores`), once per scores array. Everything per round is
vectorised over per-GPU and per-(bin, node) count arrays, and runs of single-GPU jobs of one class are
placed in one pass, so a round at 27,000 GPUs takes well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import Cluster, ClusterView, Decision, Placement
from dlsched.core.decision import Allocation
from dlsched.estimators.classifier import DEFAULT_CLASS, class_rank
from dlsched.estimators.kmeans_1d import K_MAX, K_MIN
from dlsched.estimators.locality import (
    LocalityPenalties,
    LvMatrix,
    default_rack_penalty,
    lv_matrix,
    traversal_order,
)
from dlsched.estimators.pm_bins import BINS, OUTLIER_SIGMA, PmBins
from dlsched.policies.placement import keeps_current, start_placement
from dlsched.policies.stages import Demand, PlacementStage, Plan

_BIG = np.iinfo(np.int64).max // 4
# Locality levels of the L x V matrix.
_NODE, _RACK, _ACROSS = 0, 1, 2


# ---------------------------------------------------------------------------------------------------------
# Static layout: per GPU type, the GPUs, nodes, racks and each class's bins (built once per scores array)
# ---------------------------------------------------------------------------------------------------------
@dataclass
class _ClassBins:
    """One class's binned scores on one GPU pool, with the per-bin orderings the policies need."""

    bins: PmBins
    #: Bin (level) index per local GPU, 0 = best; and the level values.
    lab: np.ndarray
    vals: np.ndarray
    vals_t: tuple[float, ...]
    #: Local GPU ids sorted by (bin, GPU id), and where each bin starts in that order.
    bin_order: np.ndarray
    bin_start: np.ndarray
    #: Free-GPU counts per (bin, node) and per (bin, rack) with every GPU free.
    counts0: np.ndarray
    rack_counts0: np.ndarray | None


@dataclass
class _Pool:
    """The GPUs of one type: local ids 0..G-1 in global (node) order, so a node's GPUs are contiguous."""

    gtype: str
    gpus: np.ndarray
    node: np.ndarray
    node_off: np.ndarray
    node_size: np.ndarray
    rack_of_node: np.ndarray
    num_racks: int
    rack_size: np.ndarray
    max_node: int
    max_rack: int
    has_racks: bool
    classes: dict[str, _ClassBins] = field(default_factory=dict)
    #: One shared (immutable) single-GPU allocation per local GPU, for the batch-size-free common case.
    _singles: list[Allocation] | None = field(default=None, repr=False)

    @property
    def num_nodes(self) -> int:
        return len(self.node_size)

    def single(self, local: int, batch_size: int | None) -> Allocation:
        if batch_size is not None:
            return Allocation(Placement((int(self.gpus[local]),)), batch_size)
        if self._singles is None:
            self._singles = [Allocation(Placement((g,)), None) for g in self.gpus.tolist()]
        return self._singles[local]


def _build_pools(cluster: Cluster, scores: Mapping[str, np.ndarray] | None, classes: tuple[str, ...],
                 bin_params: dict) -> dict[str, _Pool]:
    racks_named = any(n.rack is not None for n in cluster.nodes)
    pools: dict[str, _Pool] = {}
    for gtype in cluster.type_names:
        node_ids = np.array(cluster.nodes_of_type[gtype], dtype=np.int64)
        sizes = np.array([cluster.nodes[i].num_gpus for i in node_ids], dtype=np.int64)
        gpus = np.concatenate([np.arange(cluster.gpu_offset[i], cluster.gpu_offset[i] + cluster.nodes[i].num_gpus)
                               for i in node_ids]).astype(np.int64)
        node_local = np.repeat(np.arange(len(node_ids)), sizes)
        off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rack_names = [cluster.nodes[i].rack for i in node_ids]
        uniq = sorted({str(r) for r in rack_names})
        rack_of_node = np.array([uniq.index(str(r)) for r in rack_names], dtype=np.int64)
        rack_size = np.bincount(rack_of_node, weights=sizes, minlength=len(uniq)).astype(np.int64)
        pool = _Pool(gtype=gtype, gpus=gpus, node=node_local, node_off=off, node_size=sizes,
                     rack_of_node=rack_of_node, num_racks=len(uniq), rack_size=rack_size,
                     max_node=int(sizes.max()), max_rack=int(rack_size.max()),
                     has_racks=racks_named and len(uniq) > 1)
        shared: dict[int, _ClassBins] = {}
        for cls in classes:
            arr = None if scores is None else _class_scores(scores, cls)
            sub = np.ones(len(gpus)) if arr is None else np.asarray(arr, dtype=float)[gpus]
            bins = BINS.get(sub, **bin_params)
            key = id(bins)
            if key not in shared:
                shared[key] = _class_bins(bins, pool)
            pool.classes[cls] = shared[key]
        pools[gtype] = pool
    return pools


def _class_scores(scores: Mapping[str, np.ndarray], cls: str) -> np.ndarray | None:
    if cls in scores:
        return scores[cls]
    if DEFAULT_CLASS in scores:
        return scores[DEFAULT_CLASS]
    return None


def _class_bins(bins: PmBins, pool: _Pool) -> _ClassBins:
    lab = bins.labels.astype(np.int64)
    nb = len(bins.levels)
    order = np.lexsort((np.arange(len(lab)), lab))
    start = np.searchsorted(lab[order], np.arange(nb + 1), side="left").astype(np.int64)
    counts = np.bincount(lab * pool.num_nodes + pool.node, minlength=nb * pool.num_nodes)
    counts = counts.reshape(nb, pool.num_nodes).astype(np.int64)
    rack_counts = None
    if pool.has_racks:
        rack_counts = np.zeros((nb, pool.num_racks), dtype=np.int64)
        np.add.at(rack_counts, (slice(None), pool.rack_of_node), counts)
    return _ClassBins(bins=bins, lab=lab, vals=np.asarray(bins.levels, dtype=float),
                      vals_t=tuple(float(v) for v in bins.levels), bin_order=order,
                      bin_start=start, counts0=counts, rack_counts0=rack_counts)


# ---------------------------------------------------------------------------------------------------------
# Per-round state: free GPUs and free counts per (bin, node) for the classes in use
# ---------------------------------------------------------------------------------------------------------
class _Counts:
    __slots__ = ("cb", "c", "t", "r")

    def __init__(self, cb: _ClassBins) -> None:
        self.cb = cb
        self.c = cb.counts0.copy()
        self.t = self.c.sum(axis=1)
        self.r = None if cb.rack_counts0 is None else cb.rack_counts0.copy()


class _RoundPool:
    """Free GPUs of one pool during one placement round."""

    def __init__(self, pool: _Pool) -> None:
        self.pool = pool
        self.free = np.ones(len(pool.gpus), dtype=bool)
        self.free_node = pool.node_size.copy()
        self.free_total = len(pool.gpus)
        self._counts: dict[int, _Counts] = {}

    def counts(self, cls: str) -> _Counts:
        cb = self.pool.classes[cls]
        got = self._counts.get(id(cb))
        if got is None:
            got = _Counts(cb)
            if self.free_total < len(self.pool.gpus):  # GPUs were taken before this class was first used
                taken = np.flatnonzero(~self.free)
                _subtract(got, cb.lab[taken], self.pool.node[taken], self.pool)
            self._counts[id(cb)] = got
        return got

    def take(self, local: np.ndarray) -> None:
        pool = self.pool
        self.free[local] = False
        nodes = pool.node[local]
        if len(local) == 1:
            self.free_node[nodes[0]] -= 1
        else:
            np.subtract.at(self.free_node, nodes, 1)
        self.free_total -= len(local)
        for cnt in self._counts.values():
            _subtract(cnt, cnt.cb.lab[local], nodes, pool)


def _subtract(cnt: _Counts, bins: np.ndarray, nodes: np.ndarray, pool: _Pool) -> None:
    if len(bins) == 1:
        b, n = int(bins[0]), int(nodes[0])
        cnt.c[b, n] -= 1
        cnt.t[b] -= 1
        if cnt.r is not None:
            cnt.r[b, pool.rack_of_node[n]] -= 1
        return
    np.subtract.at(cnt.c, (bins, nodes), 1)
    np.subtract.at(cnt.t, bins, 1)
    if cnt.r is not None:
        np.subtract.at(cnt.r, (bins, pool.rack_of_node[nodes]), 1)


# ---------------------------------------------------------------------------------------------------------
# Algorithm 1: PM-First
# ---------------------------------------------------------------------------------------------------------
def _node_gpus_in_bin(rp: _RoundPool, cb: _ClassBins, node: int, b: int, take: int) -> np.ndarray:
    lo, hi = rp.pool.node_off[node], rp.pool.node_off[node + 1]
    ids = np.arange(lo, hi)
    return ids[(cb.lab[lo:hi] == b) & rp.free[lo:hi]][:take]


def pm_first_gpus(rp: _RoundPool, cls: str, n: int, node_mask: np.ndarray | None = None) -> np.ndarray | None:
    """Local ids of the ``n`` free GPUs with the best PM-scores of ``cls`` (Algorithm 1), or None.

    Bins are taken best first. In the last bin needed, nodes are taken in order of how closely their count of
    such free GPUs matches ``n`` (then node id), as PAL's implementation breaks ties.
    ``node_mask`` restricts the choice to some nodes (PAL's within-rack level).
    """
    cnt = rp.counts(cls)
    cb = cnt.cb
    totals = cnt.t if node_mask is None else cnt.c[:, node_mask].sum(axis=1)
    if int(totals.sum()) < n:
        return None
    need = n
    parts: list[np.ndarray] = []
    for b in range(len(totals)):
        t = int(totals[b])
        if t == 0:
            continue
        if t <= need:
            seg = cb.bin_order[cb.bin_start[b]:cb.bin_start[b + 1]]
            keep = rp.free[seg]
            if node_mask is not None:
                keep &= node_mask[rp.pool.node[seg]]
            parts.append(seg[keep])
            need -= t
        else:
            row = cnt.c[b] if node_mask is None else np.where(node_mask, cnt.c[b], 0)
            key = np.where(row > 0, np.abs(row - n), _BIG)
            while need > 0:
                node = int(np.argmin(key))
                got = _node_gpus_in_bin(rp, cb, node, b, min(int(row[node]), need))
                parts.append(got)
                need -= len(got)
                key[node] = _BIG
        if need == 0:
            break
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _bin_gpus_on_nodes(rp: _RoundPool, cb: _ClassBins, nodes: np.ndarray, b: int) -> np.ndarray:
    """Free GPUs of bin ``b`` on ``nodes``, in the nodes' order and GPU-id order within a node."""
    pool = rp.pool
    idx = pool.node_off[nodes][:, None] + np.arange(pool.max_node)[None, :]
    idx = idx[idx < pool.node_off[nodes + 1][:, None]]
    return idx[(cb.lab[idx] == b) & rp.free[idx]]


def pm_first_singles(rp: _RoundPool, cls: str, m: int) -> np.ndarray:
    """``m`` GPUs for ``m`` consecutive single-GPU jobs of one class, in the order Algorithm 1 picks them.

    Identical to ``m`` calls of :func:`pm_first_gpus` with ``n = 1``: within a bin the best match for one GPU
    is the node with the fewest such free GPUs, which stays the best match until it runs out, so the picks
    walk nodes in order of (count, node id) and each node's GPUs in id order. Counts are at most a node's
    size, so the walk visits count buckets, touching only the nodes it takes from.
    """
    cnt = rp.counts(cls)
    cb = cnt.cb
    need = min(m, rp.free_total)
    parts: list[np.ndarray] = []
    for b in range(len(cnt.t)):
        t = int(cnt.t[b])
        if t == 0:
            continue
        row = cnt.c[b]
        left = min(t, need)
        need -= left
        for c in range(1, rp.pool.max_node + 1):
            nodes = np.flatnonzero(row == c)
            if not len(nodes):
                continue
            got = _bin_gpus_on_nodes(rp, cb, nodes[: -(-left // c)], b)[:left]
            parts.append(got)
            left -= len(got)
            if left == 0:
                break
        if need == 0:
            break
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


# ---------------------------------------------------------------------------------------------------------
# Algorithm 2: PAL
# ---------------------------------------------------------------------------------------------------------
def _first_bin_with(counts: np.ndarray, n: int) -> tuple[int, np.ndarray] | None:
    """First bin b at which some column (node or rack) has ``n`` free GPUs scoring <= bin b; and which."""
    run = np.zeros(counts.shape[1], dtype=np.int64)
    for b in range(counts.shape[0]):
        run += counts[b]
        ok = run >= n
        if ok.any():
            return b, ok
    return None


def pal_gpus(rp: _RoundPool, cls: str, n: int, penalties: tuple[float, float, float]) -> tuple[np.ndarray | None, int]:
    """Algorithm 2 for a job of ``n`` GPUs whose L x V matrix has ``penalties`` (node, rack, across).

    Returns the local GPU ids (or None) and the locality level used (0 node, 1 rack, 2 across).
    """
    pool = rp.pool
    if rp.free_total < n:
        return None, _ACROSS
    fits_node = n <= pool.max_node
    fits_rack = pool.has_racks and n <= pool.max_rack
    if n <= 1 or not (fits_node or fits_rack):
        return pm_first_gpus(rp, cls, n), _ACROSS
    cnt = rp.counts(cls)
    cb = cnt.cb
    node_hit = _first_bin_with(cnt.c, n) if fits_node else None
    rack_hit = _first_bin_with(cnt.r, n) if fits_rack and cnt.r is not None else None
    across_bin = int(np.searchsorted(np.cumsum(cnt.t), n, side="left"))
    levels = penalties if pool.has_racks else (penalties[0], penalties[2])
    for li, vi in traversal_order(levels, cb.vals_t):
        level = li if pool.has_racks else (_NODE if li == 0 else _ACROSS)
        if level == _NODE:
            if node_hit is not None and vi >= node_hit[0]:
                return _packed_on_node(rp, cb, node_hit[1], n), _NODE
        elif level == _RACK:
            if rack_hit is not None and vi >= rack_hit[0]:
                ok = rack_hit[1]
                free_rack = np.bincount(pool.rack_of_node, weights=rp.free_node, minlength=pool.num_racks)
                rack = int(np.argmin(np.where(ok, free_rack, np.inf)))
                return pm_first_gpus(rp, cls, n, node_mask=pool.rack_of_node == rack), _RACK
        elif vi >= across_bin:
            return pm_first_gpus(rp, cls, n), _ACROSS
    return None, _ACROSS  # unreachable: the loosest entry with the worst bin always fits


def _packed_on_node(rp: _RoundPool, cb: _ClassBins, ok: np.ndarray, n: int) -> np.ndarray:
    """The best packed allocation: on a node holding ``n`` free GPUs of the best reachable bin, its ``n``
    best GPUs; among such nodes the one with the fewest free GPUs (best fit), then the lowest id."""
    node = int(np.argmin(np.where(ok, rp.free_node, _BIG)))
    lo, hi = rp.pool.node_off[node], rp.pool.node_off[node + 1]
    ids = np.arange(lo, hi)[rp.free[lo:hi]]
    return ids[np.argsort(cb.lab[ids], kind="stable")[:n]]


# ---------------------------------------------------------------------------------------------------------
# The placement stages
# ---------------------------------------------------------------------------------------------------------
def cut_queue(demands: list[Demand], capacity: int) -> list[Demand]:
    """The demands the scheduling policy guarantees this round: its order up to the first overflow."""
    cum = np.cumsum([d.num_gpus for d in demands])
    return demands[: int(np.searchsorted(cum, capacity, side="right"))]


@dataclass
class PmFirstPlacement(PlacementStage):
    """PM-First (Algorithm 1): each job of the cut queue, class A first, takes its class's best free GPUs.

    Tunables: the binning (``k_min``, ``k_max``, ``outlier_sigma``; ``binned=False`` uses the raw measured
    scores, PAL's "fine-grained" variant).
    """

    k_min: int = K_MIN
    k_max: int = K_MAX
    outlier_sigma: float = OUTLIER_SIGMA
    binned: bool = True
    #: Keep a running job on its GPUs when its demand is unchanged (PAL's placements are non-sticky; this
    #: serves allocations that resize jobs, such as Sia's, which would otherwise restart every round).
    sticky: bool = False
    name: str = "pm-first"
    _layout: tuple | None = field(default=None, init=False, repr=False)
    #: Counts of placements per locality level in the last round (for tests and reports).
    last_levels: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    # -- shared driver --------------------------------------------------------------------------------
    def _pools(self, view: ClusterView) -> dict[str, _Pool]:
        scores = view.gpu_scores
        key = (id(view.cluster), None if scores is None else tuple((c, id(a)) for c, a in scores.items()))
        if self._layout is not None and self._layout[0] == key and self._layout[1] is view.cluster \
                and self._layout[2] is scores:
            return self._layout[3]
        classes = tuple(dict.fromkeys([*(scores or {}), *sorted(set(view.model_class.values())), DEFAULT_CLASS]))
        params = {"k_min": self.k_min, "k_max": self.k_max,
                  "outlier_sigma": self.outlier_sigma if self.binned else 0.0}
        if not self.binned:
            params["k_max"] = 0  # no sweep: every distinct score is its own level
        pools = _build_pools(view.cluster, scores, classes, params)
        self._layout = (key, view.cluster, scores, pools)
        return pools

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        pools = self._pools(view)
        free_pool, decision, demands = start_placement(view, plan)
        if self.sticky:
            moving = []
            for d in demands:
                if keeps_current(view, free_pool, d):
                    free_pool.take(d.job.placement.gpus)
                    decision.place(d.job.job_id, d.job.placement, d.batch_size)
                else:
                    moving.append(d)
            demands = moving
        queue = cut_queue(demands, int(free_pool.free_mask.sum()))
        specs = [d.job.spec for d in queue]
        mc = view.model_class
        by_model = {m: mc.get(m, DEFAULT_CLASS) for m in {sp.model for sp in specs}}
        classes = [by_model[sp.model] for sp in specs]
        ranks = {c: class_rank(c) for c in by_model.values()}
        for cls in ranks:
            for pool in pools.values():
                if cls not in pool.classes:  # a class the layout has not seen: bins of the default class
                    pool.classes[cls] = pool.classes[DEFAULT_CLASS]
        key = [ranks[c] for c in classes]
        order = sorted(range(len(queue)), key=key.__getitem__)
        q = [queue[k] for k in order]
        qc = [classes[k] for k in order]
        #: Demands that accept any GPU type (the common case), so runs of them need no per-job type check.
        free_type = [d.gpu_type is None and not specs[k].gpu_types for d, k in zip(q, order, strict=True)]
        rounds = {t: _RoundPool(p) for t, p in pools.items()}
        if not free_pool.free_mask.all():  # reserved, pinned, kept or profiling GPUs are not ours to place on
            for rp in rounds.values():
                held = np.flatnonzero(~free_pool.free_mask[rp.pool.gpus])
                if len(held):
                    rp.take(held)
        levels = {"within": 0, "rack": 0, "across": 0}
        allocs = decision.allocations
        i, n = 0, len(q)
        while i < n:
            d, cls = q[i], qc[i]
            rp = self._choose_pool(rounds, d)
            if rp is None:
                i += 1
                continue
            if d.num_gpus == 1:
                # A run of single-GPU jobs of this class that accept this pool: place them in one pass.
                j = i + 1
                while j < n and q[j].num_gpus == 1 and qc[j] == cls and (free_type[j] or self._accepts(q[j], rp)):
                    j += 1
                picks = pm_first_singles(rp, cls, j - i)
                if not len(picks):
                    i += 1
                    continue
                single = rp.pool.single
                for dd, g in zip(q[i:i + len(picks)], picks.tolist(), strict=True):
                    allocs[dd.job.job_id] = single(g, dd.batch_size)
                rp.take(picks)
                levels["within"] += len(picks)
                i += len(picks)
                continue
            i += 1
            gpus, level = self._choose(view, rp, d, cls)
            if gpus is None or len(gpus) != d.num_gpus:
                continue
            rp.take(gpus)
            allocs[d.job.job_id] = Allocation(Placement.of(rp.pool.gpus[gpus].tolist()), d.batch_size)
            nodes = rp.pool.node[gpus]
            spans = bool(nodes.min() != nodes.max())
            levels["within" if not spans else ("rack" if level == _RACK else "across")] += 1
        self.last_levels = levels
        decision.info.update({f"{self.name}.{k}": float(v) for k, v in levels.items()})
        return decision

    @staticmethod
    def _accepts(d: Demand, rp: _RoundPool) -> bool:
        gtype = rp.pool.gtype
        return (d.gpu_type is None or d.gpu_type == gtype) and d.job.spec.allows_gpu_type(gtype)

    def _choose_pool(self, rounds: dict[str, _RoundPool], d: Demand) -> _RoundPool | None:
        """The GPU type to place on: the demanded one, else the most powerful allowed type with room."""
        names = [d.gpu_type] if d.gpu_type else list(reversed(list(rounds)))
        for t in names:
            rp = rounds.get(t)
            if rp is not None and d.job.spec.allows_gpu_type(t) and rp.free_total >= d.num_gpus:
                return rp
        return None

    def _choose(self, view: ClusterView, rp: _RoundPool, d: Demand, cls: str) -> tuple[np.ndarray | None, int]:
        return pm_first_gpus(rp, cls, d.num_gpus), _ACROSS


@dataclass
class PalPlacement(PmFirstPlacement):
    """PAL (Algorithm 2): PM-First's class order, with each job's L x V matrix deciding packing vs variability.

    ``l_across``: the cross-node locality penalty the matrix assumes; None uses PAL's per-(model, GPU count)
    penalties (``pal_simulation_constants.json``; 1.0 where not measured), a number applies to every job
    (PAL's Synergy runs use 1.7). ``l_rack``: the penalty of spanning nodes inside one rack, for clusters
    whose file names racks (default halfway between 1 and ``l_across``).
    """

    l_across: float | None = None
    l_rack: float | None = None
    name: str = "pal"
    _penalties: LocalityPenalties | None = field(default=None, init=False, repr=False)

    def penalties_for(self, model: str, num_gpus: int) -> tuple[float, float, float]:
        """(within node, within rack, across) penalties of the L x V matrix for a job."""
        if self.l_across is not None:
            across = float(self.l_across)
        else:
            if self._penalties is None:
                self._penalties = LocalityPenalties.from_data()
            across = self._penalties.penalty(model, num_gpus)
        rack = self.l_rack if self.l_rack is not None else default_rack_penalty(across)
        return 1.0, float(rack), across

    def _choose(self, view: ClusterView, rp: _RoundPool, d: Demand, cls: str) -> tuple[np.ndarray | None, int]:
        return pal_gpus(rp, cls, d.num_gpus, self.penalties_for(d.job.spec.model, d.num_gpus))

    def matrix(self, view: ClusterView, model: str, num_gpus: int) -> LvMatrix:
        """The L x V matrix this policy would use for a job of ``model`` on ``num_gpus`` GPUs (for reports)."""
        pools = self._pools(view)
        pool = next(iter(pools.values()))
        cls = view.model_class.get(model, DEFAULT_CLASS)
        cb = pool.classes.get(cls, pool.classes[DEFAULT_CLASS])
        _, rack, across = self.penalties_for(model, num_gpus)
        return lv_matrix(cb.vals, across, l_rack=rack, racks=pool.has_racks)
