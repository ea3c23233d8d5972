"""K-Means on one-dimensional data with K chosen by the silhouette score (PAL, SC'24, section III-B).

PAL bins each class's per-GPU PM-scores with K-Means, K swept from 2 to 11 and chosen by the silhouette
score. Scores are one number per GPU, and in one dimension both problems have exact, fast answers that the
general-purpose versions miss: K-Means clusters are intervals of the sorted data, so the optimum is a
dynamic programme over split points, and a point's nearest other cluster is an adjacent interval, so the
silhouette takes prefix sums instead of a distance matrix. That keeps binning a 27,000-GPU cluster well
under a second, and makes the bins deterministic.
"""

from __future__ import annotations

import numpy as np

#: K swept by the silhouette analysis (PAL: 2 to 11).
K_MIN, K_MAX = 2, 11


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


def lloyd_sorted(xs: np.ndarray, pre: np.ndarray, centers: np.ndarray, max_iter: int = 300) -> tuple[np.ndarray, float]:
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


def optimal_centroids_1d(xs: np.ndarray, k_max: int) -> list[np.ndarray]:
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


def kmeans_1d(x: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """K-Means on 1-D data: labels (0 = the smallest centroid) and sorted centroids (see :func:`centroids_1d`)."""
    return assign_to_centroids(x, centroids_1d(np.asarray(x, dtype=float), (k,), seed)[k])


def assign_to_centroids(x: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels of ``x`` by nearest of the sorted ``centers`` (ties to the lower one), and the centers."""
    labels = np.searchsorted((centers[:-1] + centers[1:]) / 2.0, x, side="left")
    return labels.astype(np.int64), centers


def centroids_1d(x: np.ndarray, ks: tuple[int, ...], seed: int = 0) -> dict[int, np.ndarray]:
    """Sorted K-Means centroids of 1-D data for each K in ``ks``.

    Up to :data:`DP_MAX_POINTS` points: the exact optimum. Beyond: the exact optimum of an evenly spaced
    quantile sample of that size, refined by Lloyd's iterations on all points (deterministic; ``seed`` is
    kept for interface compatibility).
    """
    xs = np.sort(x)
    if len(xs) <= DP_MAX_POINTS:
        table = optimal_centroids_1d(xs, max(ks))
        return {k: table[k - 1] for k in ks}
    sample = np.quantile(xs, np.linspace(0.0, 1.0, DP_MAX_POINTS))
    table = optimal_centroids_1d(sample, max(ks))
    pre = np.concatenate([[0.0], np.cumsum(xs)])
    return {k: lloyd_sorted(xs, pre, np.unique(table[k - 1]))[0] for k in ks}


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
    k, sweep, _ = silhouette_sweep(x, k_min, k_max, seed)
    return k, sweep


def silhouette_sweep(x: np.ndarray, k_min: int, k_max: int,
                     seed: int = 0) -> tuple[int, dict[int, float], dict[int, np.ndarray]]:
    """The best K, the silhouette of every K tried, and every K's sorted centroids.

    K runs over ``k_min..k_max`` capped by the distinct values; a K whose centroids leave fewer than two
    non-empty clusters is skipped. Ties go to the smaller K. With nothing to sweep, K is the smaller of
    ``k_min`` and the distinct values, and the sweep is empty.
    """
    xs = np.sort(np.asarray(x, dtype=float))
    distinct = len(np.unique(xs))
    hi = min(k_max, distinct - 1, len(xs) - 1)
    sweep: dict[int, float] = {}
    ks = tuple(range(k_min, hi + 1))
    cents = centroids_1d(xs, ks, seed) if ks else {}
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
