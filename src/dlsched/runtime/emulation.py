"""GPU types on machines without them: each step stretched by the type's measured relative speed.

The per-type speeds are the single-GPU throughputs measured in the Sia artifact profiles, relative to a V100
(``world/params/throughput.json``, ``relative_speed``, fitted by ``scripts/fit_throughput.py``). The fastest
type in the cluster runs at this machine's real speed; a type ``k`` times slower has every step stretched
``k``-fold. This is an emulation, labelled as such in every report of a run; on Ray nodes with NVIDIA
GPUs nothing is stretched and the real devices are used.
"""

from __future__ import annotations

import json
from importlib import resources

from dlsched.core import Cluster


def relative_speeds() -> dict[str, float]:
    """Measured single-GPU speed of each known GPU type, relative to V100."""
    text = resources.files("dlsched.world").joinpath("params/throughput.json").read_text()
    return {k: float(v) for k, v in json.loads(text)["relative_speed"].items()}


def slowdowns(cluster: Cluster) -> dict[str, float]:
    """How much each GPU type of ``cluster`` stretches a step (1.0 for the cluster's fastest type)."""
    speeds = relative_speeds()
    types = cluster.type_names
    fastest = max(speeds[t] for t in types)
    return {t: fastest / speeds[t] for t in types}
