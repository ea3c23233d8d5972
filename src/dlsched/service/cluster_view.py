"""``GET /v1/cluster``: the round loop's nodes with, for each GPU, the jobs that hold it.

A user sees another user's job as ``other`` (the dashboard's rule): that a GPU is taken is everyone's to
know, by which of someone else's jobs is not; an admin sees every job id.
"""

from __future__ import annotations

from typing import Any

from dlsched.service.records import UserRecord
from dlsched.service.store import Store

#: How another user's job is named to a user who is not an admin.
OTHER = "other"


def cluster_with_holders(store: Store, cluster: dict[str, Any], viewer: UserRecord) -> dict[str, Any]:
    """``cluster`` (name, policy, round, nodes) with ``holders`` added to each node: one list per GPU of the
    unfinished jobs placed on it (profiling included)."""
    nodes = [{**n, "holders": [[] for _ in range(int(n.get("gpus", 0)))]} for n in cluster.get("nodes", [])]
    by_name = {n["name"]: n for n in nodes}
    for job in store.jobs(include_finished=False):
        shown = job.id if viewer.admin or job.user == viewer.name else OTHER
        for node, local in job.placement.items():
            held = by_name.get(node, {}).get("holders", [])
            for g in local:
                if 0 <= g < len(held):
                    held[g].append(shown)
    return {**cluster, "nodes": nodes} if cluster else {}
