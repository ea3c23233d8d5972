"""PAL's per-GPU-type pools: the static layout of a cluster's GPUs with each class's PM-score bins (built
once per scores array), and the free-GPU counts of one placement round (per bin and node), which the
placement algorithms of :mod:`.choice` read and update."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import Cluster, Placement
from dlsched.core.decision import Allocation
from dlsched.estimators.classifier import DEFAULT_CLASS
from dlsched.estimators.pm_bins import BINS, PmBins


# ---------------------------------------------------------------------------------------------------------
# Static layout: per GPU type, the GPUs, nodes, racks and each class's bins (built once per scores array)
# ---------------------------------------------------------------------------------------------------------
@dataclass
class ClassBins:
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
class Pool:
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
    classes: dict[str, ClassBins] = field(default_factory=dict)
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


def build_pools(cluster: Cluster, scores: Mapping[str, np.ndarray] | None, classes: tuple[str, ...],
                 bin_params: dict) -> dict[str, Pool]:
    racks_named = any(n.rack is not None for n in cluster.nodes)
    pools: dict[str, Pool] = {}
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
        pool = Pool(gtype=gtype, gpus=gpus, node=node_local, node_off=off, node_size=sizes,
                     rack_of_node=rack_of_node, num_racks=len(uniq), rack_size=rack_size,
                     max_node=int(sizes.max()), max_rack=int(rack_size.max()),
                     has_racks=racks_named and len(uniq) > 1)
        shared: dict[int, ClassBins] = {}
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


def _class_bins(bins: PmBins, pool: Pool) -> ClassBins:
    lab = bins.labels.astype(np.int64)
    nb = len(bins.levels)
    order = np.lexsort((np.arange(len(lab)), lab))
    start = np.searchsorted(lab[order], np.arange(nb + 1), side="left").astype(np.int64)
    counts = np.bincount(lab * pool.num_nodes + pool.node, minlength=nb * pool.num_nodes)
    counts = counts.reshape(nb, pool.num_nodes).astype(np.int64)
    rack_counts = None
    if pool.has_racks:
        rack_counts = np.zeros((nb, pool.num_racks), dtype=np.int64)
        # numpy's stubs leave out slices in the index, which ufunc.at takes
        np.add.at(rack_counts, (slice(None), pool.rack_of_node), counts)  # type: ignore[arg-type]
    return ClassBins(bins=bins, lab=lab, vals=np.asarray(bins.levels, dtype=float),
                      vals_t=tuple(float(v) for v in bins.levels), bin_order=order,
                      bin_start=start, counts0=counts, rack_counts0=rack_counts)


# ---------------------------------------------------------------------------------------------------------
# Per-round state: free GPUs and free counts per (bin, node) for the classes in use
# ---------------------------------------------------------------------------------------------------------
class _Counts:
    __slots__ = ("cb", "c", "t", "r")

    def __init__(self, cb: ClassBins) -> None:
        self.cb = cb
        self.c = cb.counts0.copy()
        self.t = self.c.sum(axis=1)
        self.r = None if cb.rack_counts0 is None else cb.rack_counts0.copy()


class RoundPool:
    """Free GPUs of one pool during one placement round."""

    def __init__(self, pool: Pool) -> None:
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


def _subtract(cnt: _Counts, bins: np.ndarray, nodes: np.ndarray, pool: Pool) -> None:
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
