"""Hops's location-specific configurations (section 3.4) and how they are generated (section 3.6).

A configuration names servers and GPUs per server, ``{0: 2, 2: 4}``: 2 GPUs on server 0 and 4 on server 2.
Per GPU type, from the idle GPUs ``S_t`` of each server ``t`` of the type and the job's requirement set
``R``:

* aggregated configurations: ``{t: R_k}`` on every server with room for ``R_k`` (the paper writes
  ``R_k < S_t``; an exact fit is allowed here, or a job could never fill an empty server);
* distributed configurations, only for low-sensitivity jobs: for each ``R_k`` and each server of the type
  in node order, servers from there on with idle GPUs, each filled as much as possible, until ``R_k`` is
  covered. That is at most one configuration per (requirement, starting server), so the count stays
  linear in servers; once the servers left cannot cover ``R_k``, no later start can either and the walk
  for ``R_k`` stops.
* a high-sensitivity job gets distributed configurations only for requirements no single server of the
  type can hold (the paper's exception for minimum requirements above a server's size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Config:
    """``servers``: (node id, GPUs) pairs, node ids ascending, all of ``gpu_type``."""

    gpu_type: str
    servers: tuple[tuple[int, int], ...]

    @property
    def num_gpus(self) -> int:
        return sum(k for _, k in self.servers)

    @property
    def num_nodes(self) -> int:
        return len(self.servers)

    def node_counts(self) -> tuple[int, ...]:
        """GPUs per server, largest first (the shape an estimator is asked about)."""
        return tuple(sorted((k for _, k in self.servers), reverse=True))


def type_configs(gpu_type: str, idle: Sequence[tuple[int, int]], requirements: Sequence[int], *,
                 distributed: bool, server_size: int) -> list[Config]:
    """Configurations on one GPU type; ``idle`` is (node id, idle GPUs) per server of the type in node order,
    ``server_size`` the largest server of the type."""
    out: list[Config] = []
    seen: set[tuple[tuple[int, int], ...]] = set()

    def add(servers: tuple[tuple[int, int], ...]) -> None:
        if servers not in seen:
            seen.add(servers)
            out.append(Config(gpu_type, servers))

    for r in requirements:
        for node, free in idle:
            if 0 < r <= free:
                add(((node, r),))
    open_servers = [(n, f) for n, f in idle if f > 0]
    for r in requirements:
        if not distributed and r <= server_size:
            continue
        for start in range(len(open_servers)):
            left, chosen = r, []
            for node, free in open_servers[start:]:
                take = min(free, left)
                chosen.append((node, take))
                left -= take
                if left == 0:
                    break
            if left > 0:
                break  # the servers from here on cannot cover r; later starts have fewer
            if len(chosen) >= 2:
                add(tuple(chosen))
    return out
