"""PAL's variability profiles as a scheduler receives them: loading and sampling (PAL, SC'24, section III-C).

A GPU's *PM-score* for an application class is its time per iteration over the median GPU's: 1.0 is the
median GPU, 1.5 means a job of that class runs 50% slower on it. PAL profiles one representative benchmark
per class on every GPU of a cluster, offline, and keeps the result static. A profile here is per class,
every profiled GPU's score, from

* PAL's measured families (Longhorn V100, Frontera RTX 5000, Lonestar6 A100, the 32-GPU testbed), read
  through :mod:`dlsched.catalog`, the same loader and GPU keys the simulator's world uses;
* or a user's own profile file (:func:`load_profile_file`).

:func:`sample_cluster` draws the N GPUs of a simulated cluster from a profile without repetition, as the
paper does; :func:`sample_runs` draws single runs, as PAL's simulator does. Nothing here reads the world.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.catalog import (
    CLASSES,
    FAMILY_NAMES,
    TESTBED,
    draw_runs,
    draw_without_repetition,
    family,
    measured_pm_scores,
    pm_scores_from_runs,
)
from dlsched.core.errors import InputError
from dlsched.datadir import data_dir as default_data_dir

#: Names :func:`resolve_profile` accepts besides file paths: the measured families.
PROFILE_NAMES: tuple[str, ...] = FAMILY_NAMES

__all__ = [
    "CLASSES", "PROFILE_NAMES", "TESTBED", "VariabilityProfile", "draw_without_repetition", "load_family",
    "load_profile_file", "load_testbed", "pm_scores_from_runs", "resolve_profile", "sample_cluster",
    "sample_runs",
]


@dataclass(frozen=True)
class VariabilityProfile:
    """Per class, the PM-score of every profiled GPU (1.0 = median GPU; larger = slower)."""

    name: str
    scores: dict[str, np.ndarray]

    def classes(self) -> tuple[str, ...]:
        return tuple(self.scores)

    def num_gpus(self, cls: str | None = None) -> int:
        if cls is not None:
            return len(self.scores[cls])
        return max((len(v) for v in self.scores.values()), default=0)


def load_family(name: str, data_dir: Path | str) -> VariabilityProfile:
    """The measured profile of a family (``longhorn``, ``frontera``, ``ls6``, ``testbed32``).

    Each class holds one score per GPU its benchmark file measured, ordered by GPU identity (the files of
    one family measured overlapping but different sets of GPUs, so the arrays differ in length); the
    testbed keeps its ``GPU_ID`` order. ``ls6`` has only ResNet-50 runs: its other classes are flat (1.0).
    """
    family(name, field="profile")
    return VariabilityProfile(name, measured_pm_scores(name, data_dir))


def load_testbed(data_dir: Path | str) -> VariabilityProfile:
    """PAL's measured 32-GPU Frontera testbed: ``PerfVar_<class>`` per GPU, in ``GPU_ID`` order."""
    return load_family(TESTBED, data_dir)


def _wide_profile(frame: pd.DataFrame, name: str, source: str) -> VariabilityProfile:
    if "GPU_ID" in frame.columns:
        frame = frame.sort_values("GPU_ID")
    cols = {c.removeprefix("PerfVar_"): c for c in frame.columns
            if c.startswith("PerfVar_") or c in CLASSES}
    if not cols:
        raise InputError("no class columns (PerfVar_<class> or classA..classD)", source=source)
    out: dict[str, np.ndarray] = {}
    for cls, col in cols.items():
        vals = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(vals).all() or (vals <= 0).any():
            raise InputError(f"column {col!r} must hold positive numbers", source=source, field=col)
        out[cls] = vals
    return VariabilityProfile(name, out)


def load_profile_file(path: str | Path, *, cls: str = CLASSES[0]) -> VariabilityProfile:
    """A user's own profile, in one of three CSV shapes (detected from the header):

    * runs, long format: ``gpu, class, perf`` (one row per run; ``perf`` time-like): scores per class by
      :func:`pm_scores_from_runs`;
    * precomputed scores, wide format: ``PerfVar_<class>`` or ``classA``..``classD`` columns, one row per
      GPU (like ``32gpu-variability.csv``);
    * one benchmark's runs, PAL's aggregated format: ``uuid, perf`` (the scores go to class ``cls``).
    """
    p = Path(path)
    try:
        frame = pd.read_csv(p)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read profile file ({exc})", source=str(p)) from None
    cols = set(frame.columns)
    if {"gpu", "class", "perf"} <= cols:
        out = {}
        for c, part in frame.groupby("class", sort=True):
            out[str(c)] = pm_scores_from_runs(part["perf"].to_numpy(dtype=float),
                                              part["gpu"].to_numpy()).to_numpy(dtype=float)
        return VariabilityProfile(p.stem, out)
    if any(c.startswith("PerfVar_") or c in CLASSES for c in cols):
        return _wide_profile(frame, p.stem, str(p))
    if {"uuid", "perf"} <= cols:
        vals = pm_scores_from_runs(frame["perf"].to_numpy(dtype=float), frame["uuid"].to_numpy())
        return VariabilityProfile(p.stem, {cls: vals.to_numpy(dtype=float)})
    raise InputError("unrecognised profile columns: expected gpu,class,perf or PerfVar_<class> columns "
                     "or uuid,perf", source=str(p))


def _required_data_dir(name: str, data_dir: Path | str | None) -> Path | str:
    """``data_dir``, else the configured data directory, else an error naming the profile that needs it."""
    if data_dir is not None:
        return data_dir
    found = default_data_dir()
    if found is None:
        raise InputError(f"variability profile '{name}' needs the data directory (set DLSCHED_DATA; "
                         f"`dlsched data fetch pal` brings it)")
    return found


def resolve_profile(spec: str, data_dir: Path | str | None = None) -> VariabilityProfile:
    """A family name (see :data:`PROFILE_NAMES`) or a profile file path."""
    if spec in PROFILE_NAMES:
        return load_family(spec, _required_data_dir(spec, data_dir))
    if Path(spec).expanduser().is_file():
        return load_profile_file(Path(spec).expanduser())
    raise InputError(f"'{spec}' is neither a profile family ({', '.join(PROFILE_NAMES)}) nor a file",
                     field="profile")


def sample_cluster(profile: VariabilityProfile, num_gpus: int, seed: int = 0) -> VariabilityProfile:
    """The PM-scores of an N-GPU simulated cluster: per class, N profiled GPUs drawn without repetition.

    PAL samples each class's profiling data "discretely, randomly ... without repetition"; when N exceeds
    the profiled GPUs, the draw continues with a fresh permutation.
    """
    rng = np.random.default_rng(seed)
    out = {c: v[draw_without_repetition(rng, len(v), num_gpus)] for c, v in profile.scores.items()}
    return VariabilityProfile(f"{profile.name}[{num_gpus}]", out)


def sample_runs(name: str, num_gpus: int, seed: int = 0, data_dir: Path | str | None = None) -> VariabilityProfile:
    """PM-scores drawn the way PAL's simulator draws them: single benchmark *runs*, not per-GPU medians.

    For each class, ``num_gpus`` runs of its benchmark file, without repetition, each divided by the file's
    median run, and each class drawn independently (:func:`dlsched.catalog.draw_runs`). Single runs include
    the stragglers (ResNet-50 on Longhorn reaches 3.6x), so this is a far more variable cluster than per-GPU
    medians give. ``testbed32`` has precomputed per-GPU scores only, so it draws those.
    """
    family(name, field="profile")
    root = _required_data_dir(name, data_dir)
    scores = draw_runs(name, num_gpus, np.random.default_rng(seed), root)
    return VariabilityProfile(f"{name}-runs[{num_gpus}]", scores)
