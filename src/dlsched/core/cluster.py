"""Cluster topology: nodes of GPUs, each GPU with a stable global identity.

GPUs are numbered 0..N-1 in node order, so a placement can be a plain tuple of integers and per-GPU
arrays (type, node, speed) can be numpy vectors indexed by GPU id. ``speed_factor`` models server-level
heterogeneity (Hops): two servers with the same GPU type may run at different speeds (CPU, PCIe, cooling);
1.0 is nominal and 1.2 means 20% more throughput.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from dlsched.core.gpu import GpuType


@dataclass(frozen=True, slots=True)
class Node:
    """One server: a number of GPUs of a single type."""

    node_id: int
    gpu_type: str
    num_gpus: int
    speed_factor: float = 1.0
    rack: str | None = None
    name: str = ""
    #: Server model (host CPU, memory, data loading) when servers of one GPU type differ, as in Hops's
    #: Sugon and TIGERWAY RTX 3090 servers; empty when the cluster does not say.
    host: str = ""


@dataclass(frozen=True)
class Cluster:
    """An immutable set of nodes; GPU ids are assigned in node order."""

    name: str
    nodes: tuple[Node, ...]
    gpu_types: dict[str, GpuType] = field(default_factory=dict)
    #: Name of the measured per-GPU variability profile family the cluster's GPUs are drawn from
    #: (``longhorn``, ``frontera``, ``ls6``) or None when GPUs of a type are assumed identical.
    variability: str | None = None

    @cached_property
    def num_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)

    @cached_property
    def gpu_offset(self) -> np.ndarray:
        """First global GPU id of each node."""
        sizes = np.array([n.num_gpus for n in self.nodes], dtype=np.int64)
        return np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(sizes) else np.zeros(0, dtype=np.int64)

    @cached_property
    def gpu_node(self) -> np.ndarray:
        """Node id of every GPU (indexed by global GPU id)."""
        return np.repeat(np.arange(len(self.nodes)), [n.num_gpus for n in self.nodes])

    @cached_property
    def gpu_type_of(self) -> tuple[str, ...]:
        """GPU type name of every GPU."""
        return tuple(t for n in self.nodes for t in [n.gpu_type] * n.num_gpus)

    @cached_property
    def gpu_type_index(self) -> np.ndarray:
        """Index into :attr:`type_names` of every GPU, for vectorised per-type work."""
        lookup = {t: i for i, t in enumerate(self.type_names)}
        return np.array([lookup[t] for t in self.gpu_type_of], dtype=np.int64)

    @cached_property
    def type_names(self) -> tuple[str, ...]:
        """GPU types present, ordered from least to most powerful."""
        present = {n.gpu_type for n in self.nodes}
        return tuple(sorted(present, key=lambda t: (self.gpu_types[t].rank if t in self.gpu_types else 0, t)))

    @cached_property
    def gpus_per_type(self) -> dict[str, int]:
        out: dict[str, int] = {t: 0 for t in self.type_names}
        for n in self.nodes:
            out[n.gpu_type] += n.num_gpus
        return out

    @cached_property
    def nodes_of_type(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, list[int]] = {t: [] for t in self.type_names}
        for n in self.nodes:
            out[n.gpu_type].append(n.node_id)
        return {t: tuple(v) for t, v in out.items()}

    @cached_property
    def node_speed(self) -> np.ndarray:
        return np.array([n.speed_factor for n in self.nodes], dtype=float)

    def gpus_of_node(self, node_id: int) -> range:
        start = int(self.gpu_offset[node_id])
        return range(start, start + self.nodes[node_id].num_gpus)

    def first_gpu_of_each_type(self, gpus: Iterable[int]) -> dict[str, int]:
        """The first of ``gpus`` on each GPU type, in their order: a profile runs one single-GPU job per type
        (Sia, Hops), so ``dlsched run`` and the service launch one per entry."""
        out: dict[str, int] = {}
        for g in gpus:
            out.setdefault(self.gpu_type_of[g], int(g))
        return out

    def max_gpus_single_type(self) -> int:
        """The largest gang any single-type job can ever get."""
        return max(self.gpus_per_type.values(), default=0)

    def describe(self) -> str:
        parts = []
        for t in self.type_names:
            sizes: dict[int, int] = {}
            for nid in self.nodes_of_type[t]:
                k = self.nodes[nid].num_gpus
                sizes[k] = sizes.get(k, 0) + 1
            parts.append(" + ".join(f"{c} {t} x{k}" for k, c in sorted(sizes.items())))
        return ", ".join(parts) + f" ({self.num_gpus} GPUs)"


def make_cluster(name: str, groups: Iterable[tuple[str, int, int]], gpu_types: dict[str, GpuType],
                 variability: str | None = None) -> Cluster:
    """Build a cluster from (gpu_type, node_count, gpus_per_node) groups; handy in tests and generators."""
    nodes: list[Node] = []
    for gtype, count, per_node in groups:
        for _ in range(count):
            nodes.append(Node(node_id=len(nodes), gpu_type=gtype, num_gpus=per_node, name=f"{gtype}-{len(nodes)}"))
    return Cluster(name=name, nodes=tuple(nodes), gpu_types=gpu_types, variability=variability)
