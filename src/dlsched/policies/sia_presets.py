"""Registration of the ``sia`` scheduler and the parsing of its tunables.

``--set`` keys are Sia's :class:`~dlsched.policies.sia.SiaParams` fields, named as the thesis names them:
``p``, ``lambda_``, ``restart_factor`` (``sia``/``on``, ``off`` or a fixed factor), ``tau`` (seconds, ``on``
for the thesis's 300 s, ``off``), ``profiling`` (``bootstrap``, ``oracle``, ``none``), ``solver`` (``auto``,
``milp``, ``lp-round``, ``incremental``), ``max_doubling``, ``keep_restarting``, ``non_preemptible`` (job ids,
comma separated), ``reserve`` (``type:count``, comma separated) and a few solver knobs. ``sia.KEY`` is
accepted as well as ``KEY``.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from dlsched.core import InputError
from dlsched.policies.registry import SchedulerEntry, check_all_used, parse_value, register_scheduler
from dlsched.policies.sia import DEFAULT_TAU_S, SiaParams, SiaScheduler

_FIELDS = {f.name: f for f in dataclasses.fields(SiaParams)}


def parse_sia_settings(settings: dict[str, str]) -> tuple[dict[str, Any], set[str]]:
    """SiaParams keyword arguments from ``--set`` strings, and the keys used."""
    hints = typing.get_type_hints(SiaParams)
    kwargs: dict[str, Any] = {}
    used: set[str] = set()
    for key, raw in settings.items():
        bare = key.removeprefix("sia.")
        if bare not in _FIELDS:
            continue
        used.add(key)
        if bare == "tau":
            text = raw.strip().lower()
            if text in ("on", "true", "yes"):
                kwargs[bare] = DEFAULT_TAU_S
                continue
            if text in ("0", "off", "none", "false", "no"):
                kwargs[bare] = None
                continue
        if bare == "restart_factor":
            kwargs[bare] = raw.strip()
            continue
        kwargs[bare] = parse_value(raw, hints[bare], key)
    return kwargs, used


def make_sia(settings: dict[str, str] | None = None, seed: int = 0, ordering: str | None = None,
             placement: str | None = None) -> SiaScheduler:
    """Build Sia from ``--set`` settings (unknown keys are errors)."""
    del seed  # Sia is deterministic
    settings = dict(settings or {})
    if ordering is not None:
        raise InputError("policy 'sia' orders jobs through its objective; it takes no --ordering", field="ordering")
    if placement not in (None, "sia"):
        raise InputError("policy 'sia' places jobs with its own placer; it takes no --placement", field="placement")
    kwargs, used = parse_sia_settings(settings)
    check_all_used(settings, used, "sia")
    try:
        params = SiaParams(**kwargs)
    except ValueError as e:
        key = next((k for k in kwargs if k in str(e)), None)
        raise InputError(str(e), field=key) from None
    return SiaScheduler(params=params)


def _defaults() -> dict[str, Any]:
    params = SiaParams()
    return {name: getattr(params, name) for name in _FIELDS}


register_scheduler("sia", SchedulerEntry(
    description="Sia (thesis ch. 3): goodput-optimised, heterogeneity-aware ILP over configurations "
                "(HiGHS), bootstrapped profiling, restart factor, fairness p, Sia placer",
    factory=make_sia, factory_tunables=_defaults()))
