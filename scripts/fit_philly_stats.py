#!/usr/bin/env python
"""Derive the Philly statistics behind ``dlsched.traces.synthetic`` and write them as packaged JSON.

The synthetic generator has to run without the (licensed, uncommitted) data directory, so it reads only
``src/dlsched/traces/params/philly_stats.json``, which this script derives from the measured data:

* ``sia/traces/philly.csv`` (82k Philly jobs, Sep-Dec 2017): the empirical distribution of GPUs per job,
  a quantile table of GPU-hours per job (the quantity Sia's workload generator maps to a model) and, for
  Philly-like rigid jobs, quantile tables of run time per GPU-count bucket (run time and GPU count are
  strongly dependent, so sampling them independently would make 64-GPU jobs implausibly short);
* ``pollux/workloads/*.csv`` (if present): the share of short (<1 GPU-hour) jobs Pollux made NCF, recorded
  for reference.

Run from the repository root (the data directory is found as in ``dlsched.datadir``)::

    .venv/bin/python scripts/fit_philly_stats.py [--out src/dlsched/traces/params/philly_stats.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.datadir import data_dir, require_data
from dlsched.outputs import atomic_file

#: Quantile levels of the tables: dense in the tails, where the heavy-tailed Philly durations live.
QUANTILES = np.unique(np.concatenate([
    [0.0, 0.001, 0.002, 0.005], np.linspace(0.01, 0.99, 99), [0.995, 0.998, 0.999, 1.0],
])).round(6)
#: GPU-count buckets (inclusive upper bounds) for the run-time tables.
BUCKETS = (1, 2, 4, 8, None)
#: GPU-hour category boundaries used by Sia's workload generator.
CATEGORY_EDGES = (1.0, 10.0, 100.0)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "dlsched" / "traces" / "params" / "philly_stats.json"


def quantile_table(values: np.ndarray) -> list[float]:
    """Quantiles at :data:`QUANTILES`, to 6 significant digits (plenty for sampling; keeps diffs small)."""
    return [float(f"{v:.6g}") for v in np.quantile(values, QUANTILES)]


def dumps(obj: dict) -> str:
    """Indented JSON with number lists kept on one line, so the committed file stays readable."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*([-0-9.e+,\s]+?)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",")
                  + "]", text)


def fit(philly_csv: Path) -> dict:
    df = pd.read_csv(philly_csv)
    for col in ("timestamp", "duration", "num_gpus"):
        if col not in df.columns:
            raise SystemExit(f"{philly_csv}: missing column {col}")
    df = df[(df["duration"] > 0) & (df["num_gpus"] >= 1)]
    ts = pd.to_datetime(df["timestamp"])
    gpus = df["num_gpus"].to_numpy(dtype=int)
    duration = df["duration"].to_numpy(dtype=float)
    gpu_hours = gpus * duration / 3600.0

    values, counts = np.unique(gpus, return_counts=True)
    span_h = (ts.max() - ts.min()).total_seconds() / 3600.0
    buckets = []
    lo = 0
    for hi in BUCKETS:
        mask = (gpus > lo) & (gpus <= hi) if hi is not None else (gpus > lo)
        buckets.append({"min_gpus": lo + 1, "max_gpus": hi, "jobs": int(mask.sum()),
                        "duration_s": quantile_table(duration[mask])})
        lo = hi if hi is not None else lo
    edges = (0.0, *CATEGORY_EDGES, np.inf)
    cats = {f"[{a:g}, {b:g})": round(float(((gpu_hours >= a) & (gpu_hours < b)).mean()), 6)
            for a, b in zip(edges[:-1], edges[1:], strict=True)}
    return {
        "jobs": int(len(df)),
        "span_hours": round(span_h, 3),
        "mean_arrivals_per_hour": round(len(df) / span_h, 3),
        "num_gpus": {"values": [int(v) for v in values],
                     "probs": [round(float(c) / len(df), 8) for c in counts]},
        "quantiles": [float(q) for q in QUANTILES],
        "gpu_hours": quantile_table(gpu_hours),
        "duration_by_gpus": buckets,
        "gpu_hour_categories": cats,
    }


def pollux_ncf_share(base: Path) -> float | None:
    files = sorted((base / "pollux" / "workloads").glob("workload-*.csv"))
    if not files:
        return None
    apps = pd.concat([pd.read_csv(f)["application"] for f in files])
    short = apps.isin(["cifar10", "ncf"])
    return round(float((apps[short] == "ncf").mean()), 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    philly = require_data("sia/traces/philly.csv", "Philly job log")
    stats = {
        "source": "sia/traces/philly.csv (Microsoft Philly, 2017-09-04 to 2017-12-22, via siasosp23/artifacts)",
        "derived_by": "scripts/fit_philly_stats.py",
        "units": {"gpu_hours": "GPU-hours per job (num_gpus x duration)", "duration_s": "seconds"},
        **fit(philly),
    }
    base = data_dir()
    share = pollux_ncf_share(base) if base is not None else None
    if share is not None:
        stats["pollux_ncf_share_of_short_jobs"] = share
    with atomic_file(args.out) as tmp:
        tmp.write_text(dumps(stats) + "\n")
    print(f"wrote {args.out} ({stats['jobs']} jobs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
