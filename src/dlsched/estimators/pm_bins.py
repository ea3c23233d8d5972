"""Binned PM-scores: what PM-First and PAL compare GPUs by (PAL, SC'24, section III-B).

Per class, K-Means over the per-GPU scores with K chosen by the silhouette score (swept from 2 to 11, with
the > 3 sigma outliers set aside for the analysis); outliers keep their own scores, every other GPU takes
its bin's centroid. Binning turns near-equal GPUs into interchangeable ones, so a placement can prefer a
better bin without chasing noise between GPUs of the same bin. :class:`BinCache` bins each distinct scores
array once per process, since the engine hands the policy the same profile every round.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dlsched.core.errors import InputError
from dlsched.estimators.kmeans_1d import K_MAX, K_MIN, assign_to_centroids, kmeans_1d, silhouette_sweep

#: Scores further than this many standard deviations from the mean are outliers (set aside for the sweep).
OUTLIER_SIGMA = 3.0


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
    sweep: dict[int, float]
    if len(distinct) <= max(2, k_min) or k_max < k_min:
        # Too few distinct values to cluster, or clustering off (k_max < k_min): each value is its own bin.
        k, sweep, sil = len(distinct), {}, math.nan
        centroids = distinct
        values[~out_mask] = inl
    else:
        k, sweep, cents = silhouette_sweep(inl, k_min, k_max, seed)
        labels, centroids = assign_to_centroids(inl, cents[k]) if k in cents else kmeans_1d(inl, k, seed)
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
