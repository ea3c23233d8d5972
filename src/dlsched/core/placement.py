"""Placements (exact GPUs) and configurations (GPU type, node count, GPU count).

A placement is a sorted tuple of global GPU ids; the cluster maps ids to nodes. Keeping it a tuple of ints
makes placements hashable, cheap to compare ("did the job move?") and easy to check for double booking.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dlsched.core.cluster import Cluster


@dataclass(frozen=True, slots=True)
class Configuration:
    """A resource shape: ``num_gpus`` GPUs of ``gpu_type`` spread over ``num_nodes`` nodes."""

    gpu_type: str
    num_nodes: int
    num_gpus: int


@dataclass(frozen=True, slots=True)
class Placement:
    """The exact GPUs a job holds (global GPU ids, sorted, unique)."""

    gpus: tuple[int, ...] = ()

    @staticmethod
    def empty() -> Placement:
        return _EMPTY

    @staticmethod
    def of(gpus) -> Placement:
        return Placement(tuple(sorted(int(g) for g in gpus)))

    def __len__(self) -> int:
        return len(self.gpus)

    def __bool__(self) -> bool:
        return bool(self.gpus)

    @property
    def num_gpus(self) -> int:
        return len(self.gpus)

    def by_node(self, cluster: Cluster) -> dict[int, tuple[int, ...]]:
        """Node id -> local GPU indices on that node."""
        out: dict[int, list[int]] = {}
        for g in self.gpus:
            node = int(cluster.gpu_node[g])
            out.setdefault(node, []).append(g - int(cluster.gpu_offset[node]))
        return {n: tuple(v) for n, v in out.items()}

    def node_counts(self, cluster: Cluster) -> tuple[int, ...]:
        """GPUs used on each node the placement touches, largest first (the Sia profile 'placement' digits)."""
        counts = Counter(int(cluster.gpu_node[g]) for g in self.gpus)
        return tuple(sorted(counts.values(), reverse=True))

    def num_nodes(self, cluster: Cluster) -> int:
        return len({int(cluster.gpu_node[g]) for g in self.gpus})

    def gpu_types(self, cluster: Cluster) -> set[str]:
        return {cluster.gpu_type_of[g] for g in self.gpus}

    def configuration(self, cluster: Cluster) -> Configuration:
        types = self.gpu_types(cluster)
        gtype = next(iter(types)) if len(types) == 1 else "+".join(sorted(types))
        return Configuration(gtype, self.num_nodes(cluster), self.num_gpus)


_EMPTY = Placement(())
