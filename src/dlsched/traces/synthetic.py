"""Seeded synthetic workloads calibrated to Philly, for experiments beyond the few published traces.

Published workloads are a handful of 160-job, 8-hour samples; sweeping load, length or seeds needs a
generator. This one follows the recipe Sia used to build its Philly workloads from the Philly log, with the
statistics fitted into ``params/philly_stats.json`` by ``scripts/fit_philly_stats.py`` (so it runs with no
data directory):

* arrivals: a Poisson process of ``rate`` jobs per hour over ``hours`` (or exactly ``num_jobs`` arrivals);
* ``kind="models"`` (default): each job's size in GPU-hours is drawn from the Philly GPU-hour distribution
  and mapped to a model the way Sia's generator does (<1 GPU-h: cifar10, or ncf with probability
  ``ncf_share``; 1-10: deepspeech2 or bert, half each; 10-100: yolov3; >100: imagenet). The request is the
  Philly GPU-count distribution capped at ``max_request_gpus`` and a batch size a user would pick for it
  (see :func:`user_batch_size`). These are adaptive-model jobs: no duration, they train to their target.
* ``kind="rigid-duration"``: Philly-like rigid jobs (model ``philly``): a GPU count from the Philly
  distribution (capped) and a V100 run time drawn from the Philly run times of jobs of that size.

Draws use log-linear interpolation between the fitted quantiles, which follows the heavy tails of the
Philly distributions without inventing values beyond the observed extremes.
"""

from __future__ import annotations

import functools
import json
import math
from importlib import resources
from typing import Any, Literal

import numpy as np

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec

Kind = Literal["models", "rigid-duration"]
KINDS: tuple[str, ...] = ("models", "rigid-duration")

#: Batch-size range of each Sia/Pollux model (the profiled global batch sizes); each is min x 2^k.
BATCH_RANGE: dict[str, tuple[int, int]] = {
    "cifar10": (128, 4096),
    "deepspeech2": (20, 640),
    "bert": (12, 384),
    "yolov3": (8, 512),
    "imagenet": (200, 12800),
    "ncf": (256, 32768),
}
#: A user picks at most this many doublings above the smallest sensible batch for their GPU count.
_BATCH_SPREAD = 2


@functools.lru_cache(maxsize=1)
def philly_stats() -> dict[str, Any]:
    """The packaged Philly statistics (see ``scripts/fit_philly_stats.py``)."""
    text = resources.files("dlsched.traces").joinpath("params/philly_stats.json").read_text(encoding="utf-8")
    return json.loads(text)


def _sample_quantiles(rng: np.random.Generator, q: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Inverse-CDF draws, interpolating log(value) linearly between tabulated quantiles."""
    u = rng.random(n)
    logs = np.log(np.maximum(values, 1e-12))
    return np.exp(np.interp(u, q, logs))


def user_batch_size(model: str, num_gpus: int, rng: np.random.Generator) -> int:
    """A global batch size a user would request: the model's smallest batch times a power of two.

    Users scale the batch with their GPUs (weak scaling), so the smallest choice is the model's smallest
    batch size per GPU, rounded up to a power-of-two multiple; they then pick that or one to
    ``_BATCH_SPREAD`` doublings more, uniformly, never beyond the model's profiled range.
    """
    lo, hi = BATCH_RANGE[model]
    levels = [lo * 2**k for k in range(int(math.log2(hi // lo)) + 1)]
    start = min(max(0, math.ceil(math.log2(num_gpus))), len(levels) - 1)
    choices = levels[start:start + _BATCH_SPREAD + 1]
    return int(choices[int(rng.integers(len(choices)))])


def _model_for(gpu_hours: float, u_split: float, ncf_share: float) -> str:
    if gpu_hours < 1.0:
        return "ncf" if u_split < ncf_share else "cifar10"
    if gpu_hours < 10.0:
        return "deepspeech2" if u_split < 0.5 else "bert"
    if gpu_hours < 100.0:
        return "yolov3"
    return "imagenet"


def _arrivals(rng: np.random.Generator, rate: float, hours: float, num_jobs: int | None) -> np.ndarray:
    """Poisson arrival times (s): all arrivals within ``hours``, or exactly ``num_jobs`` of them."""
    mean_gap_s = 3600.0 / rate
    if num_jobs is not None:
        return np.cumsum(rng.exponential(mean_gap_s, size=num_jobs))
    horizon = hours * 3600.0
    expected = rate * hours
    times = np.cumsum(rng.exponential(mean_gap_s, size=int(expected + 10 * math.sqrt(expected) + 20)))
    while times[-1] <= horizon:  # practically never: the first batch covers mean + 10 sigma
        more = times[-1] + np.cumsum(rng.exponential(mean_gap_s, size=len(times)))
        times = np.concatenate([times, more])
    return times[times <= horizon]


def synthetic(rate: float = 20.0, hours: float = 8.0, seed: int = 1,
              adaptivity: Adaptivity | str | None = None, *, kind: Kind | str = "models",
              num_jobs: int | None = None, max_request_gpus: int = 16, ncf_share: float = 0.1) -> list[JobSpec]:
    """A Philly-calibrated synthetic trace; the same arguments always give the same jobs.

    Args:
        rate: mean arrivals per hour (> 0).
        hours: length of the arrival window (> 0); ignored when ``num_jobs`` is given.
        seed: random seed; traces with different seeds are independent draws.
        adaptivity: for ``kind="models"`` the jobs' adaptivity (default ``adaptive``; ``strong-scaling`` or
            ``rigid`` replay the same jobs with less freedom). ``rigid-duration`` jobs are always rigid.
        kind: ``models`` (Sia/Pollux model jobs) or ``rigid-duration`` (Philly-like duration jobs).
        num_jobs: generate exactly this many arrivals instead of an ``hours`` window.
        max_request_gpus: cap on requested GPUs (Philly has a few 32- to 128-GPU jobs that no 64-GPU
            testbed could run; Sia capped requests at 16).
        ncf_share: probability that a <1 GPU-hour job is ncf rather than cifar10 (Pollux used about half,
            Sia none).
    """
    if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise InputError(f"must be a positive number of jobs per hour, got {rate!r}", field="rate")
    if num_jobs is None and not (isinstance(hours, int | float) and math.isfinite(hours) and hours > 0):
        raise InputError(f"must be a positive number of hours, got {hours!r}", field="hours")
    if num_jobs is not None and (not isinstance(num_jobs, int) or num_jobs < 1):
        raise InputError(f"must be a whole number >= 1, got {num_jobs!r}", field="jobs")
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"must be a whole number >= 0, got {seed!r}", field="seed")
    if not isinstance(max_request_gpus, int) or max_request_gpus < 1:
        raise InputError(f"must be a whole number >= 1, got {max_request_gpus!r}", field="max_request_gpus")
    if not 0.0 <= ncf_share <= 1.0:
        raise InputError(f"must lie in [0, 1], got {ncf_share!r}", field="ncf_share")
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r} (one of: {', '.join(KINDS)})", field="kind")
    try:
        mode = None if adaptivity is None else Adaptivity(str(adaptivity).strip().lower())
    except ValueError:
        known = ", ".join(a.value for a in Adaptivity)
        raise InputError(f"unknown adaptivity {adaptivity!r} (one of: {known})", field="adaptivity") from None
    if kind == "rigid-duration" and mode not in (None, Adaptivity.RIGID):
        raise InputError("rigid-duration jobs are rigid; their run time holds only at the requested GPUs",
                         field="adaptivity")

    stats = philly_stats()
    rng = np.random.default_rng(int(seed))
    times = _arrivals(rng, float(rate), float(hours), num_jobs)
    n = len(times)
    values = np.asarray(stats["num_gpus"]["values"], dtype=int)
    probs = np.asarray(stats["num_gpus"]["probs"], dtype=float)
    gpus = np.minimum(rng.choice(values, size=n, p=probs / probs.sum()), max_request_gpus)
    q = np.asarray(stats["quantiles"], dtype=float)
    origin = f"synthetic(kind={kind},rate={rate:g},hours={hours:g},seed={seed})"
    specs: list[JobSpec] = []

    if kind == "rigid-duration":
        durations = np.empty(n)
        for bucket in stats["duration_by_gpus"]:
            hi = bucket["max_gpus"] if bucket["max_gpus"] is not None else np.inf
            mask = (gpus >= bucket["min_gpus"]) & (gpus <= hi)
            durations[mask] = _sample_quantiles(rng, q, np.asarray(bucket["duration_s"]), int(mask.sum()))
        for i in range(n):
            specs.append(JobSpec(job_id=f"philly-{i}", submit_time_s=float(times[i]), model="philly",
                                 num_gpus=int(gpus[i]), adaptivity=Adaptivity.RIGID,
                                 duration_s=float(max(1.0, round(durations[i]))), reference_gpu="v100",
                                 origin=f"{origin}:{i + 1}"))
        return specs

    gpu_hours = _sample_quantiles(rng, q, np.asarray(stats["gpu_hours"]), n)
    splits = rng.random(n)
    mode = mode or Adaptivity.ADAPTIVE
    for i in range(n):
        model = _model_for(float(gpu_hours[i]), float(splits[i]), ncf_share)
        k = int(gpus[i])
        specs.append(JobSpec(job_id=f"{model}-{i}", submit_time_s=float(times[i]), model=model, num_gpus=k,
                             batch_size=user_batch_size(model, k, rng), min_gpus=1, max_gpus=None,
                             adaptivity=mode, origin=f"{origin}:{i + 1}"))
    return specs
