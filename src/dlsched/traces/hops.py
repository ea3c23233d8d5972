"""The Hops workloads (SoCC'24, section 4): Table 2's mixed jobs with user-selectable GPU requirements.

Two named traces:

* ``hops-table3:seed=S``: the physical experiment (Table 3), 25 jobs submitted over a 2.5-hour window;
* ``hops:jobs=N,rate=R,seed=S``: the simulation (Table 4), ``N`` jobs (500) arriving as a Poisson process
  of ``R`` jobs per hour (100).

Every job is one of Table 2's 17 model/dataset pairs, drawn uniformly, and its GPU duration comes from the
class Table 2 gives the pair: small (S, 0-1 GPU-hour), medium (M, 1-10), large (L, 10-50) and extra-large
(XL, > 50; drawn up to 100), log-uniform within the class. The paper gives no class shares (Figure 8 is a
histogram without numbers); drawing the pairs uniformly gives S 5/17, M 5/17, L 6/17, XL 1/17.

Requirements (section 4.2, "Baseline Settings"): between 1 and 16 GPUs with up to 8 choices. A user picks
how many choices (1 to 8, uniformly) and then that many distinct counts from the eight a user would name
(1, 2, 3, 4, 6, 8, 12, 16), drawn again until the job's largest count runs it within ``max_run_h`` hours
(10) on the reference type: a user with a 75 GPU-hour job does not ask for one GPU only. Without that bound
(``max_run_h=0``) a third of the seeds' XL jobs are rigid at one GPU and run 25-50 hours even on an RTX 3090,
longer than any makespan the paper reports (9.5-15.4 hours for every scheduler; docs/hops.md, choice 12).
The request ``num_gpus`` is the median requirement (the lower middle one for an
even number), which is what Gavel gets as its rigid count; ``duration_s`` is the run time on that many
1080Ti GPUs. Batch sizes are Table 2's, per GPU (fixed per-GPU batch mode). Jobs accept the three GPU types
of the Hops clusters, the only ones the world has their models on.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from dlsched.core.job import Adaptivity, JobSpec
from dlsched.traces.options import parse_trace_options

#: Table 2's model/dataset pairs by duration class (names as :data:`dlsched.world.hops.MODELS` has them).
CLASS_MODELS: dict[str, tuple[str, ...]] = {
    "S": ("resnet18-cifar10", "vgg13-cifar10", "convnext_base-cifar10", "densenet161-cifar10",
          "mobilenet_v2-cifar10"),
    "M": ("mobilenet_v2", "regnet-cifar10", "vit", "macbert", "wav2vec"),
    "L": ("vgg11", "convnext_base", "densenet161", "regnet", "distilbert", "gpt2-medium"),
    "XL": ("resnet50",),
}
#: GPU-hour bounds of each class.
CLASS_GPU_HOURS: dict[str, tuple[float, float]] = {"S": (0.1, 1.0), "M": (1.0, 10.0), "L": (10.0, 50.0),
                                                    "XL": (50.0, 100.0)}
#: Every pair of Table 2 with its class.
PAIRS: tuple[tuple[str, str], ...] = tuple((m, c) for c, ms in CLASS_MODELS.items() for m in ms)
#: Per-GPU batch size of each model (Table 2).
BATCH: dict[str, int] = {
    "resnet50": 128, "resnet18-cifar10": 256, "vgg11": 32, "vgg13-cifar10": 128, "convnext_base": 32,
    "convnext_base-cifar10": 64, "densenet161": 32, "densenet161-cifar10": 64, "mobilenet_v2": 64,
    "mobilenet_v2-cifar10": 64, "regnet": 32, "regnet-cifar10": 32, "distilbert": 128, "vit": 48,
    "macbert": 8, "wav2vec": 16, "gpt2-medium": 8,
}
#: The GPU counts a user names, and the most choices one job gives.
USER_COUNTS: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)
MAX_CHOICES = 8
REFERENCE_GPU = "1080ti"
#: The GPU types the Hops world plays (each job accepts them all, and no other).
GPU_TYPES = ("1080ti", "titanxp", "rtx3090")
TABLE3_JOBS = 25
TABLE3_WINDOW_S = 2.5 * 3600.0


#: The longest run a user accepts at the job's largest requirement on the reference type (hours; 0: any).
MAX_RUN_H = 10.0


def _counts(rng: np.random.Generator, gpu_hours: float, max_run_h: float) -> tuple[int, ...]:
    """A user's requirement set: how many choices, then which counts, drawn again while the largest count
    would run the job longer than ``max_run_h`` on the reference type (no bound when 0)."""
    while True:
        choices = int(rng.integers(1, MAX_CHOICES + 1))
        counts = tuple(sorted(int(k) for k in rng.choice(USER_COUNTS, size=choices, replace=False)))
        if max_run_h <= 0 or gpu_hours / counts[-1] <= max_run_h or gpu_hours / USER_COUNTS[-1] > max_run_h:
            return counts


def _jobs(rng: np.random.Generator, submit_times: np.ndarray, prefix: str,
          max_run_h: float = MAX_RUN_H) -> list[JobSpec]:
    out = []
    for i, t in enumerate(submit_times):
        model, cls = PAIRS[int(rng.integers(len(PAIRS)))]
        lo, hi = CLASS_GPU_HOURS[cls]
        gpu_hours = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        counts = _counts(rng, gpu_hours, max_run_h)
        median = counts[(len(counts) - 1) // 2]
        out.append(JobSpec(
            job_id=f"{prefix}{i:04d}", submit_time_s=float(t), model=model, num_gpus=median,
            batch_size=BATCH[model], min_gpus=counts[0], max_gpus=counts[-1],
            adaptivity=Adaptivity.STRONG_SCALING if len(counts) > 1 else Adaptivity.RIGID,
            duration_s=gpu_hours * 3600.0 / median, reference_gpu=REFERENCE_GPU, gpu_types=GPU_TYPES,
            gpu_counts=counts, per_gpu_batch=True))
    return out


def hops_trace(num_jobs: int = 500, rate_per_h: float = 100.0, seed: int = 0,
               max_run_h: float = MAX_RUN_H) -> list[JobSpec]:
    """Table 4's workload: ``num_jobs`` jobs, Poisson arrivals at ``rate_per_h`` jobs per hour."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(3600.0 / rate_per_h, size=num_jobs)
    times = np.cumsum(gaps) - gaps[0]
    return _jobs(rng, times, "hops-", max_run_h)


def hops_table3_trace(seed: int = 0, max_run_h: float = MAX_RUN_H) -> list[JobSpec]:
    """Table 3's workload: 25 jobs submitted at uniform times over a 2.5-hour window (the first at 0)."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, TABLE3_WINDOW_S, size=TABLE3_JOBS))
    times -= times[0]
    return _jobs(rng, times, "t3-", max_run_h)


def parse_hops(name: str, args: str, spec: str) -> list[JobSpec]:
    """``hops:jobs=N,rate=R,seed=S`` or ``hops-table3:seed=S``, each with an optional ``max_run_h=H``
    (options validated against their ranges)."""
    if name == "hops-table3":
        opts = parse_trace_options(args, spec, ("seed", "max_run_h"), {"seed": int, "max_run_h": float})
        return hops_table3_trace(seed=cast(int, opts.get("seed", 0)),
                                 max_run_h=cast(float, opts.get("max_run_h", MAX_RUN_H)))
    opts = parse_trace_options(args, spec, ("jobs", "rate", "seed", "max_run_h"),
                               {"jobs": int, "rate": float, "seed": int, "max_run_h": float})
    return hops_trace(num_jobs=cast(int, opts.get("jobs", 500)), rate_per_h=cast(float, opts.get("rate", 100.0)),
                      seed=cast(int, opts.get("seed", 0)), max_run_h=cast(float, opts.get("max_run_h", MAX_RUN_H)))
