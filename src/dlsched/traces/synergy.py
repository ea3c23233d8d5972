"""Synergy-style traces, as PAL (SC'24, section IV-B) uses them for its 256-GPU load sweeps.

Synergy's workload generator keeps the Philly trace's GPU demands and run times and replaces its arrival
times with a Poisson process at a chosen load (jobs per hour); over 80% of its jobs use one GPU. PAL runs
these jobs with its own models, whose length is an iteration count and whose time per iteration comes from
the simulator's per-model constants. This generator does the same, from the Philly statistics packaged in
``params/philly_stats.json`` (so it needs no data directory):

* arrivals: exactly ``jobs`` Poisson arrivals at ``rate`` jobs per hour;
* GPU demand: the Philly GPU-count distribution (93% single-GPU jobs; 2 to 128 GPUs otherwise), capped at
  ``max_gpus`` when given;
* run time: drawn from the Philly run times of jobs of the same size (log-linear between the fitted
  quantiles), at least ``min_duration_s`` (default 0: Philly's own, down to one second);
* model: one of PAL's six models, by Synergy's task split (30% image, 60% language, 10% other): image is
  ResNet-50 or VGG-19, language BERT or GPT-2, other DCGAN or PointNet, each half of its task; the
  iteration count is the run time over the model's time per iteration, so the job keeps its Philly length
  on a median GPU, packed on one node.

PAL's repository ships two 50- and 120-job Poisson traces in Shockwave's format (``name, model_name, time,
num_iters, num_replicas``, with 1 to 8 GPUs per job); the long traces of its Synergy experiments (job ids
2000 to 3000 are measured) are generated, as here. Job ids are ``0..jobs-1`` in arrival order.
"""

from __future__ import annotations

import math

import numpy as np

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec
from dlsched.traces.options import parse_trace_options
from dlsched.traces.synthetic import philly_stats

#: Synergy's task split (image, language, other) and PAL's models per task.
TASK_SPLIT: tuple[float, float, float] = (0.3, 0.6, 0.1)
TASK_MODELS: tuple[tuple[str, str], ...] = (("resnet50", "vgg19"), ("BERT", "GPT2"), ("DCGAN", "PointNet"))
SYNERGY_KEYS: tuple[str, ...] = ("rate", "jobs", "seed", "max_gpus")


def _iteration_times() -> dict[str, float]:
    # PAL's per-model iteration times (the simulator's constants), read lazily.
    from dlsched.catalog import PalConstants

    pal = PalConstants.load()
    return {m: pal.iteration_time_s(m, source="synergy") for pair in TASK_MODELS for m in pair}


def synergy(rate: float = 8.0, jobs: int = 3000, seed: int = 1, *, max_gpus: int | None = None,
            min_duration_s: float = 0.0) -> list[JobSpec]:
    """A Synergy-style trace of ``jobs`` rigid iteration-count jobs; same arguments, same jobs.

    Args:
        rate: mean arrivals per hour (PAL sweeps 4 to 14).
        jobs: number of jobs (PAL measures jobs 2000 to 3000, so at least 3000).
        seed: random seed.
        max_gpus: cap on a job's GPU count (None: Philly's, up to 128).
        min_duration_s: shortest run time (Philly lists jobs of a few seconds).
    """
    if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise InputError(f"must be a positive number of jobs per hour, got {rate!r}", field="rate")
    if not isinstance(jobs, int | np.integer) or jobs < 1:
        raise InputError(f"must be a whole number >= 1, got {jobs!r}", field="jobs")
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"must be a whole number >= 0, got {seed!r}", field="seed")
    if max_gpus is not None and (not isinstance(max_gpus, int | np.integer) or max_gpus < 1):
        raise InputError(f"must be a whole number >= 1, got {max_gpus!r}", field="max_gpus")
    stats = philly_stats()
    # One stream per attribute, so a longer trace of the same seed extends a shorter one job by job.
    r_arrival, r_gpus, r_duration, r_task, r_model = (np.random.default_rng([int(seed), k]) for k in range(5))
    n = int(jobs)
    times = np.cumsum(r_arrival.exponential(3600.0 / float(rate), size=n))
    values = np.asarray(stats["num_gpus"]["values"], dtype=int)
    probs = np.asarray(stats["num_gpus"]["probs"], dtype=float)
    gpus = values[np.searchsorted(np.cumsum(probs / probs.sum()), r_gpus.random(n), side="right").clip(
        0, len(values) - 1)]
    if max_gpus is not None:
        gpus = np.minimum(gpus, int(max_gpus))
    q = np.asarray(stats["quantiles"], dtype=float)
    u = r_duration.random(n)
    durations = np.empty(n)
    for bucket in stats["duration_by_gpus"]:
        hi = bucket["max_gpus"] if bucket["max_gpus"] is not None else np.inf
        mask = (gpus >= bucket["min_gpus"]) & (gpus <= hi)
        logs = np.log(np.maximum(np.asarray(bucket["duration_s"], dtype=float), 1e-12))
        durations[mask] = np.exp(np.interp(u[mask], q, logs))
    durations = np.maximum(durations, float(min_duration_s))
    split = np.cumsum(np.asarray(TASK_SPLIT) / sum(TASK_SPLIT))
    task = np.searchsorted(split, r_task.random(n), side="right").clip(0, len(TASK_SPLIT) - 1)
    half = (r_model.random(n) >= 0.5).astype(int)
    iter_s = _iteration_times()
    origin = f"synergy(rate={rate:g},seed={seed})"
    specs: list[JobSpec] = []
    for i in range(n):
        model = TASK_MODELS[int(task[i])][int(half[i])]
        iters = max(1.0, float(round(durations[i] / iter_s[model])))
        specs.append(JobSpec(job_id=str(i), submit_time_s=float(round(times[i], 3)), model=model,
                             num_gpus=int(gpus[i]), iterations=iters, adaptivity=Adaptivity.RIGID,
                             origin=f"{origin}:{i + 1}"))
    return specs


def parse_synergy(args: str, spec: str) -> list[JobSpec]:
    """``rate=8,jobs=3000,seed=1[,max_gpus=N]`` (the part after ``synergy:``) into a trace."""
    numeric = {key: (float if key == "rate" else int) for key in SYNERGY_KEYS}
    kwargs = parse_trace_options(args, spec, SYNERGY_KEYS, numeric)
    # each value already has its key's type (``numeric``); the dict as a whole can only say object
    return synergy(**kwargs)  # type: ignore[arg-type]
