"""What Pollux's search works on: the cluster as virtual nodes, and per-job speedup tables.

Pollux is heterogeneity-unaware. On a heterogeneous cluster this module does what the Sia authors did
(thesis section 3.4.3): nodes are presented as virtual nodes of the smallest node's size (8-GPU nodes become
two 4-GPU nodes), and a job the search spreads over several GPU types keeps only the GPUs of the type where
it has most (ties go to the more powerful type); the rest idle for the round. The search itself never learns a
virtual node's type or speed: its speedups come from one type-blind model per job. (A gang the cut leaves
short is completed on its type by the allocation stage, see ``PolluxAllocation._demands``.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dlsched.core import Cluster, Placement


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
        for v, vnode_gpus in enumerate(gpus):
            gpu_vnode[list(vnode_gpus)] = v
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
