"""The COpter workloads (thesis chapter 4): ``copter:jobs=N,hours=H,seed=S``, Alibaba-derived model jobs.

The thesis evaluates COpter on 40k jobs (``copter-10k``) and 100k jobs (``copter-25k``) over 24 hours,
"derived from the Alibaba PAI statistics" and mapped to the profiled applications. The statistics come from
``params/alibaba_stats.json`` (derived by ``scripts/fit_alibaba_stats.py`` from the Alibaba GPU task list in
the data directory, so generating needs no data directory):

* arrivals: exactly ``jobs`` arrivals in ``hours``, spread over the hours with the trace's daily profile of
  task creations (``arrivals_by_hour``, repeated for windows beyond a day) and uniformly within an hour;
* size: GPU-hours per job drawn from the trace's GPU-hour distribution (log-linear between quantiles) and
  mapped to a profiled model as Sia's workload recipe does (< 1 GPU-hour: cifar10; 1-10: deepspeech2 or bert,
  half each; 10-100: yolov3; > 100: imagenet);
* request: GPUs per job from the trace's distribution (1, 2, 4 or 8), and a batch size a user would pick for
  it (:func:`~dlsched.traces.synthetic.user_batch_size`). Jobs are adaptive: they train to their model's
  target, so their length comes from the model and the allocation, not from the trace.

Same options, same jobs: the draws depend only on the seed.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, cast

import numpy as np

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec
from dlsched.traces.options import OPTION_RANGES, parse_trace_options
from dlsched.traces.synthetic import _model_for, _sample_quantiles, user_batch_size

#: Option keys of ``copter:...`` and their defaults (the thesis's 10k-GPU workload: 40k jobs over 24 h).
KEYS: tuple[str, ...] = ("jobs", "hours", "seed")
DEFAULTS: dict[str, float | int] = {"jobs": 40_000, "hours": 24.0, "seed": 0}


@functools.lru_cache(maxsize=1)
def alibaba_stats() -> dict[str, Any]:
    """The packaged Alibaba statistics (see ``scripts/fit_alibaba_stats.py``)."""
    text = resources.files("dlsched.traces").joinpath("params/alibaba_stats.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


def _arrivals(rng: np.random.Generator, n: int, hours: float) -> np.ndarray:
    """``n`` sorted arrival times (s) in ``[0, hours)`` following the daily profile, hour by hour."""
    profile = np.asarray(alibaba_stats()["arrivals_by_hour"], dtype=float)
    whole = int(np.ceil(hours))
    width = np.minimum(1.0, hours - np.arange(whole))  # the last hour may be partial
    weight = profile[np.arange(whole) % 24] * width
    hour = rng.choice(whole, size=n, p=weight / weight.sum())
    return np.sort((hour + rng.random(n) * width[hour]) * 3600.0)


def copter_trace(jobs: int = 40_000, hours: float = 24.0, seed: int = 0) -> list[JobSpec]:
    """``jobs`` Alibaba-derived adaptive model jobs arriving over ``hours`` (see the module docstring)."""
    for key, value in (("jobs", jobs), ("hours", hours), ("seed", seed)):
        if value not in OPTION_RANGES[key]:
            raise InputError(f"must be {OPTION_RANGES[key].phrase}, got {value!r}", field=key)
    stats = alibaba_stats()
    rng = np.random.default_rng(int(seed))
    times = _arrivals(rng, int(jobs), float(hours))
    values = np.asarray(stats["num_gpus"]["values"], dtype=int)
    probs = np.asarray(stats["num_gpus"]["probs"], dtype=float)
    gpus = rng.choice(values, size=len(times), p=probs / probs.sum())
    gpu_hours = _sample_quantiles(rng, np.asarray(stats["quantiles"], dtype=float),
                                  np.asarray(stats["gpu_hours"], dtype=float), len(times))
    splits = rng.random(len(times))
    origin = f"copter:jobs={jobs},hours={hours:g},seed={seed}"
    specs = []
    for i in range(len(times)):
        model = _model_for(float(gpu_hours[i]), float(splits[i]), 0.0)
        k = int(gpus[i])
        specs.append(JobSpec(job_id=f"{model}-{i}", submit_time_s=float(times[i]), model=model, num_gpus=k,
                             batch_size=user_batch_size(model, k, rng), min_gpus=1, max_gpus=None,
                             adaptivity=Adaptivity.ADAPTIVE, origin=f"{origin} job {i + 1}"))
    return specs


def parse_copter(args: str, spec: str) -> list[JobSpec]:
    """``copter[:jobs=N,hours=H,seed=S]``; unknown keys and values outside their ranges are refused."""
    options = parse_trace_options(args, spec, KEYS, {"jobs": int, "hours": float, "seed": int})
    merged = {**DEFAULTS, **options}
    return copter_trace(int(cast(int, merged["jobs"])), float(cast(float, merged["hours"])),
                        int(cast(int, merged["seed"])))
