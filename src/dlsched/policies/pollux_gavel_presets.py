"""Registration of ``pollux`` and ``gavel``, the two schedulers Sia is compared against.

``--set`` keys (``pollux.KEY`` / ``gavel.KEY`` are accepted as well):

* ``pollux``: :class:`~dlsched.policies.pollux.PolluxTunables` fields: ``p`` (power-mean exponent, -1),
  ``restart_delay_s`` (the restart penalty's delay, 30 s), ``population`` and ``generations`` (100 each),
  ``max_replicas``, ``max_nodes``, ``explore``, ``speedup_base`` (``fair`` or ``one-gpu``), ``seed`` (defaults
  to the run's seed). Pollux's speedups come from Sia's goodput estimator without profiling and without
  heterogeneity awareness (``SiaGoodputEstimator(mode="none", hetero_aware=False)``). Use the engine's
  default 60 s rounds.
* ``gavel``: :class:`~dlsched.policies.gavel.GavelTunables` fields: ``objective`` (``max-sum-throughput``,
  ``finish-time-fairness``, ``max-min``), ``lease_s`` (360 s; the policy keeps its leases that long whatever
  the engine's round, so ``--round-s 360`` and the default 60 s give the same schedule except that profiling
  of new jobs can start mid-round), ``profile`` (profile new jobs before scheduling them; with ``off``
  throughputs are learnt as jobs run). Gavel runs jobs rigidly; pair it with TunedJobs
  (``--trace sia-philly:1@tuned``) as the thesis does.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

from dlsched.core import InputError
from dlsched.policies.gavel import GavelScheduler, GavelTunables
from dlsched.policies.pollux import PolluxScheduler, PolluxTunables
from dlsched.policies.registry import SchedulerEntry, check_all_used, parse_value, register_scheduler


def _parse(cls: type, prefix: str, settings: dict[str, str]) -> tuple[dict[str, Any], set[str]]:
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    used: set[str] = set()
    for key, raw in settings.items():
        bare = key.removeprefix(f"{prefix}.")
        if bare not in fields:
            continue
        kwargs[bare] = parse_value(raw, hints[bare], key)
        used.add(key)
    return kwargs, used


def _build(cls: type, name: str, settings: dict[str, str], extra: dict[str, Any] | None = None) -> Any:
    kwargs, used = _parse(cls, name, settings)
    check_all_used(settings, used, name)
    for k, v in (extra or {}).items():
        kwargs.setdefault(k, v)
    try:
        return cls(**kwargs)
    except InputError:
        raise
    except (TypeError, ValueError) as e:
        key = next((k for k in kwargs if k in str(e)), None)
        raise InputError(str(e), field=key) from None


def _no_stages(name: str, ordering: str | None, placement: str | None) -> None:
    if ordering is not None:
        raise InputError(f"policy '{name}' orders jobs through its objective; it takes no --ordering",
                         field="ordering")
    if placement is not None:
        raise InputError(f"policy '{name}' places jobs itself; it takes no --placement", field="placement")


def make_pollux(settings: dict[str, str] | None = None, seed: int = 0, ordering: str | None = None,
                placement: str | None = None) -> PolluxScheduler:
    """Pollux with a heterogeneity-unaware, learn-as-you-go goodput estimator."""
    from dlsched.estimators.goodput import SiaGoodputEstimator

    _no_stages("pollux", ordering, placement)
    tunables = _build(PolluxTunables, "pollux", dict(settings or {}), {"seed": seed})
    return PolluxScheduler(tunables, SiaGoodputEstimator(mode="none", hetero_aware=False))


def make_gavel(settings: dict[str, str] | None = None, seed: int = 0, ordering: str | None = None,
               placement: str | None = None) -> GavelScheduler:
    """Gavel with throughputs from Sia's estimator (bootstrap profiling, or learnt if ``profile=off``)."""
    from dlsched.estimators.goodput import SiaGoodputEstimator

    del seed  # Gavel is deterministic
    _no_stages("gavel", ordering, placement)
    tunables = _build(GavelTunables, "gavel", dict(settings or {}))
    mode = "bootstrap" if tunables.profile else "none"
    return GavelScheduler(tunables, SiaGoodputEstimator(mode=mode, hetero_aware=True))


def _defaults(cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    inst = cls()
    return {f.name: getattr(inst, f.name) for f in dataclasses.fields(cls) if f.name not in skip}


_ENTRIES: tuple[tuple[str, str, Callable[..., Any], dict[str, Any]], ...] = (
    ("pollux", "Pollux (OSDI'21): goodput speedups (heterogeneity-unaware), power-mean fitness p=-1 with "
     "restart penalty, genetic search over per-node GPU counts; 4-GPU virtual nodes, mixed types fixed",
     make_pollux, _defaults(PolluxTunables)),
    ("gavel", "Gavel (OSDI'20): heterogeneity-aware LP over time fractions per GPU type (max-sum-throughput, "
     "finish-time-fairness, max-min), round-based leases of 360 s, rigid jobs",
     make_gavel, _defaults(GavelTunables)),
)

for _name, _desc, _factory, _tunables in _ENTRIES:
    register_scheduler(_name, SchedulerEntry(description=_desc, factory=_factory, factory_tunables=_tunables))
