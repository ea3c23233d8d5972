"""How PM-First and PAL choose GPUs for one job inside a round's pool (PAL, Algorithms 1 and 2).

PM-First takes the free GPUs with the best PM-scores for the job's class, preferring among equal bins the
nodes whose count of such GPUs best matches the demand. PAL walks the class's L x V matrix (locality level
times bin) from the smallest product and takes the first entry that has room.
"""

from __future__ import annotations

import numpy as np

from dlsched.estimators.locality import traversal_order
from dlsched.policies.pal.pools import ClassBins, RoundPool

#: Larger than any count (masks nodes out of argmin/argsort).
_BIG = np.iinfo(np.int64).max // 4
# Locality levels of the L x V matrix.
_NODE, _RACK, _ACROSS = 0, 1, 2

def _node_gpus_in_bin(rp: RoundPool, cb: ClassBins, node: int, b: int, take: int) -> np.ndarray:
    lo, hi = rp.pool.node_off[node], rp.pool.node_off[node + 1]
    ids = np.arange(lo, hi)
    return ids[(cb.lab[lo:hi] == b) & rp.free[lo:hi]][:take]


def pm_first_gpus(rp: RoundPool, cls: str, n: int, node_mask: np.ndarray | None = None) -> np.ndarray | None:
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


def _bin_gpus_on_nodes(rp: RoundPool, cb: ClassBins, nodes: np.ndarray, b: int) -> np.ndarray:
    """Free GPUs of bin ``b`` on ``nodes``, in the nodes' order and GPU-id order within a node."""
    pool = rp.pool
    idx = pool.node_off[nodes][:, None] + np.arange(pool.max_node)[None, :]
    idx = idx[idx < pool.node_off[nodes + 1][:, None]]
    return idx[(cb.lab[idx] == b) & rp.free[idx]]


def pm_first_singles(rp: RoundPool, cls: str, m: int) -> np.ndarray:
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


def pal_gpus(rp: RoundPool, cls: str, n: int, penalties: tuple[float, float, float],
             note: dict[str, object] | None = None) -> tuple[np.ndarray | None, int]:
    """Algorithm 2 for a job of ``n`` GPUs whose L x V matrix has ``penalties`` (node, rack, across).

    Returns the local GPU ids (or None) and the locality level used (0 node, 1 rack, 2 across). ``note``,
    when given, receives the terms of the choice (the best bin each level could reach, the entry taken and
    its locality-times-variability product), for explanations.
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
    if note is not None:
        note.update(node_bin=None if node_hit is None else int(node_hit[0]),
                    rack_bin=None if rack_hit is None else int(rack_hit[0]), across_bin=across_bin,
                    penalties=[float(x) for x in levels], bin_values=[float(v) for v in cb.vals_t])
    for li, vi in traversal_order(levels, cb.vals_t):
        level = li if pool.has_racks else (_NODE if li == 0 else _ACROSS)
        if note is not None:
            note.update(level=level, bin=int(vi), product=float(levels[li] * cb.vals_t[vi]))
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


def _packed_on_node(rp: RoundPool, cb: ClassBins, ok: np.ndarray, n: int) -> np.ndarray:
    """The best packed allocation: on a node holding ``n`` free GPUs of the best reachable bin, its ``n``
    best GPUs; among such nodes the one with the fewest free GPUs (best fit), then the lowest id."""
    node = int(np.argmin(np.where(ok, rp.free_node, _BIG)))
    lo, hi = rp.pool.node_off[node], rp.pool.node_off[node + 1]
    ids = np.arange(lo, hi)[rp.free[lo:hi]]
    return ids[np.argsort(cb.lab[ids], kind="stable")[:n]]


# ---------------------------------------------------------------------------------------------------------
# The placement stages
# ---------------------------------------------------------------------------------------------------------
