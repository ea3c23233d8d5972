"""Checks of a trace's jobs against the cluster and the world, before a run starts (and for ``trace
validate --cluster``): duplicate ids, jobs no allocation can ever hold, work the world cannot play.

Every refusal names the job's input line (``file:line``) and the field at fault.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dlsched.core import Cluster, InputError, JobSpec
from dlsched.core.fit import misfit
from dlsched.core.ranges import YEAR_S, fmt_value
from dlsched.world.base import AdaptiveJobPhysics, JobPhysics, World
from dlsched.world.hops import hops_job_physics

#: Workloads with physics of their own register it with the world when their module is imported (the generic
#: world knows none by name); every run and ``trace validate`` builds its jobs' physics here, so here they are.
WORKLOADS = (hops_job_physics,)


def validate_jobs(specs: Sequence[JobSpec], cluster: Cluster, world: World, *, rigid: bool,
                  fit: bool = True) -> list[JobPhysics]:
    """Reject jobs the world cannot play (unknown model, impossible work) or, with ``fit``, the cluster can
    never run, naming the job's input line."""
    seen: set[str] = set()
    out: list[JobPhysics] = []
    for spec in specs:
        where = spec.origin or f"job {spec.job_id}"
        if spec.job_id in seen:
            raise InputError(f"duplicate job id '{spec.job_id}'", source=where, field="job_id")
        seen.add(spec.job_id)
        if not math.isfinite(spec.submit_time_s) or spec.submit_time_s < 0:
            raise InputError(f"submit time {spec.submit_time_s} is negative or not finite", source=where,
                             field="submit_time_s")
        if fit:
            _check_fit(spec, cluster, where, rigid=rigid)
        phys = world.physics(spec)
        _check_work(spec, phys, world, where)
        out.append(phys)
    return out


def _check_fit(spec: JobSpec, cluster: Cluster, where: str, *, rigid: bool) -> None:
    """Refuse a job no allocation on ``cluster`` can ever satisfy (its GPU types, its smallest gang)."""
    found = misfit(spec, cluster, rigid=rigid)
    if found is not None:
        raise InputError(f"job '{spec.job_id}': {found.message}", source=where, field=found.field)


def _check_work(spec: JobSpec, phys: JobPhysics, world: World, where: str) -> None:
    """Refuse requests the world knows cannot run: a batch beyond the model's largest, a run of over a year."""
    if isinstance(phys, AdaptiveJobPhysics) and spec.batch_size is not None:
        largest = world.efficiency.max_batch_size(spec.model)
        if spec.batch_size > largest:
            raise InputError(f"batch size {spec.batch_size} of model '{spec.model}' must be in [1, {largest}] "
                             f"(the model's largest profiled batch)", source=where, field="batch_size")
    estimate = phys.estimated_duration_s()
    if estimate is not None and not (math.isfinite(estimate) and estimate <= YEAR_S):
        raise InputError(f"the job would run {fmt_value(float(estimate))} s on its request, more than a year "
                         f"(allowed run times: (0, {fmt_value(YEAR_S)}] s); lower its work", source=where,
                         field="iterations" if spec.iterations is not None else "duration_s")
