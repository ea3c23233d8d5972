"""Checks every decision must pass before the engine applies it.

A policy bug must never turn into silently wrong numbers: a GPU given twice (beyond packing shares), a
gang split or short, a job on two GPU types, a GPU id that does not exist, a batch size below one, or a job
that is not active fails the run loudly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dlsched.catalog.colocation import ColocationTable
from dlsched.core import Adaptivity, Cluster, Decision, JobSpec, Placement
from dlsched.core.packing import holders, packing_problem


class PolicyError(RuntimeError):
    """A scheduler returned a decision that breaks an invariant (a bug in the policy, not in the input)."""


def _gpu_list_problem(gpus: tuple[int, ...], num_gpus: int) -> str | None:
    """What is wrong with a GPU id list, or None.

    Ids are checked with min/max rather than the ends of the tuple: a placement built without sorting would
    otherwise let a negative id through, which numpy indexing silently wraps to another GPU.
    """
    if len(set(gpus)) != len(gpus):
        repeated = sorted({g for g in gpus if gpus.count(g) > 1})
        return f"repeats GPU id(s) {repeated[:8]}"
    bad = sorted(g for g in gpus if not 0 <= g < num_gpus)
    if bad:
        return f"names GPU id(s) {bad[:8]} outside the cluster's 0..{num_gpus - 1}"
    return None


def _holders(decision: Decision, gpu: int) -> list[str]:
    """Jobs a decision gives ``gpu`` to (profiled or allocated), for the over-subscription message."""
    jobs = [j for j, p in decision.profiles.items() if gpu in p.gpus]
    jobs += [j for j, a in decision.allocations.items() if gpu in a.placement.gpus]
    return jobs


def check_decision(decision: Decision, cluster: Cluster, active: dict[str, JobSpec], *, allows_packing: bool,
                   rigid: bool, policy: str, profiling: set[str] | frozenset[str] = frozenset(),
                   current: dict[str, tuple[Placement, int | None]] | None = None,
                   profile_held: Mapping[str, Placement] | None = None) -> None:
    """Raise :class:`PolicyError` naming the first broken invariant.

    ``profiling`` names jobs whose profiling has not finished; they may not be allocated GPUs yet.
    ``profile_held`` maps each of them to the GPUs its profile still holds: those GPUs are taken, whole, for
    as long as the profile runs, so no allocation or new profile may use them (packing included).
    ``current`` maps running jobs to their placement and batch size: an allocation that keeps both passed
    every per-job check when it was made, so only its share of the GPUs is counted again.
    """
    current = current or {}
    profile_held = profile_held or {}
    share = np.zeros(cluster.num_gpus, dtype=float)
    n = cluster.num_gpus
    for job_id, placement in decision.profiles.items():
        if job_id not in active:
            raise PolicyError(f"{policy}: asked to profile '{job_id}', which is not an active job")
        if job_id in profile_held:
            raise PolicyError(f"{policy}: asked to profile '{job_id}' again while its profile is still running")
        if job_id in decision.allocations and decision.allocations[job_id].placement:
            raise PolicyError(f"{policy}: job '{job_id}' is both profiled and allocated in one round")
        gpus = placement.gpus
        if not gpus:
            raise PolicyError(f"{policy}: job '{job_id}' is to be profiled on no GPUs")
        problem = _gpu_list_problem(gpus, n)
        if problem:
            raise PolicyError(f"{policy}: profiling GPU list of job '{job_id}' {problem}")
        share[list(gpus)] += 1.0
    for job_id, alloc in decision.allocations.items():
        spec = active.get(job_id)
        if spec is None:
            raise PolicyError(f"{policy}: allocated GPUs to '{job_id}', which is not an active job")
        if alloc.placement and job_id in profiling:
            raise PolicyError(f"{policy}: job '{job_id}' was allocated GPUs before its profiling finished")
        gpus = alloc.placement.gpus
        if not gpus:
            continue
        if current.get(job_id) == (alloc.placement, alloc.batch_size) and alloc.gpu_share >= 1.0:
            _check_worker_settings(job_id, alloc.mps_pct, alloc.batch_split, len(gpus), allows_packing, policy)
            if not (math.isfinite(alloc.pause_s) and 0.0 <= alloc.pause_s <= 86400.0):
                raise PolicyError(f"{policy}: job '{job_id}' is paused for {alloc.pause_s!r} s (expected 0..86400)")
            share[list(gpus)] += 1.0
            continue
        problem = _gpu_list_problem(gpus, n)
        if problem:
            raise PolicyError(f"{policy}: GPU list of job '{job_id}' {problem}")
        k = len(gpus)
        types = {cluster.gpu_type_of[g] for g in gpus}
        if len(types) != 1:
            raise PolicyError(f"{policy}: job '{job_id}' spans GPU types {sorted(types)}")
        gtype = next(iter(types))
        if not spec.allows_gpu_type(gtype):
            raise PolicyError(f"{policy}: job '{job_id}' placed on {gtype}, which its user did not accept")
        if rigid and k != spec.num_gpus:
            raise PolicyError(f"{policy}: rigid gang for '{job_id}' has {k} GPUs, not the {spec.num_gpus} requested")
        if not spec.allows_gpu_count(k):
            raise PolicyError(f"{policy}: job '{job_id}' got {k} GPUs, outside its allowed "
                              f"{spec.lower_gpus}..{spec.upper_gpus} (unit {spec.gpu_unit})")
        if alloc.batch_size is not None and alloc.batch_size < 1:
            raise PolicyError(f"{policy}: job '{job_id}' got batch size {alloc.batch_size}, below 1")
        if spec.adaptivity is Adaptivity.RIGID and alloc.batch_size not in (None, spec.batch_size):
            raise PolicyError(f"{policy}: rigid job '{job_id}' had its batch size changed")
        if not 0.0 < alloc.gpu_share <= 1.0:
            raise PolicyError(f"{policy}: job '{job_id}' has GPU share {alloc.gpu_share}")
        if alloc.gpu_share < 1.0 and not allows_packing:
            raise PolicyError(f"{policy}: job '{job_id}' has a GPU share below 1 but the policy does not pack")
        _check_worker_settings(job_id, alloc.mps_pct, alloc.batch_split, k, allows_packing, policy)
        if not (math.isfinite(alloc.pause_s) and 0.0 <= alloc.pause_s <= 86400.0):
            raise PolicyError(f"{policy}: job '{job_id}' is paused for {alloc.pause_s!r} s (expected 0..86400)")
        share[list(gpus)] += alloc.gpu_share
    _check_profiled_gpus_exclusive(decision, profile_held, policy)
    if allows_packing:
        _check_packing(decision, cluster, active, policy)
        return
    over = np.nonzero(share > 1.0 + 1e-9)[0]
    if len(over):
        g = int(over[0])
        raise PolicyError(f"{policy}: GPU {g} is given to jobs {_holders(decision, g)} whose shares sum to "
                          f"{share[g]:.3f}")


def _check_profiled_gpus_exclusive(decision: Decision, profile_held: Mapping[str, Placement], policy: str) -> None:
    """A GPU a running profile holds is taken whole, packing or not: nothing else may be given it."""
    held = {g: j for j, p in profile_held.items() for g in p.gpus}
    if not held:
        return
    given = list(decision.profiles.items())
    given += [(j, a.placement) for j, a in decision.allocations.items()]
    for job_id, placement in given:
        for g in placement.gpus:
            if g in held:
                raise PolicyError(f"{policy}: GPU {g} is given to '{job_id}' while '{held[g]}' is still being "
                                  f"profiled on it")


def _check_worker_settings(job_id: str, mps_pct: tuple[int, ...], batch_split: tuple[float, ...], k: int,
                           allows_packing: bool, policy: str) -> None:
    """Per-worker share limits and batch split: one entry per GPU, limits 1..100 %, fractions summing to 1."""
    if not mps_pct and not batch_split:
        return
    if not allows_packing:
        raise PolicyError(f"{policy}: job '{job_id}' sets per-worker share limits or batch split but the policy "
                          f"does not pack")
    if mps_pct and (len(mps_pct) != k or any(not 1 <= p <= 100 for p in mps_pct)):
        raise PolicyError(f"{policy}: job '{job_id}' has share limits {list(mps_pct)}; expected {k} percentages "
                          f"in 1..100")
    if batch_split and (len(batch_split) != k or any(not (math.isfinite(f) and f >= 0) for f in batch_split)
                        or abs(sum(batch_split) - 1.0) > 1e-6):
        raise PolicyError(f"{policy}: job '{job_id}' splits its batch as {list(batch_split)}; expected {k} "
                          f"non-negative fractions summing to 1 (the global batch is kept)")


def _check_packing(decision: Decision, cluster: Cluster, active: dict[str, JobSpec], policy: str) -> None:
    """A decision of a scheduler that packs. A GPU is either time-sliced (every holder's share below 1, the
    shares summing to at most 1) or packed (workers running at once, each share 1, under the packing rules
    of :mod:`dlsched.core.packing` and fitting the GPU's memory together); profiled GPUs are exclusive."""
    placements = {j: a.placement for j, a in decision.allocations.items() if a.placement}
    held = holders(placements)
    for job_id, placement in decision.profiles.items():
        for g in placement.gpus:
            if g in held:
                raise PolicyError(f"{policy}: GPU {g} is profiled for '{job_id}' and given to {held[g]}")
    for g, jobs in held.items():
        shares = [decision.allocations[j].gpu_share for j in jobs]
        sliced = [s < 1.0 for s in shares]
        if any(sliced) and not all(sliced) and len(jobs) > 1:
            raise PolicyError(f"{policy}: GPU {g} is packed with jobs {jobs}, some time-sliced (share below 1); "
                              f"packing and time slicing do not mix on one GPU")
        if all(sliced) and sum(shares) > 1.0 + 1e-9:
            raise PolicyError(f"{policy}: GPU {g} is given to jobs {jobs} whose shares sum to {sum(shares):.3f}")
    packed = {j: p for j, p in placements.items() if decision.allocations[j].gpu_share >= 1.0}
    problem = packing_problem(packed, cluster)
    if problem:
        raise PolicyError(f"{policy}: {problem}")
    table = ColocationTable.load()
    for g, jobs in holders(packed).items():
        if len(jobs) < 2:
            continue
        memory = cluster.gpu_types[cluster.gpu_type_of[g]].memory_gb
        need = sum(table.memory_gb(active[j].model) for j in jobs)
        if need > memory:
            raise PolicyError(f"{policy}: GPU {g} packs {jobs}, which need {need:.1f} GB of its {memory:g} GB")
