"""TunedJobs: give every job a batch size and GPU count that scale well (Sia thesis, section 3.4.3).

Rigid schedulers (Gavel, Shockwave, Themis) cannot tune jobs, so the Sia authors tuned each job of a
trace offline, following Pollux's evaluation: over (batch size, GPU count) combinations, with GPU counts up
to 64 on a homogeneous cluster and up to 16 on heterogeneous and physical ones, they picked at random a
combination whose simulated run time is 50-80% of ideal speedup over the run time on one GPU at the best
batch size::

    efficiency(b, k) = T(best batch, 1 GPU) / (k * T(b, k GPUs)),    0.5 <= efficiency <= 0.8

This is experiment preparation a user does offline with a simulator, so it may read the world: run times
come from the world's throughput and statistical-efficiency models (:meth:`World.isolated_runtime`: the job
alone, packed on the cluster's nodes, no per-GPU variability and no restarts), on the least powerful GPU
type of the cluster (a batch that runs there runs anywhere, the thesis's "batch size that fits the smallest
GPU"). Candidate batch sizes are the model's initial batch size times powers of two up to its maximum.

A model with no combination inside the band takes the one closest to it. Jobs whose model the world does not
know as an adaptive model (duration or iteration traces) are left as they are. Only ``num_gpus`` and
``batch_size`` change; the adaptivity is kept, so ``@rigid@tuned`` (or a rigid scheduler) runs them rigidly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlsched.core import Adaptivity, Cluster, InputError, JobSpec
from dlsched.world.base import World

#: Suffix of a trace spec that asks for TunedJobs (``sia-philly:1@tuned``).
SUFFIX = "@tuned"
#: Largest GPU count tried on a homogeneous cluster and on a heterogeneous one (thesis, section 3.4.3).
MAX_GPUS_HOMOGENEOUS = 64
MAX_GPUS_HETEROGENEOUS = 16


@dataclass(frozen=True)
class Combination:
    """One (batch size, GPU count) and how well it scales."""

    batch_size: int
    num_gpus: int
    runtime_s: float
    efficiency: float


def split_suffix(trace: str) -> tuple[str, bool]:
    """``("sia-philly:1", True)`` for ``"sia-philly:1@tuned"``; the spec unchanged and False otherwise."""
    text = trace.strip()
    if text.lower().endswith(SUFFIX):
        return text[: -len(SUFFIX)].rstrip(), True
    return text, False


def reference_type(cluster: Cluster, model: str, world: World) -> str | None:
    """The least powerful GPU type of the cluster that has a profile of ``model``."""
    for gtype in cluster.type_names:  # least powerful first
        if world.throughput.supports(model, gtype):
            return gtype
    return None


def default_max_gpus(cluster: Cluster) -> int:
    limit = MAX_GPUS_HOMOGENEOUS if len(cluster.type_names) == 1 else MAX_GPUS_HETEROGENEOUS
    return max(1, min(limit, cluster.max_gpus_single_type()))


def batch_candidates(init: int, maximum: int) -> list[int]:
    """The initial batch size doubled until the maximum (the maximum itself included)."""
    out, b = [], max(1, int(init))
    while b < maximum:
        out.append(b)
        b *= 2
    out.append(max(int(maximum), int(init)))
    return sorted(set(out))


def combinations(world: World, model: str, gpu_type: str, max_gpus: int) -> list[Combination]:
    """Every candidate (batch size, GPU count) of ``model`` on ``gpu_type`` with its scaling efficiency."""
    eff = world.efficiency
    batches = batch_candidates(eff.init_batch_size(model), eff.max_batch_size(model))
    unit = world.throughput.stages(model, gpu_type)

    def runtime(b: int, k: int) -> float:
        spec = JobSpec(job_id=f"tune-{model}", submit_time_s=0.0, model=model, num_gpus=k, batch_size=b,
                       adaptivity=Adaptivity.RIGID, gpu_unit=unit)
        return float(world.physics(spec).isolated_runtime_s(gpu_type, k))

    counts = [k for k in range(unit, max_gpus + 1) if k % unit == 0]
    if not counts:
        return []
    base = min(runtime(b, counts[0]) for b in batches) * counts[0]  # one GPU (one pipeline) at its best batch
    out = []
    for b in batches:
        for k in counts:
            t = runtime(b, k)
            if np.isfinite(t) and t > 0:
                out.append(Combination(b, k, t, base / (k * t)))
    return out


def choose(options: Sequence[Combination], rng: np.random.Generator, low: float, high: float) -> Combination:
    """A random combination inside the efficiency band, else the one closest to it (fewer GPUs on ties)."""
    inside = [c for c in options if low <= c.efficiency <= high]
    if inside:
        return inside[int(rng.integers(len(inside)))]
    return min(options, key=lambda c: (max(low - c.efficiency, c.efficiency - high), c.num_gpus, c.batch_size))


def tuned_jobs(specs: Sequence[JobSpec], cluster: Cluster, *, seed: int = 0, world: World | None = None,
               max_gpus: int | None = None, low: float = 0.5, high: float = 0.8) -> list[JobSpec]:
    """The jobs with TunedJobs' batch size and GPU count (module docstring); the order is kept.

    Choices are drawn in submission order from one generator seeded with ``seed``, so the first N jobs of a
    trace get the same configurations whether or not the trace is cut short.
    """
    if not 0.0 < low <= high:
        raise InputError(f"TunedJobs band must satisfy 0 < low <= high, got {low}..{high}", field="tuned_jobs")
    world = world or World(cluster, seed=seed)
    limit = default_max_gpus(cluster) if max_gpus is None else max(1, int(max_gpus))
    options: dict[str, list[Combination]] = {}
    rng = np.random.default_rng(seed)
    chosen: dict[int, JobSpec] = {}
    order = sorted(range(len(specs)), key=lambda i: (specs[i].submit_time_s, specs[i].job_id))
    for i in order:
        spec = specs[i]
        if spec.duration_s is not None or spec.iterations is not None \
                or spec.model not in world.throughput.models():
            chosen[i] = spec
            continue
        if spec.model not in options:
            gtype = reference_type(cluster, spec.model, world)
            options[spec.model] = [] if gtype is None else combinations(world, spec.model, gtype, limit)
        opts = options[spec.model]
        if not opts:
            chosen[i] = spec
            continue
        c = choose(opts, rng, low, high)
        chosen[i] = dataclasses.replace(spec, num_gpus=c.num_gpus, batch_size=c.batch_size,
                                        min_gpus=min(spec.min_gpus, c.num_gpus),
                                        max_gpus=None if spec.max_gpus is None else max(spec.max_gpus, c.num_gpus))
    return [chosen[i] for i in range(len(specs))]
