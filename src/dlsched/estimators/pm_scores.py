"""PAL's variability profiles and binned PM-scores (PAL, SC'24, sections III-B, III-C and IV-C).

A GPU's *PM-score* for an application class is its time per iteration over the median GPU's: 1.0 is the
median GPU, 1.5 means a job of that class runs 50% slower on it. PAL profiles one representative benchmark
per class on every GPU of a cluster, offline, and keeps the result static.

This module is the scheduler's side of that profiling:

* **profiles**: per class, every profiled GPU's score, from PAL's measured runs (``<data>/pal/aggregated_data``:
  Longhorn V100, Frontera RTX 5000, Lonestar6 A100), from the measured 32-GPU testbed scores
  (``32gpu-variability.csv``), or from a user's own profile file (:func:`load_profile_file`);
  :func:`sample_cluster` draws the N GPUs of a simulated cluster without repetition, as the paper does;
* **binning** (:func:`fit_bins`): per class, K-Means over the scores with K chosen by the silhouette score,
  swept from 2 to 11 with the > 3 sigma outliers set aside for the analysis; outliers keep their own scores,
  every other GPU takes its bin's centroid. The binned scores are what PM-First and PAL compare;
* the **L x V matrix** (:class:`LvMatrix`): locality levels (within a node, within a rack, across) times the
  bins' PM-scores, and its traversal order from the smallest product;
* **locality penalties** (:class:`LocalityPenalties`): the per-(model, GPU count) penalty PAL estimated on
  Frontera, or one constant.

In the simulator the world draws each GPU's true speed and the engine hands the policy the result of offline
profiling (``ClusterView.gpu_scores``); nothing here reads the world.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.core.errors import InputError

#: PAL's application classes, most variability-sensitive first.
CLASSES: tuple[str, ...] = ("classA", "classB", "classC", "classD")

#: K swept by the silhouette analysis (PAL: 2 to 11).
K_MIN, K_MAX = 2, 11
#: Scores further than this many standard deviations from the mean are outliers (set aside for the sweep).
OUTLIER_SIGMA = 3.0


# ---------------------------------------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Bench:
    """One benchmark file of a profile family and the classes it profiles."""

    path: str
    classes: tuple[str, ...]
    #: Column naming the GPU; ``cab-node-dev`` builds ``cabinet-node-device``.
    key: str = "uuid"


#: Families of measured per-GPU runs, as PAL maps benchmarks to classes (``profiles.json``): class A is
#: ResNet-50, classes B and C are BERT, class D is PageRank.
FAMILIES: dict[str, tuple[_Bench, ...]] = {
    "longhorn": (
        _Bench("sim/resnet-longhorn-agg.csv", ("classA",)),
        _Bench("sim/bert-longhorn-agg.csv", ("classB", "classC")),
        _Bench("sim/pagerank-longhorn-agg.csv", ("classD",)),
    ),
    "frontera": (
        _Bench("frontera/frontera-resnet-agg.csv", ("classA",)),
        _Bench("frontera/frontera-bert-agg.csv", ("classB", "classC")),
        _Bench("frontera/frontera-pagerank-agg.csv", ("classD",)),
    ),
    "ls6": (_Bench("ls6/resnet-ls6-agg.csv", ("classA",)),),
}
TESTBED = "testbed32"
TESTBED_FILE = "32gpu-variability.csv"
PROFILE_NAMES: tuple[str, ...] = (*FAMILIES, TESTBED)


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


def pm_scores_from_runs(perf: Sequence[float] | np.ndarray, gpu: Sequence[str] | np.ndarray) -> pd.Series:
    """Per-GPU PM-scores from benchmark runs: median over a GPU's runs of ``perf / median(all perf)``.

    ``perf`` is time-like (lower is faster), one value per run; ``gpu`` names the GPU of each run. This is
    PAL's normalisation: every run is divided by the median run of the file, and a GPU's score is the median
    of its runs (robust to the occasional straggler run, which reaches 3.6x on Longhorn).
    """
    p = pd.Series(np.asarray(perf, dtype=float))
    if len(p) == 0:
        raise InputError("a variability profile needs at least one run")
    if not np.isfinite(p).all() or (p <= 0).any():
        raise InputError("profile 'perf' values must be positive, finite times")
    ratio = p / float(p.median())
    return ratio.groupby(np.asarray(gpu).astype(str)).median().sort_index()


@lru_cache(maxsize=32)
def _bench_scores(path: str, key: str) -> pd.Series:
    frame = pd.read_csv(path)
    if key == "cab-node-dev":
        ident = (frame["cabinet"].astype(str) + "-" + frame["node"].astype(int).astype(str) + "-"
                 + frame["device"].astype(int).astype(str))
    else:
        ident = frame[key].astype(str)
    return pm_scores_from_runs(frame["perf"].to_numpy(dtype=float), ident.to_numpy())


def _aggregated(data_dir: Path | str) -> Path:
    return Path(data_dir) / "pal" / "aggregated_data"


def load_family(name: str, data_dir: Path | str) -> VariabilityProfile:
    """The measured profile of a family (``longhorn``, ``frontera``, ``ls6``, ``testbed32``).

    Each class holds one score per GPU its benchmark file measured (the files of one family measured
    overlapping but different sets of GPUs, so the arrays differ in length). ``ls6`` has only ResNet-50
    runs: its other classes are flat (all 1.0).
    """
    if name == TESTBED:
        return load_testbed(data_dir)
    if name not in FAMILIES:
        raise InputError(f"unknown variability profile '{name}' (known: {', '.join(PROFILE_NAMES)})",
                         field="profile")
    root = _aggregated(data_dir)
    scores: dict[str, np.ndarray] = {}
    for bench in FAMILIES[name]:
        path = root / bench.path
        if not path.is_file():
            raise InputError(f"variability profile '{name}': {path} not found (set DLSCHED_DATA)")
        vals = _bench_scores(str(path), bench.key).to_numpy(dtype=float)
        for cls in bench.classes:
            scores[cls] = vals.copy()
    flat = len(scores["classA"])
    return VariabilityProfile(name, {c: scores.get(c, np.ones(flat)) for c in CLASSES})


def load_testbed(data_dir: Path | str) -> VariabilityProfile:
    """PAL's measured 32-GPU Frontera testbed: ``PerfVar_<class>`` per GPU, in ``GPU_ID`` order."""
    path = _aggregated(data_dir) / TESTBED_FILE
    if not path.is_file():
        raise InputError(f"variability profile '{TESTBED}': {path} not found (set DLSCHED_DATA)")
    return _wide_profile(pd.read_csv(path), TESTBED, str(path))


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


def load_profile_file(path: str | Path, *, cls: str = "classA") -> VariabilityProfile:
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


def resolve_profile(spec: str, data_dir: Path | str | None = None) -> VariabilityProfile:
    """A family name (see :data:`PROFILE_NAMES`) or a profile file path."""
    if spec in PROFILE_NAMES:
        if data_dir is None:
            from dlsched.datadir import data_dir as default_dir

            data_dir = default_dir()
            if data_dir is None:
                raise InputError(f"variability profile '{spec}' needs the data directory (set DLSCHED_DATA)")
        return load_family(spec, data_dir)
    if Path(spec).expanduser().is_file():
        return load_profile_file(Path(spec).expanduser())
    raise InputError(f"'{spec}' is neither a profile family ({', '.join(PROFILE_NAMES)}) nor a file",
                     field="profile")


def draw_without_repetition(rng: np.random.Generator, pool: int, n: int) -> np.ndarray:
    """``n`` indices into ``pool`` items, no item twice until all have been used (blocks of ``pool``)."""
    if pool <= 0:
        raise InputError("cannot draw GPUs from an empty profile")
    parts, left = [], n
    while left > 0:
        block = rng.permutation(pool)[:left]
        parts.append(block)
        left -= len(block)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def sample_cluster(profile: VariabilityProfile, num_gpus: int, seed: int = 0) -> VariabilityProfile:
    """The PM-scores of an N-GPU simulated cluster: per class, N profiled GPUs drawn without repetition.

    PAL samples each class's profiling data "discretely, randomly ... without repetition"; when N exceeds
    the profiled GPUs, the draw continues with a fresh permutation.
    """
    rng = np.random.default_rng(seed)
    out = {c: v[draw_without_repetition(rng, len(v), num_gpus)] for c, v in profile.scores.items()}
    return VariabilityProfile(f"{profile.name}[{num_gpus}]", out)


@lru_cache(maxsize=32)
def _bench_runs(path: str) -> np.ndarray:
    perf = pd.read_csv(path)["perf"].to_numpy(dtype=float)
    return perf / float(np.median(perf))


def sample_runs(name: str, num_gpus: int, seed: int = 0, data_dir: Path | str | None = None) -> VariabilityProfile:
    """PM-scores drawn the way PAL's simulator draws them: single benchmark *runs*, not per-GPU medians.

    For each class, ``num_gpus`` runs of its benchmark file, without repetition, each divided by the file's
    median run, and each class drawn independently. Single runs include the stragglers (ResNet-50 on
    Longhorn reaches 3.6x), so this is a far more variable cluster than per-GPU medians give. PAL's
    simulator (``blox/cluster_state.py`` of ``hal-uw/blox-pal``) draws its GPUs' per-class scores like
    this, with replacement; the paper says without repetition. ``testbed32`` has precomputed per-GPU scores
    only, so it falls back to :func:`sample_cluster` over them.
    """
    if data_dir is None:
        from dlsched.datadir import data_dir as default_dir

        data_dir = default_dir()
        if data_dir is None:
            raise InputError(f"variability profile '{name}' needs the data directory (set DLSCHED_DATA)")
    if name == TESTBED:
        return sample_cluster(load_testbed(data_dir), num_gpus, seed)
    if name not in FAMILIES:
        raise InputError(f"unknown variability profile '{name}' (known: {', '.join(PROFILE_NAMES)})",
                         field="profile")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for bench in FAMILIES[name]:
        path = _aggregated(data_dir) / bench.path
        if not path.is_file():
            raise InputError(f"variability profile '{name}': {path} not found (set DLSCHED_DATA)")
        runs = _bench_runs(str(path))
        for cls in bench.classes:
            out[cls] = runs[draw_without_repetition(rng, len(runs), num_gpus)]
    return VariabilityProfile(f"{name}-runs[{num_gpus}]", {c: out.get(c, np.ones(num_gpus)) for c in CLASSES})


# ---------------------------------------------------------------------------------------------------------
# Binning: K-Means with the silhouette score
# ---------------------------------------------------------------------------------------------------------
def silhouette_1d(x: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette coefficient of a clustering of 1-D data, exactly, in O(n k log n).

    Equals ``sklearn.metrics.silhouette_score`` (Euclidean) without its O(n^2) distance matrix: for sorted
    cluster members and their prefix sums, the summed distance from any point to a cluster is
    ``x * below - sum_below + sum_above - x * above``. Points in singleton clusters score 0.
    """
    x = np.asarray(x, dtype=float)
    labels = np.asarray(labels)
    ids = np.unique(labels)
    n = len(x)
    if len(ids) < 2 or len(ids) >= n:
        raise ValueError("silhouette needs 2 <= clusters < points")
    dist = np.empty((len(ids), n))
    sizes = np.empty(len(ids))
    for j, c in enumerate(ids):
        s = np.sort(x[labels == c])
        pre = np.concatenate([[0.0], np.cumsum(s)])
        below = np.searchsorted(s, x, side="right")
        total = pre[-1]
        dist[j] = x * below - pre[below] + (total - pre[below]) - x * (len(s) - below)
        sizes[j] = len(s)
    own = np.searchsorted(ids, labels)
    own_size = sizes[own]
    a = np.where(own_size > 1, dist[own, np.arange(n)] / np.maximum(own_size - 1, 1), 0.0)
    mean_other = dist / sizes[:, None]
    mean_other[own, np.arange(n)] = np.inf
    b = mean_other.min(axis=0)
    denom = np.maximum(a, b)
    s = np.where((own_size > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
    return float(s.mean())


def _lloyd_sorted(xs: np.ndarray, pre: np.ndarray, centers: np.ndarray, max_iter: int = 300) -> tuple[np.ndarray, float]:
    """Lloyd's iterations on sorted 1-D data; returns sorted centroids and inertia.

    In one dimension the assignment step is a ``searchsorted`` of the midpoints between sorted centroids and
    the update step is a difference of prefix sums, so an iteration costs O(k log n).
    """
    n = len(xs)
    pre2 = np.concatenate([[0.0], np.cumsum(xs * xs)])
    c = np.sort(centers)
    for _ in range(max_iter):
        cuts = np.searchsorted(xs, (c[:-1] + c[1:]) / 2.0, side="right")
        lo = np.concatenate([[0], cuts])
        hi = np.concatenate([cuts, [n]])
        size = hi - lo
        keep = size > 0
        new = (pre[hi[keep]] - pre[lo[keep]]) / size[keep]
        if len(new) == len(c) and np.allclose(new, c, rtol=0.0, atol=1e-15):
            c = new
            break
        c = new
    cuts = np.searchsorted(xs, (c[:-1] + c[1:]) / 2.0, side="right")
    lo = np.concatenate([[0], cuts])
    hi = np.concatenate([cuts, [n]])
    size = hi - lo
    sums = pre[hi] - pre[lo]
    inertia = float(np.sum(pre2[hi] - pre2[lo] - np.where(size > 0, sums * sums / np.maximum(size, 1), 0.0)))
    return c, inertia


#: Up to this many points, K-Means runs as the exact dynamic programme (O(k n^2), vectorised).
DP_MAX_POINTS = 500


def _optimal_1d(xs: np.ndarray, k_max: int) -> list[np.ndarray]:
    """Exact 1-D K-Means (Ckmeans-style DP) on sorted ``xs``: sorted centroids for every K in 1..k_max."""
    n = len(xs)
    s1 = np.concatenate([[0.0], np.cumsum(xs)])
    s2 = np.concatenate([[0.0], np.cumsum(xs * xs)])
    j = np.arange(n + 1)[:, None]
    i = np.arange(n + 1)[None, :]
    cnt = i - j
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = (s2[i] - s2[j]) - (s1[i] - s1[j]) ** 2 / cnt
    cost = np.where(cnt > 0, np.maximum(cost, 0.0), np.inf)
    d = cost[0].copy()
    back: list[np.ndarray] = []
    for _ in range(2, k_max + 1):
        m = d[:, None] + cost
        arg = m.argmin(axis=0)
        d = m[arg, np.arange(n + 1)]
        back.append(arg)
    out = [np.array([xs.mean()])]
    for k in range(2, k_max + 1):
        cuts = [n]
        for kk in range(k, 1, -1):
            cuts.append(int(back[kk - 2][cuts[-1]]))
        cuts.append(0)
        cuts = cuts[::-1]
        out.append(np.array([(s1[b] - s1[a]) / (b - a) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]))
    return out


def _kmeans_1d(x: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """K-Means on 1-D data: labels (0 = the smallest centroid) and sorted centroids (see :func:`_centroids_1d`)."""
    return _assign(x, _centroids_1d(np.asarray(x, dtype=float), (k,), seed)[k])


def _assign(x: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    labels = np.searchsorted((centers[:-1] + centers[1:]) / 2.0, x, side="left")
    return labels.astype(np.int64), centers


def _centroids_1d(x: np.ndarray, ks: tuple[int, ...], seed: int = 0) -> dict[int, np.ndarray]:
    """Sorted K-Means centroids of 1-D data for each K in ``ks``.

    Up to :data:`DP_MAX_POINTS` points: the exact optimum. Beyond: the exact optimum of an evenly spaced
    quantile sample of that size, refined by Lloyd's iterations on all points (deterministic; ``seed`` is
    kept for interface compatibility).
    """
    xs = np.sort(x)
    if len(xs) <= DP_MAX_POINTS:
        table = _optimal_1d(xs, max(ks))
        return {k: table[k - 1] for k in ks}
    sample = np.quantile(xs, np.linspace(0.0, 1.0, DP_MAX_POINTS))
    table = _optimal_1d(sample, max(ks))
    pre = np.concatenate([[0.0], np.cumsum(xs)])
    return {k: _lloyd_sorted(xs, pre, np.unique(table[k - 1]))[0] for k in ks}


@dataclass(frozen=True)
class PmBins:
    """The binned PM-scores of one class on one set of GPUs.

    ``values[i]`` is the PM-score the policy uses for GPU ``i``: its bin's centroid, or for an outlier its
    own score. ``levels`` are the distinct values, ascending, and ``labels[i]`` indexes them (0 = best bin).
    """

    values: np.ndarray
    labels: np.ndarray
    levels: np.ndarray
    #: Centroids of the K-Means bins (ascending), without the outliers' own scores.
    centroids: np.ndarray
    k: int
    #: Silhouette score of the chosen K (NaN when no sweep was possible) and of every K tried.
    silhouette: float
    sweep: dict[int, float]
    #: Indices of the GPUs set aside as > ``outlier_sigma`` outliers (they keep their own scores).
    outliers: np.ndarray
    raw: np.ndarray = field(repr=False)

    @property
    def num_bins(self) -> int:
        return len(self.levels)

    def counts(self) -> np.ndarray:
        """GPUs per level."""
        return np.bincount(self.labels, minlength=len(self.levels))

    def to_dict(self) -> dict:
        return {
            "k": self.k, "silhouette": None if math.isnan(self.silhouette) else round(self.silhouette, 4),
            "sweep": {str(k): round(v, 4) for k, v in self.sweep.items()},
            "centroids": [round(float(c), 5) for c in self.centroids],
            "levels": [round(float(v), 5) for v in self.levels],
            "counts": [int(c) for c in self.counts()],
            "outliers": [round(float(self.raw[i]), 5) for i in self.outliers],
            "num_gpus": int(len(self.raw)),
        }


def silhouette_sorted(xs: np.ndarray, cuts: np.ndarray) -> float:
    """Mean silhouette of sorted 1-D data split into consecutive intervals ``xs[cuts[j]:cuts[j+1]]``, in O(n).

    K-Means clusters of 1-D data are intervals, so a point's mean distance to its own cluster comes from
    prefix sums, and its nearest other cluster is an adjacent interval (every point of a farther one is
    farther away). Equals :func:`silhouette_1d` for such labels.
    """
    cuts = np.unique(np.asarray(cuts, dtype=np.int64))
    n = len(xs)
    k = len(cuts) - 1
    if k < 2 or k >= n:
        raise ValueError("silhouette needs 2 <= clusters < points")
    pre = np.concatenate([[0.0], np.cumsum(xs)])
    lo, hi = cuts[:-1], cuts[1:]
    size = hi - lo
    mean = (pre[hi] - pre[lo]) / size
    cl = np.repeat(np.arange(k), size)
    i = np.arange(n)
    a0, b0, m = lo[cl], hi[cl], size[cl]
    within = xs * (i - a0) - (pre[i] - pre[a0]) + (pre[b0] - pre[i + 1]) - xs * (b0 - i - 1)
    a = np.where(m > 1, within / np.maximum(m - 1, 1), 0.0)
    left = np.where(cl > 0, xs - mean[np.maximum(cl - 1, 0)], np.inf)
    right = np.where(cl < k - 1, mean[np.minimum(cl + 1, k - 1)] - xs, np.inf)
    b = np.minimum(left, right)
    denom = np.maximum(a, b)
    sil = np.where((m > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
    return float(sil.mean())


def choose_k(x: np.ndarray, *, k_min: int = K_MIN, k_max: int = K_MAX, seed: int = 0) -> tuple[int, dict[int, float]]:
    """K with the highest silhouette score over ``k_min..k_max`` (capped by the distinct values)."""
    k, sweep, _ = _sweep(x, k_min, k_max, seed)
    return k, sweep


def _sweep(x: np.ndarray, k_min: int, k_max: int, seed: int) -> tuple[int, dict[int, float], dict[int, np.ndarray]]:
    xs = np.sort(np.asarray(x, dtype=float))
    distinct = len(np.unique(xs))
    hi = min(k_max, distinct - 1, len(xs) - 1)
    sweep: dict[int, float] = {}
    ks = tuple(range(k_min, hi + 1))
    cents = _centroids_1d(xs, ks, seed) if ks else {}
    for k in ks:
        c = cents[k]
        cuts = np.concatenate([[0], np.searchsorted(xs, (c[:-1] + c[1:]) / 2.0, side="right"), [len(xs)]])
        if len(np.unique(cuts)) < 3:
            continue
        sweep[k] = silhouette_sorted(xs, cuts)
    if not sweep:
        return max(1, min(distinct, k_min)), sweep, cents
    best = max(sweep, key=lambda k: (sweep[k], -k))
    return best, sweep, cents


def fit_bins(scores: Sequence[float] | np.ndarray, *, k_min: int = K_MIN, k_max: int = K_MAX,
             outlier_sigma: float = OUTLIER_SIGMA, seed: int = 0) -> PmBins:
    """Bin one class's per-GPU PM-scores (PAL section III-B).

    Outliers beyond ``outlier_sigma`` standard deviations are set aside; K-Means runs on the rest with K
    chosen by the silhouette score swept over ``k_min..k_max``; inliers take their bin's centroid and
    outliers keep their own scores (each its own level). ``outlier_sigma <= 0`` disables the outlier rule;
    ``k_max < k_min`` disables clustering (every distinct score is its own level: PAL's fine-grained variant).
    """
    raw = np.asarray(scores, dtype=float).copy()
    n = len(raw)
    if n == 0:
        raise InputError("cannot bin an empty set of PM-scores")
    if not np.isfinite(raw).all():
        raise InputError("PM-scores must be finite")
    sd = float(raw.std())
    if outlier_sigma > 0 and sd > 0:
        out_mask = np.abs(raw - raw.mean()) > outlier_sigma * sd
    else:
        out_mask = np.zeros(n, dtype=bool)
    inl = raw[~out_mask]
    values = raw.copy()
    distinct = np.unique(inl)
    if len(distinct) <= max(2, k_min) or k_max < k_min:
        # Too few distinct values to cluster, or clustering off (k_max < k_min): each value is its own bin.
        k, sweep, sil = len(distinct), {}, math.nan
        centroids = distinct
        values[~out_mask] = inl
    else:
        k, sweep, cents = _sweep(inl, k_min, k_max, seed)
        labels, centroids = _assign(inl, cents[k]) if k in cents else _kmeans_1d(inl, k, seed)
        values[~out_mask] = centroids[labels]
        sil = sweep.get(k, math.nan)
        centroids = np.unique(centroids[np.unique(labels)])
    levels, inverse = np.unique(values, return_inverse=True)
    values = levels[inverse]
    values.setflags(write=False)
    return PmBins(values=values, labels=inverse.astype(np.int64), levels=levels, centroids=np.asarray(centroids),
                  k=int(k), silhouette=float(sil), sweep=sweep, outliers=np.flatnonzero(out_mask), raw=raw)


class BinCache:
    """Binned scores by content, so each distinct scores array is binned once per process.

    The engine hands the same arrays every round; they are recognised by identity first (free) and by a
    digest of their bytes otherwise (a 27,000-GPU array hashes in well under a millisecond).
    """

    def __init__(self, maxsize: int = 64) -> None:
        self._by_digest: OrderedDict[tuple, PmBins] = OrderedDict()
        self._by_id: dict[int, tuple[np.ndarray, tuple, PmBins]] = {}
        self._maxsize = maxsize
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._by_digest.clear()
            self._by_id.clear()

    def get(self, scores: np.ndarray, **params) -> PmBins:
        arr = np.asarray(scores, dtype=float)
        pkey = tuple(sorted(params.items()))
        hit = self._by_id.get(id(scores))
        if hit is not None and hit[0] is scores and hit[1] == pkey:
            return hit[2]
        digest = (hashlib.blake2b(np.ascontiguousarray(arr).tobytes(), digest_size=16).hexdigest(), arr.shape, pkey)
        with self._lock:
            bins = self._by_digest.get(digest)
            if bins is not None:
                self._by_digest.move_to_end(digest)
        if bins is None:
            bins = fit_bins(arr, **params)
            with self._lock:
                self._by_digest[digest] = bins
                while len(self._by_digest) > self._maxsize:
                    self._by_digest.popitem(last=False)
        if isinstance(scores, np.ndarray):
            with self._lock:
                if len(self._by_id) > 4 * self._maxsize:
                    self._by_id.clear()
                self._by_id[id(scores)] = (scores, pkey, bins)
        return bins


#: The process-wide cache the placement policies use.
BINS = BinCache()


def binned_profile(gpu_scores: Mapping[str, np.ndarray], **params) -> dict[str, PmBins]:
    """Bins of every class of a measured profile (cached; see :class:`BinCache`)."""
    return {c: BINS.get(v, **params) for c, v in gpu_scores.items()}


# ---------------------------------------------------------------------------------------------------------
# The locality x variability matrix
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LvMatrix:
    """PAL's L x V matrix for one class: ``products[l, v] = penalty[l] * levels[v]``.

    Levels of locality run from the tightest (within a node, penalty 1.0) to the loosest (across nodes, or
    across racks when the cluster has racks). :meth:`traversal` lists the entries from the smallest product;
    ties go to the tighter locality level, then to the better bin.
    """

    level_names: tuple[str, ...]
    penalties: tuple[float, ...]
    values: tuple[float, ...]

    @property
    def products(self) -> np.ndarray:
        return np.outer(np.asarray(self.penalties), np.asarray(self.values))

    def traversal(self) -> list[tuple[int, int]]:
        """(level index, bin index) from the smallest LV-product to the largest."""
        return traversal_order(self.penalties, self.values)

    def render(self) -> str:
        width = max(8, *(len(n) for n in self.level_names))
        head = " " * width + "".join(f"{v:>9.3f}" for v in self.values)
        rows = [f"{n:<{width}}" + "".join(f"{p * v:>9.3f}" for v in self.values)
                for n, p in zip(self.level_names, self.penalties, strict=True)]
        return "\n".join([head, *rows])


@lru_cache(maxsize=4096)
def traversal_order(penalties: tuple[float, ...], values: tuple[float, ...]) -> list[tuple[int, int]]:
    """(level, bin) entries of an L x V matrix from the smallest product; ties: tighter level, better bin."""
    entries = [(p * v, li, vi) for li, p in enumerate(penalties) for vi, v in enumerate(values)]
    entries.sort()
    return [(li, vi) for _, li, vi in entries]


def lv_matrix(levels: np.ndarray | Sequence[float], l_across: float, *, l_rack: float | None = None,
              racks: bool = False) -> LvMatrix:
    """The L x V matrix of one class for a cross-node penalty (and a rack level when ``racks``)."""
    vals = tuple(float(v) for v in levels)
    if racks:
        rack = l_rack if l_rack is not None else default_rack_penalty(l_across)
        return LvMatrix(("within node", "within rack", "across racks"), (1.0, float(rack), float(l_across)), vals)
    return LvMatrix(("within node", "across nodes"), (1.0, float(l_across)), vals)


def default_rack_penalty(l_across: float) -> float:
    """Penalty of spanning nodes inside one rack when not given: halfway between 1 and ``l_across``."""
    return 1.0 + (float(l_across) - 1.0) / 2.0


# ---------------------------------------------------------------------------------------------------------
# Locality penalties
# ---------------------------------------------------------------------------------------------------------
#: The constant cross-node penalty PAL estimated on Frontera (ResNet-50, 4 vs 8 GPUs) and used for Synergy.
FRONTERA_PENALTY = 1.7


class LocalityPenalties:
    """The cross-node penalty a scheduler assumes per (model, GPU count), or one constant.

    PAL measured per-model penalties on its Frontera testbed and uses them in its Sia-Philly simulations;
    pairs it did not measure cost nothing (1.0). The table comes from ``pal_simulation_constants.json`` in
    the data directory, or, without it, from the same numbers shipped in the package.
    """

    def __init__(self, table: Mapping[str, Mapping[int, float]] | None = None, constant: float | None = None) -> None:
        self.constant = None if constant is None else float(constant)
        self._table = {m: dict(t) for m, t in (table or {}).items()}
        self._folded = {m.casefold(): m for m in self._table}

    @classmethod
    def constant_penalty(cls, value: float) -> LocalityPenalties:
        return cls(None, value)

    @classmethod
    def from_data(cls, data_dir: Path | str | None = None) -> LocalityPenalties:
        return cls(_penalty_table(None if data_dir is None else str(data_dir)))

    def penalty(self, model: str, num_gpus: int) -> float:
        if self.constant is not None:
            return self.constant
        name = model if model in self._table else self._folded.get(str(model).casefold())
        if name is None:
            return 1.0
        return float(self._table[name].get(int(num_gpus), 1.0))

    def table(self) -> dict[str, dict[int, float]]:
        return {m: dict(t) for m, t in self._table.items()}


@lru_cache(maxsize=8)
def _penalty_table(data_dir: str | None) -> dict[str, dict[int, float]]:
    """model -> {GPU count: penalty}, from the data directory's constants file or the packaged copy."""
    if data_dir is None:
        from dlsched.datadir import data_dir as default_dir

        found = default_dir()
        data_dir = None if found is None else str(found)
    if data_dir is not None:
        path = Path(data_dir) / "pal" / "pal_simulation_constants.json"
        if path.is_file():
            raw = json.loads(path.read_text())["locality_penalty_when_spread_across_nodes"]
            table: dict[str, dict[int, float]] = {}
            for key, val in raw.items():
                if key.startswith("_"):
                    continue
                model, _, n = key.partition("|")
                table.setdefault(model, {})[int(n)] = float(val)
            return table
    # Without the data directory: the same numbers, as the package ships them for the simulator. Read as a
    # data file (estimators never import the world's code).
    packaged = Path(__file__).resolve().parent.parent / "catalog" / "params" / "pal_constants.json"
    if packaged.is_file():
        raw2 = json.loads(packaged.read_text())["locality_penalty"]
        return {m: {int(k): float(v) for k, v in t.items()} for m, t in raw2.items()}
    return {}
