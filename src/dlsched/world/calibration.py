"""Calibration profiles: how the world's fitted step times are scaled to match a physical cluster.

The fitted step-time model reproduces the measured profiles (single jobs timed in isolation). The Sia
simulator, which made the thesis's tables, found that whole scheduled runs on its physical cluster went slower
than those profiles and multiplied every model's goodput by ``1 / slowdown`` (1.8 for cifar10, 1.5 for ncf,
1.2 for the other models), on every GPU type alike; it also charged its own per-model checkpoint-restore
delays. A profile names such a set of factors; the factors are data (``params/calibration.json``, with the
artifact paths they come from), not logic.

A slowdown stretches the whole iteration (compute, gradient accumulation and synchronisation), which is what
scaling goodput by ``1 / slowdown`` amounts to. Jobs report the stretched step times they experience, like
jobs on the physical cluster would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from dlsched.core import InputError

#: The profile a world uses when neither the run nor its cluster preset names one.
DEFAULT_CALIBRATION = "none"


@dataclass(frozen=True)
class CalibrationProfile:
    """Per-model slowdowns of iteration time and checkpoint-restore delays (seconds)."""

    name: str
    description: str
    slowdowns: MappingProxyType[str, float] = field(default_factory=lambda: MappingProxyType({}))
    restart_delays_s: MappingProxyType[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def slowdown(self, model: str) -> float:
        """Factor on a model's iteration time; 1 for a model the profile does not list."""
        return self.slowdowns.get(model, 1.0)

    def restart_delay_s(self, model: str, fitted: float) -> float:
        """The profile's checkpoint-restore delay of a model, else ``fitted`` (the world's own table)."""
        return self.restart_delays_s.get(model, fitted)


def _profile(name: str, raw: dict[str, Any]) -> CalibrationProfile:
    slow = {str(k): float(v) for k, v in raw.get("slowdown", {}).items()}
    delays = {str(k): float(v) for k, v in raw.get("restart_delay_s", {}).items()}
    bad = [k for k, v in slow.items() if not v > 0] + [k for k, v in delays.items() if v < 0]
    if bad:
        raise ValueError(f"calibration profile '{name}': non-positive factor or negative delay for {bad}")
    return CalibrationProfile(name=name, description=str(raw.get("description", "")),
                              slowdowns=MappingProxyType(slow), restart_delays_s=MappingProxyType(delays))


@cache
def profiles() -> MappingProxyType[str, CalibrationProfile]:
    """Every packaged profile by name."""
    text = resources.files("dlsched").joinpath("world/params/calibration.json").read_text(encoding="utf-8")
    raw = json.loads(text)["profiles"]
    return MappingProxyType({name: _profile(name, body) for name, body in raw.items()})


def profile_names() -> tuple[str, ...]:
    return tuple(profiles())


def calibration(name: str) -> CalibrationProfile:
    """The profile called ``name``; an unknown name is an InputError naming the ``calibration`` field."""
    try:
        return profiles()[name]
    except KeyError:
        raise InputError(f"unknown calibration profile '{name}' (known: {', '.join(profile_names())})",
                         field="calibration") from None
