"""GPU types on machines without them: each step stretched by the type's measured relative speed.

The per-type speeds are the world's relative speeds (:meth:`dlsched.world.throughput.ThroughputModel.relative_speed`):
the single-GPU throughputs measured in the Sia artifact profiles, relative to a V100
(``world/params/throughput.json``, fitted by ``scripts/fit_throughput.py``), the derived types of
``world/params/derived_types.json`` (``h100``, ``h200``, ``a100-pcie``, ...; provenance in
docs/gpu-types.md) and the types the cluster file declares. The fastest
type in the cluster runs at this machine's real speed; a type ``k`` times slower has every step stretched
``k``-fold. This is an emulation, labelled as such in every report of a run; on Ray nodes with NVIDIA
GPUs nothing is stretched and the real devices are used.
"""

from __future__ import annotations

from dlsched.core import Cluster
from dlsched.world.throughput import ThroughputModel


def relative_speeds(cluster: Cluster | None = None) -> dict[str, float]:
    """Single-GPU speed of each GPU type the world knows (and ``cluster`` declares), relative to V100."""
    tm = ThroughputModel.load()
    if cluster is not None:
        tm = tm.with_types(cluster.gpu_types.values())
    return {t: tm.relative_speed(t) for t in sorted(tm.known_types())}


def slowdowns(cluster: Cluster) -> dict[str, float]:
    """How much each GPU type of ``cluster`` stretches a step (1.0 for the cluster's fastest type)."""
    speeds = relative_speeds(cluster)
    types = cluster.type_names
    fastest = max(speeds[t] for t in types)
    return {t: fastest / speeds[t] for t in types}
