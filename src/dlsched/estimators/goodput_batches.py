"""Batch-size and goodput arithmetic of the goodput estimator, free of any learned state.

Goodput is throughput times Pollux's statistical efficiency; for each resource shape the estimator
evaluates a set of candidate global batches at once and keeps the best. This module holds that arithmetic
(which batches to try, how a batch splits into per-replica micro-batches and accumulation steps, the
efficiency of a batch, the best candidate per shape), so it can be read and tested without the per-job
models of :mod:`dlsched.estimators.goodput_state`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Candidate global batches per shape on the geometric grid (plus up to 4 memory-filling batches).
BATCH_GRID = 32
#: AdaptDL's ``GoodputFunction.optimize`` samples this many global batches (``np.geomspace``'s default).
ADAPTDL_BATCHES = 50
#: How adaptive jobs' candidate batches are searched: AdaptDL's way, or a finer grid with memory-filling points.
BATCH_SEARCHES = ("adaptdl", "dense")
#: AdaptDL's tolerance for its floor/ceil operations.
_EPS = 1e-8
_MEMORY_FILL = np.arange(1, 5, dtype=float)[None, :]
_GRID_U = np.linspace(0.0, 1.0, BATCH_GRID)[None, :]


def statistical_efficiency(batch_size: np.ndarray | float, init_batch: float, grad_sqr: float,
                           grad_var: float) -> np.ndarray:
    """Pollux's efficiency of global batch ``batch_size`` relative to ``init_batch`` (1 there).

    ``grad_sqr`` and ``grad_var`` are the squared norm of the mean gradient and the gradient-noise variance
    at the initial batch size. Zero statistics give a gain of 1 (no benefit from a larger batch).
    """
    scale = np.asarray(batch_size, dtype=float) / float(init_batch)
    if grad_var <= 0 and grad_sqr <= 0:
        return 1.0 / scale
    # gain / scale with gain = (var + sqr) / (var / scale + sqr), in one division
    return (grad_var + grad_sqr) / (grad_var + grad_sqr * scale)


@dataclass(frozen=True, slots=True)
class GoodputTable:
    """Per-shape goodput and how it is reached (arrays aligned with the queried shapes)."""

    goodput: np.ndarray
    batch_size: np.ndarray
    throughput_sps: np.ndarray
    efficiency: np.ndarray
    local_bsz: np.ndarray
    accum_steps: np.ndarray


def candidate_batches(replicas: np.ndarray, init_batch: float, max_batch: float, limit: float, *,
                      adaptive: bool, fixed_batch: float) -> np.ndarray:
    """Global batches to evaluate, one row per shape (``replicas`` is a column of data-parallel replicas).

    Adaptive jobs try a geometric grid over ``[max(B0, replicas), Bmax]`` plus the batches that fill the
    per-replica memory ``limit`` exactly for 1-4 accumulation steps (the goodput optimum often sits on such
    a boundary, between grid points); other jobs keep ``fixed_batch``.
    """
    if not adaptive:
        return np.full((len(replicas), 1), fixed_batch)
    lo = np.minimum(np.maximum(init_batch, replicas), max_batch)
    batches = np.round(lo * (max_batch / lo) ** _GRID_U)
    if math.isfinite(limit):
        fill = replicas * (limit * _MEMORY_FILL)
        fill = np.where((fill >= lo) & (fill <= max_batch), fill, lo)
        batches = np.concatenate([batches, fill], axis=1)
    return batches


def adaptdl_batches(replicas: np.ndarray, init_batch: float, max_batch: float,
                    limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """AdaptDL's candidates (``adaptdl.goodput.GoodputFunction.optimize`` with accumulation on).

    Per row (``replicas`` is a column): 50 unrounded geometric global batches from ``max(B0, replicas)`` to
    ``Bmax``; each replica's share is split into micro-steps of at most ``limit`` samples (``Bmax`` when the
    limit is unknown), and a single replica whose share exceeds ``B0`` always accumulates over at least two
    micro-steps, because AdaptDL's gradient statistics need two micro-batches to be accurate. The batch that
    actually runs, ``replicas x micro-batch x micro-steps``, is what the estimator credits (throughput and
    efficiency), as AdaptDL does.

    Returns the realised global batches, micro-batches, micro-steps (``accum_steps + 1`` in AdaptDL's terms)
    and which candidates are valid (micro-batch within ``[1, limit]``).
    """
    lo = np.maximum(init_batch, replicas[:, 0])
    nominal = np.geomspace(lo, np.full_like(lo, max_batch), ADAPTDL_BATCHES, axis=1)
    share = nominal / replicas
    max_atomic = limit if math.isfinite(limit) else max_batch
    extra = np.ceil(share / max_atomic - _EPS) - 1.0
    extra = np.where((replicas == 1) & (share > init_batch + _EPS), np.maximum(extra, 1.0), extra)
    local = np.ceil(share / (extra + 1.0) - _EPS)
    steps = extra + 1.0
    valid = (local >= 1.0) & (local <= max_atomic)
    return replicas * local * steps, local, steps, valid


def split_batches(batches: np.ndarray, replicas: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-replica micro-batch and accumulation steps for each global batch, within the memory ``limit``.

    A replica's share above the limit is run as several accumulated micro-batches of equal size.
    """
    share = np.maximum(1.0, np.ceil(batches / replicas - 1e-9))
    if math.isfinite(limit):
        accum = np.maximum(1.0, np.ceil(share / limit - 1e-9))
        local = np.ceil(share / accum - 1e-9)
    else:
        accum, local = np.ones_like(share), share
    return local, accum


def best_per_row(goodput: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row the flat index of the best candidate, and its goodput (0 where invalid or not positive)."""
    m, cols = goodput.shape
    flat = np.argmax(goodput, axis=1) + np.arange(m) * cols  # index of each row's best batch
    good = goodput.ravel()[flat]
    return flat, np.where(valid & np.isfinite(good) & (good > 0), good, 0.0)
