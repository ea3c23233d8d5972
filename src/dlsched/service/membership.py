"""The cluster the service schedules: the executor's live nodes, as the simulator's :class:`Cluster`.

A scheduler names GPUs by global id (0..N-1 in node order); the database names them by node name and
index on that node, which stays true when nodes come and go. This module converts between the two for the
membership of the moment, and says which stored placements lost a node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dlsched.core import KNOWN_GPU_TYPES, Cluster, InputError, Placement
from dlsched.core.cluster import Node


class NodeLike(Protocol):
    """What the service needs of an executor's node (``dlsched.runtime.executor.NodeInfo``)."""

    @property
    def name(self) -> str: ...
    @property
    def gpu_type(self) -> str: ...
    @property
    def num_gpus(self) -> int: ...


def build_cluster(name: str, nodes: Sequence[NodeLike]) -> Cluster:
    """A :class:`Cluster` of the live nodes, in name order (so GPU ids do not depend on the order Ray lists
    nodes in)."""
    out: list[Node] = []
    for info in sorted(nodes, key=lambda n: n.name):
        if info.gpu_type not in KNOWN_GPU_TYPES:
            raise InputError(f"node {info.name} has GPU type '{info.gpu_type}', which the catalog does not know "
                             f"(known: {', '.join(sorted(KNOWN_GPU_TYPES))})", field="cluster")
        out.append(Node(node_id=len(out), gpu_type=info.gpu_type, num_gpus=info.num_gpus, name=info.name))
    types = {n.gpu_type: KNOWN_GPU_TYPES[n.gpu_type] for n in out}
    return Cluster(name=name, nodes=tuple(out), gpu_types=types)


def signature(cluster: Cluster) -> tuple[tuple[str, str, int], ...]:
    """What identifies a membership: the same signature, the same GPU ids."""
    return tuple((n.name, n.gpu_type, n.num_gpus) for n in cluster.nodes)


#: The last clusters' nodes by name (a round converts every running job's placement against one cluster).
_BY_NAME: dict[int, tuple[Cluster, dict[str, Node]]] = {}


def _nodes_by_name(cluster: Cluster) -> dict[str, Node]:
    hit = _BY_NAME.get(id(cluster))
    if hit is not None and hit[0] is cluster:
        return hit[1]
    if len(_BY_NAME) >= 4:
        _BY_NAME.clear()
    by_name = {n.name: n for n in cluster.nodes}
    _BY_NAME[id(cluster)] = (cluster, by_name)
    return by_name


def to_global(cluster: Cluster, stored: dict[str, list[int]]) -> Placement | None:
    """The stored ``{node name: local GPU indices}`` as global GPU ids of ``cluster``; None when a node of
    it is gone (or lost GPUs), so the job's workers cannot be where the database says."""
    by_name = _nodes_by_name(cluster)
    gpus: list[int] = []
    for node_name, local in stored.items():
        node = by_name.get(node_name)
        if node is None or any(not 0 <= i < node.num_gpus for i in local):
            return None
        base = int(cluster.gpu_offset[node.node_id])
        gpus.extend(base + i for i in local)
    return Placement.of(sorted(gpus))


def to_stored(cluster: Cluster, placement: Placement) -> dict[str, list[int]]:
    """Global GPU ids of ``cluster`` as ``{node name: local GPU indices}`` for the database."""
    out: dict[str, list[int]] = {}
    for g in placement.gpus:
        node = cluster.nodes[int(cluster.gpu_node[g])]
        out.setdefault(node.name, []).append(int(g - cluster.gpu_offset[node.node_id]))
    return out


def ranks_of(cluster: Cluster, placement: Placement) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """One rank per GPU, in GPU id order: (node name, (local GPU index,))."""
    out = []
    for g in placement.gpus:
        node = cluster.nodes[int(cluster.gpu_node[g])]
        out.append((node.name, (int(g - cluster.gpu_offset[node.node_id]),)))
    return tuple(out)
