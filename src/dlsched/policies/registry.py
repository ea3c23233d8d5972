"""Named schedulers and stages, so the CLI and config files can compose and tune them.

Stages are dataclasses; their public fields (other than ``name``) are their tunables, with the defaults
from their papers. ``--set key=value`` sets a tunable on whichever stage of the scheduler has it (or
``stage.key=value`` to be explicit); a key no stage has is an error, never silently ignored.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlsched.core import InputError
from dlsched.policies.stages import Scheduler, StagedScheduler

_HIDDEN = {"name", "rng"}


@dataclass(frozen=True)
class StageEntry:
    """A registered stage: its class plus fixed settings that make this named variant."""

    cls: type
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def tunables(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self.cls):
            if f.name in _HIDDEN or f.name in self.fixed or not f.init:
                continue
            out[f.name] = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        return out


@dataclass(frozen=True)
class SchedulerEntry:
    """A named scheduler: either stages composed by name, or a factory for a monolithic scheduler."""

    description: str
    ordering: str | None = None
    allocation: str | None = None
    placement: str | None = None
    #: For schedulers that are not plain stage compositions: (settings, seed, ordering, placement) -> Scheduler.
    factory: Callable[..., Scheduler] | None = None
    #: Tunables of a factory-built scheduler, with defaults (stage compositions derive theirs).
    factory_tunables: dict[str, Any] = field(default_factory=dict)
    #: Default scheduling round length, seconds (a run that gives none uses it).
    round_s: float = 60.0


@dataclass(frozen=True)
class SchedulerTraits:
    """What the simulator must know about a built scheduler before it runs it."""

    #: The scheduler answers from the simulator's truth (Sia's ``profiling=oracle`` comparison runs).
    needs_oracle: bool = False


#: Presets whose papers use rounds other than 60 s: Gavel's 360 s leases, PAL's 360 s rounds.
_PRESET_ROUND_S = {"gavel": 360.0, "pal": 360.0, "pm-first": 360.0}


ORDERINGS: dict[str, StageEntry] = {}
ALLOCATIONS: dict[str, StageEntry] = {}
PLACEMENTS: dict[str, StageEntry] = {}
SCHEDULERS: dict[str, SchedulerEntry] = {}


def register_ordering(name: str, cls: type, description: str = "", **fixed: Any) -> None:
    ORDERINGS[name] = StageEntry(cls, fixed, description)


def register_allocation(name: str, cls: type, description: str = "", **fixed: Any) -> None:
    ALLOCATIONS[name] = StageEntry(cls, fixed, description)


def register_placement(name: str, cls: type, description: str = "", **fixed: Any) -> None:
    PLACEMENTS[name] = StageEntry(cls, fixed, description)


def register_scheduler(name: str, entry: SchedulerEntry) -> None:
    if name in _PRESET_ROUND_S:
        entry = dataclasses.replace(entry, round_s=_PRESET_ROUND_S[name])
    SCHEDULERS[name] = entry


def _lookup(table: dict[str, StageEntry], name: str, what: str) -> StageEntry:
    if name not in table:
        raise InputError(f"unknown {what} '{name}' (known: {', '.join(sorted(table))})", field=what)
    return table[name]


def parse_value(raw: str, annotation: Any, key: str) -> Any:
    """Turn a ``--set`` string into the tunable's declared type."""
    hint = annotation
    if isinstance(hint, str):
        hint = {"float": float, "int": int, "bool": bool, "str": str}.get(hint, hint)
    origin = typing.get_origin(hint)
    try:
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            if raw.lower() in ("none", "null", "off"):
                return None
            return parse_value(raw, args[0], key)
        if origin is tuple:
            inner = typing.get_args(hint)[0]
            return tuple(parse_value(x, inner, key) for x in raw.split(",") if x.strip())
        if hint is bool:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if hint in (int, float, str):
            return hint(raw)
    except ValueError:
        raise InputError(f"cannot read '{raw}' as {getattr(hint, '__name__', hint)}", field=key) from None
    return raw


def _instantiate(entry: StageEntry, settings: dict[str, str], prefix: str, used: set[str],
                 extra: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(entry.cls)
    kwargs: dict[str, Any] = dict(entry.fixed)
    for key in entry.tunables():
        for candidate in (f"{prefix}.{key}", key):
            if candidate in settings:
                kwargs[key] = parse_value(settings[candidate], hints.get(key, str), candidate)
                used.add(candidate)
                break
    names = {f.name for f in dataclasses.fields(entry.cls)}
    kwargs.update({k: v for k, v in extra.items() if k in names and k not in entry.fixed})
    if "name" in names and "name" not in kwargs:
        kwargs["name"] = entry_name(entry, prefix)
    return entry.cls(**kwargs)


def entry_name(entry: StageEntry, prefix: str) -> str:
    table = {"ordering": ORDERINGS, "allocation": ALLOCATIONS, "placement": PLACEMENTS}[prefix]
    return next(n for n, e in table.items() if e is entry)


def build_scheduler(policy: str, *, admission: str | None = None, ordering: str | None = None,
                    allocation: str | None = None, placement: str | None = None, coordination: str | None = None,
                    settings: dict[str, str] | None = None, seed: int = 0) -> Scheduler:
    """Build a named scheduler, optionally swapping stages and setting tunables."""
    settings = dict(settings or {})
    if policy not in SCHEDULERS:
        raise InputError(f"unknown policy '{policy}' (known: {', '.join(sorted(SCHEDULERS))})", field="policy")
    for what, value in (("admission", admission), ("coordination", coordination)):
        if value is not None:
            raise InputError(f"unknown {what} '{value}' (no {what} stages are registered)", field=what)
    entry = SCHEDULERS[policy]
    if entry.factory is not None:
        if allocation is not None:
            raise InputError(f"policy '{policy}' allocates GPUs itself; it takes no --allocation", field="allocation")
        sched = entry.factory(settings=settings, seed=seed, ordering=ordering, placement=placement)
    else:
        used: set[str] = set()
        o = _instantiate(_lookup(ORDERINGS, ordering or entry.ordering, "ordering"), settings, "ordering", used, {})
        a = _instantiate(_lookup(ALLOCATIONS, allocation or entry.allocation, "allocation"), settings, "allocation",
                         used, {})
        p = _instantiate(_lookup(PLACEMENTS, placement or entry.placement, "placement"), settings, "placement",
                         used, {"seed": seed})
        check_all_used(settings, used, policy)
        sched = StagedScheduler(name=policy, ordering=o, allocation=a, placement=p)
    sched.traits = SchedulerTraits(needs_oracle=bool(getattr(sched, "wants_oracle", False)))  # type: ignore[attr-defined]
    return sched


def check_all_used(settings: dict[str, str], used: set[str], policy: str) -> None:
    unknown = sorted(set(settings) - used)
    if unknown:
        raise InputError(f"policy '{policy}' has no tunable '{unknown[0]}' (see 'dlsched policies')",
                         field=unknown[0])


def scheduler_tunables(policy: str) -> dict[str, Any]:
    """Tunables of a named scheduler with their defaults, as ``stage.key`` -> default."""
    entry = SCHEDULERS[policy]
    if entry.factory is not None:
        return dict(entry.factory_tunables)
    out: dict[str, Any] = {}
    for prefix, table, name in (("ordering", ORDERINGS, entry.ordering), ("allocation", ALLOCATIONS, entry.allocation),
                                ("placement", PLACEMENTS, entry.placement)):
        for k, v in table[name].tunables().items():
            if k != "seed":
                out[f"{prefix}.{k}"] = v
    return out
