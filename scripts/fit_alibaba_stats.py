#!/usr/bin/env python
"""Derive the Alibaba statistics behind the ``copter`` workloads and write them as packaged JSON.

The thesis's COpter prototype (chapter 4) runs workloads of 40k and 100k jobs over 24 hours "derived from
the Alibaba PAI statistics". The job-level PAI v2020 tables are not in the data directory (see
``alibaba/README.md``); the nearest job-level Alibaba GPU data is the v2023 pod list of the same platform,
``alibaba/gpu-v2023/openb_pod_list_default.csv`` (8,152 tasks). From its GPU tasks (``num_gpu >= 1``) this
script takes:

* the distribution of GPUs per job (``num_gpu``; a GPU-sharing task asking for part of one GPU counts as one,
  since the simulated jobs hold whole GPUs);
* a quantile table of GPU-hours per job over the finished tasks (``Succeeded`` or ``Failed``:
  ``num_gpu x (deletion_time - scheduled_time)``), the quantity Sia's workload recipe maps to a model;
* the arrival profile over the hours of the day (task creations per hour of ``creation_time mod 24 h``,
  normalised), so arrivals follow the trace's daily cycle.

Run from the repository root (the data directory is found as in ``dlsched.datadir``)::

    .venv/bin/python scripts/fit_alibaba_stats.py [--out src/dlsched/traces/params/alibaba_stats.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.datadir import require_data
from dlsched.outputs import atomic_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_philly_stats import CATEGORY_EDGES, QUANTILES, dumps, quantile_table  # noqa: E402

POD_LIST = "alibaba/gpu-v2023/openb_pod_list_default.csv"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "dlsched" / "traces" / "params" / "alibaba_stats.json"


def fit(pods_csv: Path) -> dict:
    df = pd.read_csv(pods_csv)
    for col in ("num_gpu", "gpu_milli", "pod_phase", "creation_time", "deletion_time", "scheduled_time"):
        if col not in df.columns:
            raise SystemExit(f"{pods_csv}: missing column {col}")
    gpu = df[df["num_gpu"] >= 1]
    values, counts = np.unique(gpu["num_gpu"].to_numpy(dtype=int), return_counts=True)
    done = gpu[gpu["pod_phase"].isin(["Succeeded", "Failed"])]
    duration = (done["deletion_time"] - done["scheduled_time"]).to_numpy(dtype=float)
    keep = duration > 0
    gpu_hours = done["num_gpu"].to_numpy(dtype=float)[keep] * duration[keep] / 3600.0
    hour = (gpu["creation_time"].to_numpy(dtype=float) // 3600 % 24).astype(int)
    per_hour = np.bincount(hour, minlength=24).astype(float)
    edges = (0.0, *CATEGORY_EDGES, np.inf)
    cats = {f"[{a:g}, {b:g})": round(float(((gpu_hours >= a) & (gpu_hours < b)).mean()), 6)
            for a, b in zip(edges[:-1], edges[1:], strict=True)}
    return {
        "gpu_tasks": int(len(gpu)),
        "finished_gpu_tasks": int(keep.sum()),
        "num_gpus": {"values": [int(v) for v in values],
                     "probs": [round(float(c) / len(gpu), 8) for c in counts]},
        "quantiles": [float(q) for q in QUANTILES],
        "gpu_hours": quantile_table(gpu_hours),
        "gpu_hour_categories": cats,
        "arrivals_by_hour": [round(float(c) / per_hour.sum(), 6) for c in per_hour],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    pods = require_data(POD_LIST, "Alibaba GPU pod list")
    stats = {
        "source": f"{POD_LIST} (Alibaba PAI GPU cluster, FGD ATC'23 trace, via alibaba/clusterdata "
                  "7a6c496e4f4b6ce6150be8f881cb051bf2abff42)",
        "derived_by": "scripts/fit_alibaba_stats.py",
        "units": {"gpu_hours": "GPU-hours per task (num_gpu x run time)",
                  "arrivals_by_hour": "share of task creations in each hour of the trace's day"},
        **fit(pods),
    }
    with atomic_file(args.out) as tmp:
        tmp.write_text(dumps(stats) + "\n")
    print(f"wrote {args.out} ({stats['gpu_tasks']} GPU tasks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
