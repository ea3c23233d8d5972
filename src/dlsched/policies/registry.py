"""Named stages and the schedulers (presets) composed from them, so the CLI and config files can name,
swap and tune them.

Every scheduler is five stages: admission, ordering, allocation, placement, coordination. A stage is a
dataclass registered under a name; its public init fields (other than ``name`` and ``seed``) are its
tunables, with the defaults from its paper. A field may carry ``metadata={"parse": fn}`` when its text form
needs more than the field's type (``tau=on``), and declares its allowed range with
:func:`~dlsched.core.ranges.ranged` (``metadata={"range": Range(lo, hi)}``): the registry checks every value
set through it against that range, so a value that would stall or break the model is refused up front with
the range in the message, and ``dlsched policies`` prints the same ranges.

``--set key=value`` sets the tunable on whichever stage has it; ``KIND.key`` (``placement.k_max``) or
``STAGE.key`` (``sia.p``) picks the stage explicitly. A key no stage has is an error, never ignored. This
module is the one place where tunables are parsed.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from dlsched.core import InputError
from dlsched.core.ranges import Range, fmt_value, range_of
from dlsched.core.suggest import did_you_mean
from dlsched.policies.stages import StagedScheduler

STAGE_KINDS = ("admission", "ordering", "allocation", "placement", "coordination")
#: The ordering that only breaks ties (submit time, then job id): the one allocations that rank jobs
#: through their own objective are composed with.
NEUTRAL_ORDERING = "fifo"
#: Fields that are not tunables: set by the registry (``name``, ``seed``) or internal.
_HIDDEN = {"name", "seed", "rng", "ordering"}


@dataclass(frozen=True)
class StageEntry:
    """A registered stage: its class plus fixed settings that make this named variant."""

    cls: type
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def tunable_fields(self) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(self.cls)
                if f.init and f.name not in _HIDDEN and f.name not in self.fixed and not f.name.startswith("_")]

    def tunables(self) -> dict[str, Any]:
        """Tunable name -> default."""
        out = {}
        for f in self.tunable_fields():
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
            else:
                raise TypeError(f"tunable '{f.name}' of {self.cls.__name__} has no default")
        return out

    def ranges(self) -> dict[str, str]:
        """Tunable name -> its allowed range as text (``[1, 86400]``), for tunables that declare one."""
        return {f.name: str(r) for f in self.tunable_fields() if (r := range_of(f)) is not None}

    def takes_seed(self) -> bool:
        return any(f.name == "seed" and f.init for f in dataclasses.fields(self.cls))


@dataclass(frozen=True)
class SchedulerEntry:
    """A named scheduler: one registered stage of each kind, and the paper's defaults for the run."""

    description: str
    allocation: str
    placement: str
    ordering: str = "fifo"
    admission: str = "all"
    coordination: str = "none"
    #: Round length the preset's paper uses (seconds); a run that does not say otherwise uses it.
    round_s: float = 60.0
    #: What the scheduler optimises (``jct``, ``deadline``, ``makespan``), when it is one of these: a
    #: coordinator that serves an objective (Gimbal) serves this one unless the run sets its own.
    objective: str | None = None

    def stage(self, kind: str) -> str:
        return str(getattr(self, kind))


STAGES: dict[str, dict[str, StageEntry]] = {kind: {} for kind in STAGE_KINDS}
ORDERINGS = STAGES["ordering"]
ALLOCATIONS = STAGES["allocation"]
PLACEMENTS = STAGES["placement"]
SCHEDULERS: dict[str, SchedulerEntry] = {}


def register_stage(kind: str, name: str, cls: type, description: str = "", **fixed: Any) -> None:
    if kind not in STAGES:
        raise ValueError(f"unknown stage kind '{kind}'")
    STAGES[kind][name] = StageEntry(cls, fixed, description)


def register_scheduler(name: str, entry: SchedulerEntry) -> None:
    for kind in STAGE_KINDS:
        if entry.stage(kind) not in STAGES[kind]:
            raise ValueError(f"scheduler '{name}': unknown {kind} '{entry.stage(kind)}'")
    SCHEDULERS[name] = entry


def _lookup(kind: str, name: str) -> StageEntry:
    table = STAGES[kind]
    if name not in table:
        raise InputError(f"unknown {kind} '{name}'{did_you_mean(name, table)} (known: {', '.join(sorted(table))})",
                         field=kind)
    return table[name]


#: How each tunable type is named in messages (what the user should type).
_TYPE_WORDS = {float: "a finite number", int: "a whole number", bool: "on/off (true/false)", str: "text"}


def type_word(annotation: Any) -> str:
    """What a value of ``annotation`` looks like on the command line, for messages."""
    hint = annotation
    if isinstance(hint, str):
        hint = {"float": float, "int": int, "bool": bool, "str": str}.get(hint, hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return f"{type_word(args[0])} or 'none'"
    if origin is tuple:
        return f"comma-separated list of {type_word(typing.get_args(hint)[0])}s".replace("a ", "", 1)
    return _TYPE_WORDS.get(hint, getattr(hint, "__name__", str(hint)))


def parse_value(raw: str, annotation: Any, key: str) -> Any:
    """Turn a ``--set`` string into the tunable's declared type; refuse what does not parse."""
    hint = annotation
    if isinstance(hint, str):
        hint = {"float": float, "int": int, "bool": bool, "str": str}.get(hint, hint)
    origin = typing.get_origin(hint)
    try:
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            if raw.strip().lower() in ("none", "null", "off"):
                return None
            return parse_value(raw, args[0], key)
        if origin is tuple:
            inner = typing.get_args(hint)[0]
            return tuple(parse_value(x.strip(), inner, key) for x in raw.split(",") if x.strip())
        if hint is bool:
            text = raw.strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if hint is float:
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
            return value
        if hint is int:
            return _whole(raw)
        if hint is str:
            return raw.strip()
    except ValueError:
        raise InputError(f"cannot read '{raw}' as {type_word(annotation)}", field=key) from None
    return raw


def _whole(raw: str) -> int:
    """An integer written as ``12``, ``12.0`` or ``1e3``; ``2.5``, ``inf`` and ``abc`` are not."""
    try:
        return int(raw)
    except ValueError:
        value = float(raw)
        if not (math.isfinite(value) and value.is_integer()):
            raise
        return int(value)


def check_range(value: Any, rng: Range | None, key: str, where: str, raw: str | None = None) -> None:
    """Refuse a parsed tunable (each element of a tuple) outside its declared range, printing the range."""
    if rng is None or value is None:
        return
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if isinstance(item, (int, float)) and not isinstance(item, bool) and item not in rng:
            shown = raw.strip() if raw is not None and len(items) == 1 else fmt_value(item)
            if len(items) > 1:
                shown += f" (in {fmt_value(value)})"
            raise InputError(f"{where}: {key.rpartition('.')[2]} must be {rng.phrase}, got {shown}", field=key)


def _instantiate(kind: str, name: str, settings: dict[str, str], used: set[str], seed: int,
                 ordering: str = NEUTRAL_ORDERING) -> Any:
    entry = _lookup(kind, name)
    hints = typing.get_type_hints(entry.cls)
    kwargs: dict[str, Any] = dict(entry.fixed)
    given: dict[str, str] = {}  # field -> the key the user set it with
    for f in entry.tunable_fields():
        for candidate in (f"{kind}.{f.name}", f"{name}.{f.name}", f.name):
            if candidate in settings:
                parse = f.metadata.get("parse")
                raw = settings[candidate]
                rng = range_of(f)
                try:
                    value = parse(raw, candidate) if parse else parse_value(raw, hints.get(f.name, str), candidate)
                except InputError as exc:
                    if rng is None:
                        raise
                    message = str(exc).removeprefix(f"field '{candidate}': ")
                    raise InputError(f"{message} (allowed: {rng})", field=candidate) from None
                check_range(value, rng, candidate, f"{kind} '{name}'", raw)
                kwargs[f.name] = value
                given[f.name] = candidate
                used.add(candidate)
                break
    if entry.takes_seed() and "seed" not in entry.fixed:
        kwargs["seed"] = seed
    if any(f.name == "name" for f in dataclasses.fields(entry.cls)):
        kwargs["name"] = name
    if kind != "ordering" and any(f.name == "ordering" and f.init for f in dataclasses.fields(entry.cls)):
        kwargs["ordering"] = ordering
    try:
        return entry.cls(**kwargs)
    except InputError:
        raise
    except (TypeError, ValueError) as exc:
        raise InputError(f"{kind} '{name}': {exc}", field=_blamed(str(exc), given, kwargs) or kind) from None


def _blamed(message: str, given: dict[str, str], kwargs: dict[str, Any]) -> str | None:
    """The key to name for a stage's refusal: a tunable the message mentions, as the user wrote it."""
    mentioned = [k for k in kwargs if re.search(rf"\b{re.escape(k)}\b", message)]
    for k in mentioned:
        if k in given:
            return given[k]
    return mentioned[0] if mentioned else None


def check_combination(chosen: dict[str, Any], names: dict[str, str], overridden: set[str]) -> None:
    """Refuse compositions that cannot work, naming both stages and the reason."""
    alloc, place = chosen["allocation"], chosen["placement"]
    a, p = names["allocation"], names["placement"]
    if place.traits.needs_spread and not alloc.traits.plans_spread:
        raise InputError(f"placement '{p}' cannot follow allocation '{a}': it places by the per-node GPU "
                         f"counts that only a node-planning allocation (pollux) provides", field="placement")
    if place.traits.needs_gpu_type and not alloc.traits.names_gpu_type:
        raise InputError(f"placement '{p}' cannot follow allocation '{a}': it needs demands that name a GPU "
                         f"type, and '{a}' leaves the type to placement", field="placement")
    if getattr(place, "packs", False) and not chosen["coordination"].allows_packing:
        raise InputError(f"placement '{p}' packs jobs onto shared GPUs, which coordination "
                         f"'{names['coordination']}' does not allow (use a coordination that packs, e.g. "
                         f"'packing')", field="placement")
    if not alloc.traits.uses_order and names["ordering"] != NEUTRAL_ORDERING \
            and names["ordering"] not in alloc.traits.follows_orderings:
        field_ = "ordering" if "ordering" in overridden or "allocation" not in overridden else "allocation"
        raise InputError(f"ordering '{names['ordering']}' cannot steer allocation '{a}': it ranks jobs "
                         f"through its own objective (the ordering only breaks ties; use "
                         f"{' or '.join(repr(o) for o in (NEUTRAL_ORDERING, *alloc.traits.follows_orderings))})",
                         field=field_)


def build_scheduler(policy: str, *, admission: str | None = None, ordering: str | None = None,
                    allocation: str | None = None, placement: str | None = None,
                    coordination: str | None = None, settings: dict[str, str] | None = None,
                    seed: int = 0) -> StagedScheduler:
    """Build a named scheduler, optionally swapping stages and setting tunables."""
    settings = dict(settings or {})
    if policy not in SCHEDULERS:
        raise InputError(f"unknown policy '{policy}'{did_you_mean(policy, SCHEDULERS)} (known: "
                         f"{', '.join(sorted(SCHEDULERS))})", field="policy")
    entry = SCHEDULERS[policy]
    given = {"admission": admission, "ordering": ordering, "allocation": allocation, "placement": placement,
             "coordination": coordination}
    names = {k: given[k] or entry.stage(k) for k in STAGE_KINDS}
    overridden = {k for k, v in given.items() if v is not None and v != entry.stage(k)}
    used: set[str] = set()
    _relaxed_default(names, settings, used)
    _objective_default(entry, names, settings, used)
    chosen = {k: _instantiate(k, names[k], settings, used, seed, names["ordering"]) for k in STAGE_KINDS}
    unknown = sorted(set(settings) - used)
    if unknown:
        raise InputError(f"policy '{policy}' ({', '.join(f'{k}={v}' for k, v in names.items())}) has no "
                         f"tunable '{unknown[0]}'{did_you_mean(unknown[0], _valid_tunables(names))} (see "
                         f"'dlsched policies')", field=unknown[0])
    check_combination(chosen, names, overridden)
    if hasattr(chosen["admission"], "follow_allocation"):  # admission that counts GPUs as allocation will give them
        chosen["admission"].follow_allocation(chosen["allocation"].traits)
    return StagedScheduler(name=policy, **chosen)


def _valid_tunables(names: dict[str, str]) -> list[str]:
    """Every tunable the chosen stages take (what a misspelt ``--set`` key is matched against)."""
    return sorted({t for kind in STAGE_KINDS for t in _lookup(kind, names[kind]).tunables()})


def _relaxed_default(names: dict[str, str], settings: dict[str, str], used: set[str]) -> None:
    """A coordination that declares ``relaxes_packing`` (Gimbal) runs the packing allocation or placement in
    its relaxed mode unless the run sets ``relaxed`` itself: the base scheduler packs aggressively and the
    coordinator calibrates (Gimbal section 7.1)."""
    coord = _lookup("coordination", names["coordination"]).cls
    if not getattr(coord, "relaxes_packing", False):
        return
    _balanced_default(names, settings, used)
    if any(k.rpartition(".")[2] == "relaxed" for k in settings):
        return
    for kind in ("allocation", "placement"):
        if "relaxed" in _lookup(kind, names[kind]).tunables():
            settings[f"{kind}.relaxed"] = "true"
            used.add(f"{kind}.relaxed")


def _objective_default(entry: SchedulerEntry, names: dict[str, str], settings: dict[str, str],
                       used: set[str]) -> None:
    """A coordination with an ``objective`` tunable (Gimbal) serves the base scheduler's objective unless
    the run sets one: Gimbal under Gavel's packing policy minimises makespan, under Gandiva it meets
    deadlines (section 7.1 pairs each scheduler with its own objective)."""
    if entry.objective is None or "objective" not in _lookup("coordination", names["coordination"]).tunables():
        return
    if any(k.rpartition(".")[2] == "objective" for k in settings):
        return
    settings["coordination.objective"] = entry.objective
    used.add("coordination.objective")


def _balanced_default(names: dict[str, str], settings: dict[str, str], used: set[str]) -> None:
    """Under a coordinator that steals input samples (Gimbal with ``sample_stealing``, its default), an
    allocation that values unequal pairs (``unequal_speed``) values them at the balanced speed the
    coordinator gives them, unless the run sets ``unequal_speed`` itself."""
    alloc = names["allocation"]
    if "unequal_speed" not in _lookup("allocation", alloc).tunables() or any(
            k.rpartition(".")[2] == "unequal_speed" for k in settings):
        return
    coord = names["coordination"]
    stealing = _lookup("coordination", coord).tunables().get("sample_stealing", False)
    for key in ("coordination.sample_stealing", f"{coord}.sample_stealing", "sample_stealing"):
        if key in settings:
            stealing = parse_value(settings[key], bool, key)
            break
    if stealing:
        settings["allocation.unequal_speed"] = "balanced"
        used.add("allocation.unequal_speed")


def stage_tunables(kind: str, name: str) -> dict[str, Any]:
    return _lookup(kind, name).tunables()


def scheduler_tunables(policy: str) -> dict[str, Any]:
    """Tunables of a named scheduler with their defaults, as ``kind.key`` -> default."""
    entry = SCHEDULERS[policy]
    out: dict[str, Any] = {}
    for kind in STAGE_KINDS:
        for k, v in stage_tunables(kind, entry.stage(kind)).items():
            out[f"{kind}.{k}"] = v
    return out


def describe_scheduler(policy: str) -> dict[str, Any]:
    """A preset as plain data: description, round length, per stage its name, what it does, its tunables
    with defaults and the allowed ranges of numeric ones, and all tunables flat as ``kind.key`` (what
    ``dlsched policies --format json`` prints)."""
    entry = SCHEDULERS[policy]
    stages = {}
    for kind in STAGE_KINDS:
        name = entry.stage(kind)
        se = _lookup(kind, name)
        stages[kind] = {"name": name, "description": se.description, "tunables": se.tunables(),
                        "ranges": se.ranges()}
    return {"name": policy, "description": entry.description, "round_s": entry.round_s, "stages": stages,
            "tunables": scheduler_tunables(policy)}
