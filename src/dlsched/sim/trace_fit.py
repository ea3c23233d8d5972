"""Whether a trace fits a cluster, said as the cause a user can act on, with the traces that do fit.

A trace written for one paper's cluster often cannot run on another's: its models have no throughput profile
on the cluster's GPU types (Sia's models on Gimbal's A40s), or one of its jobs asks for more GPUs of one type
than the cluster has. The per-job checks (:mod:`dlsched.sim.job_checks`) then refuse the first job with a
symptom ("the job would run inf s"), which blames the job rather than the pairing. :func:`explain_misfit`
turns such a refusal into one line naming the trace, the cluster, the cause, and the traces the cluster lists
as fitting it; a refusal with another cause (a malformed job) is returned as it was.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dlsched.core import Adaptivity, Cluster, InputError, JobSpec
from dlsched.world.base import World

#: How many model names a message lists before "and N more".
_SHOWN = 6


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _unprofiled(specs: Sequence[JobSpec], cluster: Cluster, world: World) -> dict[str, list[str]]:
    """Model -> the cluster's GPU types it may use, for models that run on none of them (no profile)."""
    out: dict[str, list[str]] = {}
    seen: set[tuple[str, int, tuple[str, ...]]] = set()
    for spec in specs:
        types = [t for t in cluster.type_names if spec.allows_gpu_type(t)]
        key = (spec.model, spec.num_gpus, tuple(types))
        if key in seen or not types:
            continue
        seen.add(key)
        try:
            phys = world.physics(spec)
        except InputError:
            continue  # a model the world does not know at all: the job's own refusal names its line
        try:
            times = [phys.isolated_runtime_s(t, spec.num_gpus) for t in types]
        except (KeyError, ValueError, ZeroDivisionError):
            times = [math.inf]
        if not any(math.isfinite(x) and x > 0 for x in times):
            out.setdefault(spec.model, types)
    return out


def _too_large(specs: Sequence[JobSpec], cluster: Cluster) -> list[tuple[JobSpec, int, int]]:
    """Jobs whose smallest gang exceeds the largest pool of one GPU type they accept: (job, need, pool)."""
    out = []
    for spec in specs:
        pools = [n for t, n in cluster.gpus_per_type.items() if spec.allows_gpu_type(t)]
        need = spec.num_gpus if spec.adaptivity is Adaptivity.RIGID else spec.lower_gpus
        if pools and need > max(pools):
            out.append((spec, need, max(pools)))
    return out


def misfit_cause(specs: Sequence[JobSpec], cluster: Cluster, world: World) -> str | None:
    """Why the trace cannot run on the cluster, or None when nothing trace-wide is wrong."""
    unprofiled = _unprofiled(specs, cluster, world)
    if unprofiled:
        types = sorted({t for ts in unprofiled.values() for t in ts})
        affected = sum(1 for s in specs if s.model in unprofiled)
        return (f"models {_names(sorted(unprofiled))} have no profile on GPU type{'s' if len(types) > 1 else ''} "
                f"{', '.join(types)} ({affected} of {len(specs)} jobs)")
    large = _too_large(specs, cluster)
    if large:
        spec, need, pool = max(large, key=lambda x: x[1])
        where = f" ({spec.origin})" if spec.origin else ""
        return (f"{len(large)} of {len(specs)} jobs are larger than the cluster: job '{spec.job_id}'{where} "
                f"needs {need} GPUs of one type (num_gpus), the cluster has at most {pool}")
    return None


def explain_misfit(exc: InputError, specs: Sequence[JobSpec], cluster: Cluster, world: World, *,
                   trace: str, cluster_name: str, fitting: Sequence[str]) -> InputError:
    """``exc`` (a refused job) restated as the trace not fitting the cluster, when that is the cause."""
    cause = misfit_cause(specs, cluster, world)
    if cause is None:
        return exc
    listed = [t for t in fitting if t != trace]
    hint = (f"; traces that fit {cluster_name}: {', '.join(listed)}" if listed
            else f"; no listed trace fits {cluster_name}")
    return InputError(f"trace '{trace}' does not fit cluster '{cluster_name}': {cause}{hint}", field="trace")
