"""What the noise scale and the learning rate need of the optimiser: Adam's preconditioner and the scaling rule.

An adaptive optimiser (Adam, AdamW, NAdam, RAdam, RMSprop) does not step along the gradient ``g`` but along
``g / p`` with ``p = sqrt(v_hat) + eps`` from its second-moment estimate ``v``. The noise that matters for
such a step is the noise of the preconditioned gradient, so the gradient statistics are taken of ``g / p``
(AdaptDL's ``AdamGradientNoiseScale``), and the learning rate follows the square root of AdaScale's gain
(AdaptDL's ``AdamScale``): the step of an adaptive optimiser does not grow linearly with the gradient's
signal-to-noise gain the way plain SGD's does. Until the optimiser has a few steps of state its ``v`` is too
noisy to precondition by, so no statistics are folded in before ``WARMUP_STEPS``.
"""

from __future__ import annotations

import math

import torch

#: Optimiser steps before Adam's second moments are trusted as a preconditioner (AdaptDL waits 5).
WARMUP_STEPS = 5


def adaptive(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` preconditions by a second-moment estimate (the Adam family, RMSprop)."""
    return isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW, torch.optim.NAdam, torch.optim.RAdam,
                                  torch.optim.RMSprop))


def lr_factor(optimizer: torch.optim.Optimizer, gain: float) -> float:
    """The factor on the learning rate for AdaScale's ``gain``: the gain itself for SGD, its square root for
    an adaptive optimiser."""
    return math.sqrt(gain) if adaptive(optimizer) else gain


class Preconditioner:
    """``p = sqrt(v_hat) + eps`` of each parameter from the optimiser's state (None while not warmed up)."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.active = adaptive(optimizer)
        self._group: dict[int, dict[str, object]] = {}
        self._cache: dict[int, torch.Tensor | None] = {}

    def reset(self) -> None:
        """Forget the values of the last step (the optimiser's state has moved on)."""
        self._cache.clear()

    def _group_of(self, param: torch.Tensor) -> dict[str, object] | None:
        key = id(param)
        if key not in self._group:
            for group in self.optimizer.param_groups:
                for p in group["params"]:
                    self._group[id(p)] = group
        return self._group.get(key)

    def of(self, param: torch.Tensor) -> torch.Tensor | None:
        """``param``'s preconditioner, or None: not adaptive, not the optimiser's, or not warmed up yet."""
        if not self.active:
            return None
        key = id(param)
        if key in self._cache:
            return self._cache[key]
        value = self._compute(param)
        self._cache[key] = value
        return value

    def _compute(self, param: torch.Tensor) -> torch.Tensor | None:
        group = self._group_of(param)
        state = self.optimizer.state.get(param)
        if group is None or not state or "step" not in state:
            return None
        step = float(state["step"])
        if step < WARMUP_STEPS:
            return None
        eps = float(group["eps"])  # type: ignore[arg-type]
        if "square_avg" in state:  # RMSprop: no bias correction
            return state["square_avg"].detach().sqrt().add_(eps)
        second = state.get("max_exp_avg_sq") if group.get("amsgrad") else None
        if second is None:
            second = state["exp_avg_sq"]
        betas = group["betas"]
        beta2 = float(betas[1])  # type: ignore[index]
        correction = 1.0 - beta2 ** step
        return (second.detach() / correction).sqrt_().add_(eps)

    def flat(self, params: list[torch.Tensor], numel: int) -> torch.Tensor | None:
        """The preconditioners of ``params`` laid out as a flat bucket of ``numel`` elements (None if any is
        missing or the layout does not match)."""
        parts = []
        for p in params:
            value = self.of(p)
            if value is None:
                return None
            parts.append(value.reshape(-1))
        out = torch.cat(parts) if parts else None
        return out if out is not None and out.numel() == numel else None
