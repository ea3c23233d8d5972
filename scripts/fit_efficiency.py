#!/usr/bin/env python
"""Derive the statistical-efficiency tables of ``dlsched.world.efficiency`` from the Sia validation profiles.

Reads ``$DLSCHED_DATA/sia/profiles/<model>/validation-<B>.csv`` (columns progress, iteration, metric,
grad_sqr, grad_var; one row per statistical epoch, progress counted in iterations at the smallest profiled
batch size) and writes ``src/dlsched/world/params/efficiency.json``.

Per model and per milestone (row) it keeps:

* the gradient statistics measured at the initial (smallest) batch size: what a job running at that batch
  would report;
* the efficiency of every profiled batch size B, from B's *own* statistics with Pollux's formula
  ``eff = (phi + 1) / (phi + s)``, ``phi = grad_var / grad_sqr``, ``s = B / B0``. The profiles' ``iteration``
  columns were produced with exactly these numbers, so the table reproduces how many iterations each batch
  size really needed. The gradient noise measured at large batches is larger (relative to the init-batch
  scale) than at the initial batch, so predicting every B from the init-batch statistics alone would make
  large batches up to 40% less efficient than measured (bert at 384: 0.65 instead of 0.96);
* for the first milestone the efficiency the profile's iteration count implies instead (the first row's
  statistics are end-of-epoch values and badly understate how efficient large batches were early on);
* efficiency made non-increasing in B (a running minimum; the raw values wobble by up to 1%) so that larger
  batches never look more sample-efficient.

``gpt_pmp`` uses bert's table: its validation files are bert's (the Sia authors borrowed BERT's efficiency).

Usage: ``python scripts/fit_efficiency.py [--out PATH]`` (``DLSCHED_DATA`` names the data directory).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.datadir import require_data

MODELS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
#: At most this many progress milestones are kept per model (all profiles have <= 100 rows).
MAX_POINTS = 100


def read_validation(model_dir: Path) -> dict[int, pd.DataFrame]:
    """Validation tables keyed by global batch size, in increasing order."""
    out = {}
    for f in model_dir.glob("validation-*.csv"):
        out[int(f.stem.split("-")[1])] = pd.read_csv(f)
    return dict(sorted(out.items()))


def pollux_efficiency(sqr: np.ndarray, var: np.ndarray, scale: float) -> np.ndarray:
    """Pollux's gradient-noise-scale efficiency; a zero gradient norm means pure noise (efficiency 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(sqr > 0, var / np.where(sqr > 0, sqr, 1.0), np.inf)
        eff = np.where(np.isinf(phi), 1.0, (phi + 1.0) / (phi + scale))
    return np.clip(eff, 1.0 / scale, 1.0)


def derive(model_dir: Path) -> dict:
    """The efficiency entry of one model (see the module docstring)."""
    tables = read_validation(model_dir)
    sizes = list(tables)
    b0 = sizes[0]
    rows = min(len(t) for t in tables.values())
    base = tables[b0].iloc[:rows]
    progress = base["progress"].to_numpy(float)
    keep = np.concatenate([[True], np.diff(progress) > 0])  # duplicated final rows (bert, ncf) add nothing
    idx = np.flatnonzero(keep)
    if len(idx) > MAX_POINTS:
        idx = idx[np.unique(np.round(np.linspace(0, len(idx) - 1, MAX_POINTS)).astype(int))]
    eff = np.ones((len(idx), len(sizes)))
    for j, bsz in enumerate(sizes):
        t = tables[bsz].iloc[:rows].iloc[idx]
        eff[:, j] = pollux_efficiency(t["grad_sqr"].to_numpy(float), t["grad_var"].to_numpy(float), bsz / b0)
        # The first epoch's statistics are end-of-epoch values, not what drove that epoch (yolov3 at 512
        # would need 10x the iterations it took); there the profile's own iteration count is used.
        first = t.iloc[0]
        if first["iteration"] > 0:
            measured = first["progress"] / (first["iteration"] * bsz / b0)
            eff[0, j] = float(np.clip(measured, b0 / bsz, 1.0))
    eff = np.minimum.accumulate(eff, axis=1)
    eff[:, 0] = 1.0
    # Check against the profile: iterations each batch size needed to reach the final milestone.
    d_samples = np.diff(np.concatenate([[0.0], progress[idx]])) * b0
    check = {}
    for j, bsz in enumerate(sizes):
        predicted = float(np.sum(d_samples / (eff[:, j] * bsz)))
        measured = float(tables[bsz]["iteration"].iloc[:rows].iloc[idx[-1]])
        check[str(bsz)] = [round(predicted, 1), measured]
    return {
        "init_batch_size": b0,
        "max_batch_size": sizes[-1],
        "target_progress": float(progress[idx[-1]] * b0),
        "batch_sizes": sizes,
        "progress": [float(f"{p * b0:.6g}") for p in progress[idx]],
        "grad_sqr": [float(f"{x:.5g}") for x in base["grad_sqr"].to_numpy(float)[idx]],
        "grad_var": [float(f"{x:.5g}") for x in base["grad_var"].to_numpy(float)[idx]],
        "efficiency": [[float(f"{x:.5g}") for x in row] for row in eff],
        "iterations_check": check,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parents[1] / "src/dlsched/world/params/efficiency.json")
    args = ap.parse_args(argv)
    base = require_data("sia/profiles", "Sia validation profiles")
    models = {}
    for model in MODELS:
        models[model] = derive(base / model)
        m = models[model]
        worst = max(abs(p / q - 1.0) for p, q in m["iterations_check"].values() if q > 0)
        print(f"{model:12s} B0={m['init_batch_size']:5d} Bmax={m['max_batch_size']:6d} "
              f"target={m['target_progress']:.4g} samples, {len(m['progress'])} milestones, "
              f"iterations to target vs profile: worst {worst:.1%}")
    models["gpt_pmp"] = {"same_as": "bert"}
    out = {
        "_source": ("Derived by scripts/fit_efficiency.py from the Sia SOSP'23 artifact validation profiles "
                    "(siasosp23/artifacts@aaf7a0d, sia-simulator/traces/<model>/validation-<B>.csv) via "
                    "$DLSCHED_DATA."),
        "_notes": [
            "progress and target_progress are samples at the initial batch size (profile progress x B0); "
            "milestone i's numbers hold for progress in (progress[i-1], progress[i]].",
            "grad_sqr, grad_var: statistics measured at the initial batch size (what a job there reports).",
            "efficiency[i][j]: efficiency of batch_sizes[j] at milestone i from that batch size's own gradient "
            "statistics (Pollux formula), made non-increasing in batch size; 1 at the initial batch size.",
            "iterations_check: per batch size, [iterations to the final milestone implied by the table, "
            "iterations in the profile].",
            "gpt_pmp reuses bert (its validation files are bert's).",
        ],
        "models": models,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
