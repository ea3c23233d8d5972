"""Sia's configurations of a cluster (thesis section 3.3.3).

Per GPU type with ``R`` GPUs per node: ``1, 2, 4, .., R`` GPUs on one node, and ``2R, 3R, ..`` on whole
nodes. Restricting jobs to these shapes keeps the ILP small and guarantees that any allocation within the
per-type GPU counts has a placement (see :mod:`dlsched.policies.sia.placer`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlsched.core import Cluster


@dataclass(frozen=True)
class ConfigSet:
    """Sia's configurations of a cluster: parallel arrays, one entry per (type, nodes, GPUs)."""

    type_names: tuple[str, ...]
    type_idx: np.ndarray
    nodes: np.ndarray
    gpus: np.ndarray
    #: GPUs per (largest) node and total GPUs, per type.
    node_size: np.ndarray
    capacity: np.ndarray

    def __len__(self) -> int:
        return len(self.gpus)

    def describe(self) -> list[tuple[int, int, str]]:
        """(nodes, GPUs, type) triples, the thesis's notation."""
        return [(int(n), int(k), self.type_names[t]) for n, k, t in zip(self.nodes, self.gpus, self.type_idx,
                                                                        strict=True)]


def build_config_set(cluster: Cluster) -> ConfigSet:
    """Powers of two up to a node (plus the node size if it is not one), then whole nodes."""
    t_idx, nodes, gpus = [], [], []
    sizes, caps = [], []
    for ti, t in enumerate(cluster.type_names):
        node_ids = cluster.nodes_of_type[t]
        per = max(cluster.nodes[n].num_gpus for n in node_ids)
        full = sum(1 for n in node_ids if cluster.nodes[n].num_gpus == per)
        single = [1 << i for i in range(per.bit_length()) if (1 << i) <= per]
        if single[-1] != per:
            single.append(per)
        for k in single:
            t_idx.append(ti)
            nodes.append(1)
            gpus.append(k)
        for n in range(2, full + 1):
            t_idx.append(ti)
            nodes.append(n)
            gpus.append(n * per)
        sizes.append(per)
        caps.append(cluster.gpus_per_type[t])
    return ConfigSet(type_names=tuple(cluster.type_names), type_idx=np.array(t_idx, dtype=np.int64),
                     nodes=np.array(nodes, dtype=np.int64), gpus=np.array(gpus, dtype=np.int64),
                     node_size=np.array(sizes, dtype=np.int64), capacity=np.array(caps, dtype=np.int64))


def current_config(cluster: Cluster, cs: ConfigSet, placement) -> tuple[int, int, int]:
    """(type index, nodes, GPUs) of a job's current placement."""
    gtype = cluster.gpu_type_of[placement.gpus[0]]
    return cs.type_names.index(gtype), placement.num_nodes(cluster), len(placement)


def reserved_gpus(cluster: Cluster, reservations: list[tuple[str, int]]) -> np.ndarray | None:
    """Mask of GPUs taken out of Sia's hands: per reservation ``type:count``, whole nodes from the end."""
    if not reservations:
        return None
    blocked = np.zeros(cluster.num_gpus, dtype=bool)
    for gtype, count in reservations:
        if gtype not in cluster.nodes_of_type:
            continue
        left = count
        for n in reversed(cluster.nodes_of_type[gtype]):
            for g in reversed(cluster.gpus_of_node(n)):
                if left <= 0:
                    break
                if not blocked[g]:
                    blocked[g] = True
                    left -= 1
    return blocked
