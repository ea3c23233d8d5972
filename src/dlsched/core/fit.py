"""Whether a cluster can ever hold a job: the one rule the simulator's trace checks and the service's
admission share.

A gang runs on GPUs of one type (every allocation stage hands out a configuration of one type), so a job
fits when, among the types it accepts, one has at least its smallest gang. The simulator refuses a trace
line that fails this before a run starts; the service refuses such a submission (422) and holds a queued
job that the cluster, as it now stands, can no longer hold, so it never blocks the jobs behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlsched.core.cluster import Cluster
from dlsched.core.job import Adaptivity, JobSpec


@dataclass(frozen=True)
class Misfit:
    """Why a job can never run on a cluster: the spec's field at fault and one sentence."""

    field: str
    message: str


def smallest_gang(spec: JobSpec, *, rigid: bool) -> int:
    """The fewest GPUs the job can run on (its request under a rigid policy or for a rigid job)."""
    return spec.num_gpus if (rigid or spec.adaptivity is Adaptivity.RIGID) else spec.lower_gpus


def misfit(spec: JobSpec, cluster: Cluster, *, rigid: bool) -> Misfit | None:
    """Why no allocation on ``cluster`` can ever satisfy ``spec``; None when one can."""
    pools = {t: n for t, n in cluster.gpus_per_type.items() if spec.allows_gpu_type(t) and n > 0}
    have = ", ".join(f"{n} x {t}" for t, n in sorted(cluster.gpus_per_type.items())) or "no GPUs"
    if not pools:
        return Misfit("gpu_types", f"accepts GPU types {list(spec.gpu_types)}, none of which the cluster "
                                   f"'{cluster.name}' has (it has {have})")
    need = smallest_gang(spec, rigid=rigid)
    if need > max(pools.values()):
        kind = "a rigid job" if spec.adaptivity is Adaptivity.RIGID else (
            "a job under a rigid policy" if rigid else "its smallest size")
        return Misfit("num_gpus", f"{kind} needs {need} GPUs of one type but cluster '{cluster.name}' has at "
                                  f"most {max(pools.values())} of a type it accepts (it has {have})")
    return None
