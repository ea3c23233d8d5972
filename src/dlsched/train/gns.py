"""Gradient noise scale and AdaScale's gain, from the squared norms DDP's communication hook measures.

With ``E|g_b|^2 = |G|^2 + S/b`` for the mean gradient over ``b`` samples (McCandlish et al.), two gradient
estimates of different batch sizes give unbiased ``|G|^2`` and ``S`` (the trace of the per-sample gradient
covariance). Over ``n >= 2`` replicas the two are each replica's local gradient and the all-reduced global one;
with one replica, this step's gradient and the previous step's, combined by their batch sizes, play the parts
(AdaptDL's approach). With gradient accumulation every micro-batch is one such local gradient, so ``k``
micro-batches on ``n`` replicas give ``n * k`` pieces against one global gradient. The raw per-step values
are noisy and may be negative; they are averaged with an exponential weight and bias correction, and clamped
only when used, so the average stays unbiased.

The weight of the history is ``SMOOTHING ** scale`` per step, ``scale`` being the step's global batch over
the initial one (``B / B0``), as AdaptDL does (0.999 per unit of scale): a step of a four times larger batch
carries four times the information and ages the history as four steps of the initial batch would. A fixed
per-step weight would make the averaging window shrink in samples as the batch shrinks and, at 0.9, average
over some ten steps only, too few for the noisy raw values (the accuracy tests need hundreds).

The service's estimators read Pollux's names: ``grad_sqr`` is ``|G|^2`` and ``grad_var`` is ``S / B0``, the
noise of a batch of the job's initial size ``B0`` (``dlsched.estimators.goodput``); AdaScale's gain for a batch
``B`` is ``(var + sqr) / (var / (B / B0) + sqr)``, as ``dlsched.runtime.training`` applies it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Weight of the history per unit of scale (a step of the initial batch): AdaptDL's 0.999, raised to the
#: step's ``B / B0`` in ``GradientNoiseScale.update``.
SMOOTHING = 0.999
_TINY = 1e-30


def estimate_from_pair(mean_local_sqr: float, mean_inv_local: float, global_sqr: float,
                       global_batch: int) -> tuple[float, float] | None:
    """Unbiased ``(|G|^2, S)`` from the mean squared norm of local gradients (``mean_inv_local``: the mean of
    their ``1/b``) and the squared norm of the mean gradient over ``global_batch`` samples."""
    denom = mean_inv_local - 1.0 / global_batch
    if denom <= 1e-15:
        return None
    noise = (mean_local_sqr - global_sqr) / denom
    return global_sqr - noise / global_batch, noise


def estimate_from_pieces(sqr_sum: float, counts: list[int], global_sqr: float) -> tuple[float, float] | None:
    """Unbiased ``(|G|^2, S)`` from ``sqr_sum``, the summed squared norms of the mean gradients of pieces
    of ``counts`` samples (replicas, or micro-batches of each replica; pieces without samples are left out),
    and the squared norm of the mean gradient over all of them."""
    sizes = [c for c in counts if c > 0]
    if len(sizes) < 2:
        return None
    return estimate_from_pair(sqr_sum / len(sizes), sum(1.0 / c for c in sizes) / len(sizes), global_sqr,
                              sum(sizes))


def estimate_from_steps(prev_sqr: float, cur_sqr: float, dot: float, prev_batch: int,
                        cur_batch: int) -> tuple[float, float] | None:
    """Unbiased ``(|G|^2, S)`` on one replica from the previous step's gradient (``prev_batch`` samples), this
    step's (``cur_batch``) and their dot product: the two combined by batch size are a gradient over both."""
    total = prev_batch + cur_batch
    combined = (prev_batch ** 2 * prev_sqr + cur_batch ** 2 * cur_sqr + 2 * prev_batch * cur_batch * dot) / total ** 2
    mean_inv = (1.0 / prev_batch + 1.0 / cur_batch) / 2
    return estimate_from_pair((prev_sqr + cur_sqr) / 2, mean_inv, combined, total)


def adascale_gain(batch: int, init_batch: int, grad_sqr: float | None, grad_var: float | None) -> float:
    """AdaScale's gain for ``batch``: 1 at the initial batch or without statistics, up to ``batch / init_batch``
    when gradient noise dominates."""
    scale = batch / init_batch
    if grad_sqr is None or grad_var is None or grad_sqr + grad_var <= 0:
        return 1.0
    return (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)


@dataclass
class GradientNoiseScale:
    """Bias-corrected exponential averages of ``|G|^2`` and ``S`` over steps."""

    init_batch: int
    smoothing: float = SMOOTHING
    sqr_sum: float = 0.0
    noise_sum: float = 0.0
    weight: float = 0.0
    measurements: int = 0

    def update(self, sqr: float, noise: float, scale: float = 1.0) -> None:
        """Fold in one step's raw estimates; ``scale`` is the step's global batch over the initial one."""
        s = self.smoothing ** max(scale, 0.0)
        self.sqr_sum = s * self.sqr_sum + (1 - s) * sqr
        self.noise_sum = s * self.noise_sum + (1 - s) * noise
        self.weight = s * self.weight + (1 - s)
        self.measurements += 1

    @property
    def noise(self) -> float | None:
        """``S``: trace of the per-sample gradient covariance (None until measured)."""
        return None if self.weight <= 0 else max(self.noise_sum / self.weight, 0.0)

    @property
    def grad_sqr(self) -> float | None:
        """Pollux's ``grad_sqr``: ``|G|^2`` (None until measured)."""
        return None if self.weight <= 0 else max(self.sqr_sum / self.weight, _TINY)

    @property
    def grad_var(self) -> float | None:
        """Pollux's ``grad_var``: ``S / B0`` (None until measured)."""
        noise = self.noise
        return None if noise is None else noise / self.init_batch

    @property
    def noise_scale(self) -> float | None:
        """The simple noise scale ``S / |G|^2``: the batch size where noise and signal are equal."""
        noise, sqr = self.noise, self.grad_sqr
        return None if noise is None or sqr is None else noise / sqr

    def gain(self, batch: int) -> float:
        return adascale_gain(batch, self.init_batch, self.grad_sqr, self.grad_var)

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("sqr_sum", "noise_sum", "weight"):
            setattr(self, key, float(state[key]))
        self.measurements = int(state["measurements"])
