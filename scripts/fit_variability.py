"""Fit the per-GPU variability summary and transcribe PAL's per-model constants into the package.

Writes (both committed; the measured data files themselves never are):

* ``src/dlsched/catalog/params/variability.json``: per profile family (``longhorn``, ``frontera``, ``ls6``,
  ``testbed32``) and benchmark (``resnet`` -> class A, ``bert`` -> classes B and C, ``pagerank`` -> class D)
  the 101 quantiles (levels 0, 0.01, ..., 1) of the per-GPU PM-scores, GPU and run counts, and the
  correlation between benchmarks measured on the same GPUs: Spearman's rho on the common GPUs, and the
  Gaussian-copula correlation ``2 sin(pi rho / 6)`` (repaired to positive semi-definite) that the run-time
  sampler uses when the data directory is absent. Classes a family did not profile are flat (all 1.0).
* ``src/dlsched/catalog/params/pal_constants.json``: per-model iteration times, the model -> class map and the
  locality-penalty table from ``pal/pal_simulation_constants.json``, with the Sia/Pollux models added to the
  class map (resnets -> A, bert and gpt_pmp -> B, deepspeech2 and yolov3 -> C, ncf -> D), transcribed by
  :func:`dlsched.catalog.pal_constants.transcribe`.

PM-scores come from the catalog's loader (:func:`dlsched.catalog.measured_family`), the one the simulator and
the estimators read when the data is present, so the fitted summary and the measured draw cannot disagree on
the metric or on which GPU is which.

Usage: ``python scripts/fit_variability.py [--data-dir DIR]``; the default is ``$DLSCHED_DATA`` or
the user data directory that ``dlsched data fetch pal`` fills.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from dlsched.catalog import CLASSES, FAMILIES, FAMILY_NAMES, measured_family
from dlsched.catalog.gpu_variability import AGGREGATED_DIR
from dlsched.catalog.pal_constants import MEASURED_FILE, transcribe
from dlsched.datadir import data_dir as default_data_dir

REPO = Path(__file__).resolve().parents[1]
PARAMS = REPO / "src" / "dlsched" / "catalog" / "params"
LEVELS = np.linspace(0.0, 1.0, 101)
#: Fewer common GPUs than this and a rank correlation is noise; it is then taken as 0.
MIN_OVERLAP = 10


def _dumps(obj: object) -> str:
    """JSON with one line per list of numbers, so diffs of a refit stay readable."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*([-0-9.eE,\s]+?)\s*\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text) + "\n"


def _round(values: np.ndarray | list[float], digits: int = 6) -> list[float]:
    return [round(float(v), digits) for v in values]


def _copula(rho: np.ndarray) -> np.ndarray:
    """Gaussian-copula correlation with the given Spearman rho, repaired to positive semi-definite."""
    r = 2.0 * np.sin(np.pi * rho / 6.0)
    np.fill_diagonal(r, 1.0)
    w, v = np.linalg.eigh(r)
    if w.min() < 0:
        r = (v * np.clip(w, 0.0, None)) @ v.T
        d = np.sqrt(np.diag(r))
        r = r / np.outer(d, d)
    return r


def _source_summary(scores: np.ndarray, classes: tuple[str, ...], runs: int | None, file: str) -> dict:
    return {
        "file": file,
        "classes": list(classes),
        "num_gpus": int(len(scores)),
        "num_runs": runs,
        "min": round(float(scores.min()), 6),
        "median": round(float(np.median(scores)), 6),
        "max": round(float(scores.max()), 6),
        "quantiles": _round(np.quantile(scores, LEVELS)),
    }


def _correlation(series: dict[str, pd.Series]) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise Spearman rho and common-GPU counts between benchmarks (pandas Series indexed by GPU)."""
    names = list(series)
    k = len(names)
    rho = np.eye(k)
    common = np.zeros((k, k), dtype=int)
    for i in range(k):
        for j in range(k):
            a, b = series[names[i]], series[names[j]]
            shared = a.index.intersection(b.index)
            common[i, j] = len(shared)
            if i < j and len(shared) >= MIN_OVERLAP:
                value = spearmanr(a.loc[shared].to_numpy(), b.loc[shared].to_numpy()).statistic
                rho[i, j] = rho[j, i] = 0.0 if math.isnan(value) else value
    return rho, common


def _check_shared_columns(family: str, data: Path) -> None:
    """A file of precomputed scores must hold equal class B and C columns: both come from BERT."""
    for bench in FAMILIES[family].benchmarks:
        if bench.score_column is None or len(bench.classes) < 2:
            continue
        frame = pd.read_csv(data / AGGREGATED_DIR / bench.file)
        first, *rest = (frame[f"PerfVar_{c}"].to_numpy() for c in bench.classes)
        if not all(np.array_equal(first, other) for other in rest):
            raise SystemExit(f"{family}: columns of {bench.classes} differ; the {bench.name} source needs splitting")


def fit_family(family: str, data: Path) -> dict:
    _check_shared_columns(family, data)
    files = measured_family(family, data)
    sources = {}
    for name, m in files.items():
        where = f"pal/aggregated_data/{m.benchmark.file}"
        if m.benchmark.score_column is not None:
            where += f":{m.benchmark.score_column}"
        runs = None if m.runs is None else len(m.runs)
        sources[name] = _source_summary(m.scores, m.classes, runs, where)
    rho, common = _correlation({name: m.series() for name, m in files.items()})
    profiled = {c for src in sources.values() for c in src["classes"]}
    return {
        "num_gpus": int(len(files[FAMILIES[family].benchmarks[0].name].scores)),
        "sources": sources,
        "flat_classes": [c for c in CLASSES if c not in profiled],
        "spearman": [_round(row, 4) for row in rho],
        "common_gpus": common.tolist(),
        "copula_correlation": [_round(row, 6) for row in _copula(rho)],
    }


def pal_constants(data: Path) -> dict:
    raw = json.loads((data / MEASURED_FILE).read_text())
    return {
        "_source": "Transcribed by scripts/fit_variability.py from pal/pal_simulation_constants.json (numbers "
                   "from hal-uw/blox-pal @ da726cab, MIT): " + raw.get("_source", ""),
        "_note": "iteration_time_s: seconds per iteration on a median GPU; perf_class: PAL's map plus the "
                 "Sia/Pollux models; locality_penalty: model -> {num_gpus: multiplier}, applied only when a "
                 "job spans nodes, 1.0 when not listed.",
        **transcribe(raw),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="measured data (default: $DLSCHED_DATA)")
    args = parser.parse_args(argv)
    data = args.data_dir or default_data_dir()
    if data is None or not (data / "pal").is_dir():
        print("fit_variability: data directory with pal/ not found (set DLSCHED_DATA)", file=sys.stderr)
        return 2
    families = {f: fit_family(f, data) for f in FAMILY_NAMES}
    out = {
        "_source": "Fitted by scripts/fit_variability.py from PAL's per-GPU profiles (hal-uw/blox-pal "
                   "@ da726cab, aggregated_data/, MIT). Summary statistics only; no measured rows.",
        "_method": "PM-score of a GPU = median over its runs of perf / median(perf of all runs in the file). "
                   "quantiles: per-GPU scores at quantile_levels (numpy linear). spearman: rank correlation "
                   "between benchmarks on their common GPUs (0 if fewer than 10). copula_correlation: "
                   "2 sin(pi rho / 6), made PSD; the run-time fallback draws a virtual population of num_gpus "
                   "GPUs with this Gaussian copula and these marginals.",
        "quantile_levels": _round(LEVELS, 4),
        "families": families,
    }
    PARAMS.mkdir(parents=True, exist_ok=True)
    (PARAMS / "variability.json").write_text(_dumps(out))
    (PARAMS / "pal_constants.json").write_text(_dumps(pal_constants(data)))
    for fam, stats in families.items():
        for name, src in stats["sources"].items():
            print(f"{fam:9s} {name:8s} GPUs={src['num_gpus']:4d} min={src['min']:.4f} "
                  f"median={src['median']:.4f} max={src['max']:.4f}")
        print(f"{fam:9s} spearman={stats['spearman']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
