"""Gimbal's evaluation traces (section 7.1): ``gimbal-philly:seed=S`` (150 jobs) and ``gimbal-alibaba:seed=S``
(300 jobs), built from production arrivals and run times with Gimbal's model mix.

The paper takes submission times and durations from Philly and Alibaba, assigns each job a model, a GPU
count and a length from the model's profile, makes the large (LLM) jobs longer-running, and sets deadlines
to submission + duration x U(1.5, 2.5). It publishes the mix (Table 2) but not the jobs, so the traces here
are drawn reproducibly from a seed:

* **arrivals**: ``N`` consecutive submissions from a seeded starting point of the source, made relative to the
  first. Philly: ``sia/traces/philly.csv`` (82k jobs), kept as they are. Alibaba: the finished GPU pods of
  ``alibaba/gpu-v2023/openb_pod_list_default.csv`` (FGD 2023 trace), whose 300 consecutive pods span days; their
  arrival pattern is kept and compressed linearly into :data:`ALIBABA_SPAN_S` (the paper's 300 jobs take
  17.6 hours under Gavel);
* **size class**: exactly Table 2's counts (Philly 43 small / 86 medium / 21 large; Alibaba 112 / 132 / 56),
  in a seeded random order;
* **model**: uniform over the class's models of Table 1, and a batch size uniform over the model's;
* **GPU count**: drawn from {1, 2, 4, 8} with per-class probabilities whose mean is Table 2's average GPUs per
  job (:data:`GPU_CHOICES`);
* **duration** (run time alone on its GPUs of the reference type A40): a run time of the source drawn among
  those inside the class's range (:data:`DURATION_RANGE_S`), so the shape within a class is the trace's and
  large jobs run longest;
* **deadline**: submission + duration x U(1.5, 2.5).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec

#: Table 1's models per size class, with the batch sizes the paper trains them at.
MODELS: dict[str, dict[str, tuple[int, ...]]] = {
    "small": {"resnet18": (32, 64, 128), "mobilenetv2": (32, 64, 128), "efficientnet": (32, 64, 128)},
    "medium": {"deepspeech2": (8, 16), "resnet50": (32, 64, 128), "mobilenetv3": (32, 64, 128),
               "vgg11": (32, 64, 128), "vgg16": (32, 64, 128), "plnas": (32, 64, 128), "ofa": (32, 64, 128)},
    "large": {"bert": (16, 32), "llama": (16, 32)},
}
#: Table 2: jobs per class.
CLASS_COUNTS: dict[str, dict[str, int]] = {
    "philly": {"small": 43, "medium": 86, "large": 21},
    "alibaba": {"small": 112, "medium": 132, "large": 56},
}
#: Probabilities of 1, 2, 4 and 8 GPUs per class; means 2.40 / 2.40 / 4.90 (Philly; Table 2: 2.39, 2.41,
#: 4.85) and 2.05 / 2.05 / 3.45 (Alibaba; Table 2: 1.98, 2.03, 3.54).
GPU_CHOICES: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "philly": {"small": (0.5, 0.25, 0.15, 0.1), "medium": (0.5, 0.25, 0.15, 0.1), "large": (0.0, 0.25, 0.4, 0.35)},
    "alibaba": {"small": (0.55, 0.25, 0.15, 0.05), "medium": (0.55, 0.25, 0.15, 0.05),
                "large": (0.15, 0.35, 0.35, 0.15)},
}
#: Run-time range (s) per class within which the source's run times are drawn.
DURATION_RANGE_S: dict[str, tuple[float, float]] = {
    "small": (60.0, 1800.0), "medium": (300.0, 3600.0), "large": (1800.0, 7200.0),
}
#: Span (s) the Alibaba arrivals are compressed into.
ALIBABA_SPAN_S = 12 * 3600.0
#: Deadline factor range (section 7.1).
DEADLINE_FACTOR = (1.5, 2.5)
REFERENCE_GPU = "a40"
SOURCES = ("philly", "alibaba")


def _philly(path: Path) -> tuple[np.ndarray, np.ndarray]:
    df = pd.read_csv(path, usecols=["timestamp", "duration"])
    stamps = pd.to_datetime(df["timestamp"])
    t = np.sort((stamps - stamps.min()).dt.total_seconds().to_numpy(dtype=float), kind="stable")
    return t, df["duration"].to_numpy(dtype=float)


def _alibaba(path: Path) -> tuple[np.ndarray, np.ndarray]:
    df = pd.read_csv(path)
    done = df[df.pod_phase.isin(["Succeeded", "Failed"]) & (df.num_gpu > 0)]
    dur = (done.deletion_time - done.scheduled_time).to_numpy(dtype=float)
    t = np.sort(done.creation_time.to_numpy(dtype=float), kind="stable")
    return t, dur[dur > 0]


def gimbal_trace(source: str, path: Path, seed: int = 1) -> list[JobSpec]:
    """The ``source`` (``philly`` or ``alibaba``) trace for ``seed`` from the source file at ``path``."""
    if source not in SOURCES:
        raise InputError(f"unknown Gimbal trace source '{source}' (one of: {', '.join(SOURCES)})")
    rng = np.random.default_rng(seed)
    counts = CLASS_COUNTS[source]
    n = sum(counts.values())
    times, durations = (_philly if source == "philly" else _alibaba)(path)
    if len(times) < n:
        raise InputError(f"{path} holds {len(times)} jobs; the Gimbal {source} trace needs {n}", source=str(path))
    start = int(rng.integers(0, len(times) - n + 1))
    window = times[start:start + n] - times[start]
    if source == "alibaba" and window[-1] > 0:
        window = window * (ALIBABA_SPAN_S / window[-1])
    classes = [c for c, k in counts.items() for _ in range(k)]
    rng.shuffle(classes)
    specs = []
    for i, (submit, cls) in enumerate(zip(window, classes, strict=True)):
        models = MODELS[cls]
        model = list(models)[int(rng.integers(len(models)))]
        batch = int(rng.choice(models[model]))
        gpus = int(rng.choice([1, 2, 4, 8], p=GPU_CHOICES[source][cls]))
        lo, hi = DURATION_RANGE_S[cls]
        pool = durations[(durations >= lo) & (durations <= hi)]
        duration = float(rng.choice(pool)) if len(pool) else float(rng.uniform(lo, hi))
        deadline = float(submit) + duration * float(rng.uniform(*DEADLINE_FACTOR))
        specs.append(JobSpec(job_id=f"{source}-{i}", submit_time_s=float(submit), model=model, num_gpus=gpus,
                             batch_size=batch, adaptivity=Adaptivity.RIGID, deadline_s=deadline,
                             duration_s=duration, reference_gpu=REFERENCE_GPU, user=cls,
                             origin=f"gimbal-{source}:seed={seed} job {i}"))
    return specs
