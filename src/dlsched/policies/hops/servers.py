"""What a Hops plan reads off the servers: the GPUs it may use on each, a job's current servers, a GPU to
profile a new job on, and which servers no plan can tell apart.

Facts of the cluster view, apart from the planner (:mod:`dlsched.policies.hops.allocation`) that decides with
them.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from dlsched.core import ClusterView, JobView


def interchangeable_servers(view: ClusterView, window: list[JobView], idle: np.ndarray,
                     known: Collection[int] = ()) -> tuple[tuple[int, int], ...]:
    """Consecutive pairs of servers no plan can tell apart (same GPU type, size, host and idle GPUs, no job
    of the window on them, whose current configuration would favour one, and none the estimator knows
    apart: ``known``, servers with a server-layer record for a job of the window): the solver may load the
    earlier one at least as much, which spares it searching mirror images of one plan."""
    cluster = view.cluster
    held = {n for j in window if j.placement for n in j.placement.by_node(cluster)} | set(known)
    last: dict[tuple[str, int, str, int], int] = {}
    pairs = []
    for node in cluster.nodes:
        if node.node_id in held or idle[node.node_id] <= 0:
            continue
        key = (node.gpu_type, node.num_gpus, node.host, int(idle[node.node_id]))
        if key in last:
            pairs.append((last[key], node.node_id))
        last[key] = node.node_id
    return tuple(pairs)


def profile_gpu(cluster, nodes, busy: np.ndarray, taken: np.ndarray, idle: np.ndarray) -> int | None:
    """One GPU of ``nodes`` to profile on: a free one on the fullest server with one, else one a running job
    holds on the server with the fewest such; None when every GPU is taken or held for profiling."""
    best: tuple[int, int, int] | None = None
    for n in nodes:
        if idle[n] <= 0:
            continue
        gpus = [g for g in cluster.gpus_of_node(n) if not taken[g]]
        free = [g for g in gpus if not busy[g]]
        key = (0, len(free), n) if free else (1, len(gpus) - len(free), n)
        if best is None or key < best:
            best = key
    if best is None:
        return None
    gpus = [g for g in cluster.gpus_of_node(best[2]) if not taken[g]]
    free = [g for g in gpus if not busy[g]]
    return (free or gpus)[0]


def idle_per_server(view: ClusterView, *, running_held: bool) -> np.ndarray:
    """GPUs a plan may use, per server: every GPU but those profiles still hold and, with ``running_held``,
    those of running jobs (a round's first plan may move running jobs; a plan inside a round may not)."""
    cluster = view.cluster
    idle = np.array([n.num_gpus for n in cluster.nodes], dtype=np.int64)
    for j in view.jobs:
        held = [j.profile_placement, j.placement] if running_held else [j.profile_placement]
        for placement in held:
            for node, gpus in placement.by_node(cluster).items():
                idle[node] -= len(gpus)
    return idle


def current_servers(view: ClusterView, job: JobView) -> tuple[tuple[int, int], ...]:
    """The job's current placement as (node id, GPUs) pairs, node ids ascending."""
    if not job.placement:
        return ()
    return tuple(sorted((n, len(g)) for n, g in job.placement.by_node(view.cluster).items()))
