"""What the database keeps of a round: its decision by node name, its summary, and the placement in words."""

from __future__ import annotations

from typing import Any

from dlsched.core import Cluster, ClusterView, Decision, Placement
from dlsched.service import membership


def round_summary(cluster: Cluster, view: ClusterView, decision: Decision, policy_s: float, t: float) -> dict[str, Any]:
    """The round's headline numbers (the rounds table's ``summary``): jobs, running, queued, GPUs in use
    (per type as ``gpus_<type>``, as the simulator's rounds hold them) and the policy's time."""
    used = {g for a in decision.allocations.values() for g in a.placement.gpus}
    used |= {g for p in decision.profiles.values() for g in p.gpus}
    running = sum(1 for a in decision.allocations.values() if a.placement)
    by_type = {tn: 0 for tn in cluster.type_names}
    for g in used:
        by_type[cluster.gpu_type_of[g]] += 1
    return {"time_s": t, "jobs": len(view.jobs), "running": running, "queued": len(view.jobs) - running,
            "allocated_gpus": len(used), "gpus": cluster.num_gpus, "policy_s": policy_s,
            **{f"gpus_{k}": v for k, v in by_type.items()}}


def where(cluster: Cluster, placement: Placement) -> str:
    parts = [f"{name} x{len(local)}" for name, local in membership.to_stored(cluster, placement).items()]
    return ", ".join(parts) + f" ({placement.configuration(cluster).gpu_type})"


def decision_record(decision: Decision, cluster: Cluster) -> dict[str, Any]:
    """The decision as the database keeps it: placements by node name, so they read the same later."""
    return {"allocations": {k: {"placement": membership.to_stored(cluster, a.placement), "batch_size": a.batch_size,
                                "gpu_share": a.gpu_share} for k, a in decision.allocations.items()},
            "profiles": {k: membership.to_stored(cluster, p) for k, p in decision.profiles.items()},
            "info": {k: float(v) for k, v in decision.info.items()}}
