"""One's own stages: register them by name, load them from a file (``--plugin``) or an installed package.

A scheduler in dlsched is five named stages (:mod:`dlsched.policies.registry`); a researcher's own ordering,
allocation or placement joins them by name, so it composes with the shipped ones (``policy='fifo',
ordering='edf'``) and runs wherever a shipped stage runs (``dlsched simulate``, ``compare``, the Python API).

:func:`register_stage` takes either

* a dataclass whose fields (other than ``name`` and ``seed``) are its tunables, with defaults, exactly like
  the shipped stages (``--set slack_s=60`` then sets one); or
* any other class or function (a *factory*) returning a stage object: its keyword parameters with defaults
  are its tunables (or name them with ``tunables={...}``), and dlsched builds it once per run.

Registration checks what can be checked before a run: the kind exists, the name is free (a shipped stage is
never replaced) and usable on a command line, the stage has the method its kind calls, and every tunable has
a default. A stage's answers are checked every round by the engine's invariants
(:mod:`dlsched.sim.invariants`), as for the shipped stages.

:func:`load_plugin_file` imports a Python file whose module-level :func:`register_stage` calls register its
stages; :func:`load_entry_points` imports what installed packages declare in the ``dlsched.stages`` entry
point group. A file or entry point that fails to import becomes one :class:`~dlsched.core.InputError`
naming it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from dlsched.core import InputError
from dlsched.core.suggest import did_you_mean

__all__ = ["ENTRY_POINT_GROUP", "STAGE_METHODS", "load_entry_points", "load_plugin_file", "load_plugins",
           "register_stage", "user_stages"]

#: The entry point group an installed package declares its stages in (``[project.entry-points."dlsched.stages"]``).
ENTRY_POINT_GROUP = "dlsched.stages"
#: The method the scheduler calls on a stage of each kind, in pipeline order.
STAGE_METHODS: dict[str, str] = {"admission": "admit", "ordering": "order", "allocation": "allocate",
                                 "placement": "place", "coordination": "coordinate"}
#: Names that fit a command line and the registry's ``STAGE.key`` tunable syntax (no dots, commas, ``@``, ``+``).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
#: (kind, name) -> where the stage was registered from (a module name), for listings and re-registration.
_USER: dict[tuple[str, str], str] = {}
#: Plugin files already imported, by resolved path: loading one twice registers nothing twice.
_FILES: dict[Path, ModuleType] = {}
_ENTRY_POINTS_LOADED: set[str] = set()
#: Parameters of a factory that are not tunables: the registry fills them.
_FACTORY_FIXED = ("name", "seed")


def register_stage(kind: str, name: str, stage: type | Callable[..., Any], *, description: str = "",
                   tunables: Mapping[str, Any] | None = None, **fixed: Any) -> None:
    """Register ``stage`` as the ``kind`` stage called ``name``, so a run can name it.

    ``stage`` is a dataclass (its defaulted fields are its tunables) or a factory (a class or function
    whose defaulted keyword parameters are its tunables unless ``tunables`` names them, as ``{key: default}``
    or ``{key: dlsched.core.ranges.ranged(default, lo, hi)}``). ``fixed`` pins fields of a dataclass for this
    named variant, as the shipped ``packed``/``packed-sticky`` pair does. Registering the same name again
    replaces the earlier registration of one's own stage; a shipped stage's name is refused.
    """
    from dlsched.policies import registry  # registers the shipped stages first

    if kind not in registry.STAGES:
        raise InputError(f"unknown stage kind '{kind}'{did_you_mean(kind, registry.STAGE_KINDS)} (kinds: "
                         f"{', '.join(registry.STAGE_KINDS)})", field="kind")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"stage name {name!r} must be letters, digits, '-' or '_' (it is typed on command "
                         f"lines and in 'STAGE.key' tunables)", field="name")
    if name in registry.STAGES[kind] and (kind, name) not in _USER:
        raise InputError(f"{kind} '{name}' is a shipped stage; give yours another name", field="name")
    if not callable(stage):
        raise InputError(f"{kind} '{name}': expected a class or a function, got {type(stage).__name__}",
                         field="stage")
    if isinstance(stage, type) and dataclasses.is_dataclass(stage):
        if tunables is not None:
            raise InputError(f"{kind} '{name}': a dataclass's tunables are its fields; drop tunables=",
                             field="tunables")
        cls = stage
        _check_class(kind, name, cls)
    else:
        if fixed:
            raise InputError(f"{kind} '{name}': fixed settings ({', '.join(fixed)}) need a dataclass stage; "
                             f"a factory takes them as tunables", field="stage")
        cls = _factory_class(kind, name, stage, tunables)
    entry = registry.StageEntry(cls, dict(fixed), description or _first_line(stage.__doc__))
    try:
        entry.tunables()
    except TypeError as exc:
        raise InputError(f"{kind} '{name}': {exc}; every tunable needs a default", field="tunables") from None
    registry.STAGES[kind][name] = entry
    _USER[(kind, name)] = getattr(stage, "__module__", "?") or "?"


def user_stages() -> dict[tuple[str, str], str]:
    """One's own registered stages: (kind, name) -> the module that registered them."""
    return dict(_USER)


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0].strip() if (doc or "").strip() else ""


def _check_class(kind: str, name: str, cls: type) -> None:
    """Refuse a dataclass that could not serve as a ``kind`` stage, before any run builds it."""
    from dlsched.policies.stages import AllocationStage, PlacementStage

    method = STAGE_METHODS[kind]
    if not callable(getattr(cls, method, None)):
        raise InputError(f"{kind} '{name}': {cls.__name__} has no method '{method}' (a {kind} stage's "
                         f"contract: see docs/extending.md)", field="stage")
    base = {"allocation": AllocationStage, "placement": PlacementStage}.get(kind)
    if base is not None and not issubclass(cls, base):
        raise InputError(f"{kind} '{name}': {cls.__name__} must subclass dlsched.{base.__name__} (it "
                         f"supplies the traits and hooks the scheduler asks a {kind} stage for)", field="stage")
    if kind == "coordination" and not hasattr(cls, "allows_packing"):
        raise InputError(f"coordination '{name}': {cls.__name__} must say whether it allows packing "
                         f"(an 'allows_packing' attribute)", field="stage")
    if "name" not in {f.name for f in dataclasses.fields(cls)}:
        raise InputError(f"{kind} '{name}': {cls.__name__} needs a field 'name: str' (the registry sets it "
                         f"to the registered name, which tables and headers show)", field="stage")


def _factory_tunables(kind: str, name: str, factory: Callable[..., Any]) -> dict[str, Any]:
    """A factory's tunables from its signature: every keyword parameter with a default, but name and seed."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for p in params.values():
        if p.name in _FACTORY_FIXED or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty:
            raise InputError(f"{kind} '{name}': parameter '{p.name}' of {getattr(factory, '__name__', factory)} "
                             f"has no default; every tunable needs one", field="tunables")
        out[p.name] = p.default
    return out


def _annotation(default: Any) -> Any:
    """The type a tunable's text value is parsed as, from its default."""
    if default is None:
        return str | None
    if isinstance(default, tuple):
        return tuple[type(default[0]) if default else str, ...]  # type: ignore[misc]
    return type(default)


def _factory_class(kind: str, name: str, factory: Callable[..., Any],
                   tunables: Mapping[str, Any] | None) -> type:
    """A dataclass the registry can build and tune that builds the stage from ``factory`` and passes every
    call on to it: the registry sees fields, the scheduler sees the factory's stage."""
    from dlsched.policies.stages import AllocationStage, PlacementStage

    declared = dict(tunables) if tunables is not None else _factory_tunables(kind, name, factory)
    for key in declared:
        if key in _FACTORY_FIXED or not key.isidentifier():
            raise InputError(f"{kind} '{name}': '{key}' cannot be a tunable's name", field="tunables")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    takes = {k for k in _FACTORY_FIXED if k in params}
    fields: list[tuple[str, Any, Any]] = [("name", str, dataclasses.field(default=name))]
    for key, spec in declared.items():
        f = spec if isinstance(spec, dataclasses.Field) else dataclasses.field(default=spec)
        if isinstance(f.default, (list, dict, set)):
            raise InputError(f"{kind} '{name}': tunable '{key}' has a mutable default; use a tuple",
                             field="tunables")
        fields.append((key, _annotation(f.default), f))
    if "seed" in takes:
        fields.append(("seed", int, dataclasses.field(default=0)))
    method = STAGE_METHODS[kind]
    base = {"allocation": AllocationStage, "placement": PlacementStage}.get(kind)
    label = getattr(factory, "__name__", "factory")

    def __post_init__(self: Any) -> None:
        kwargs = {key: getattr(self, key) for key in declared}
        kwargs.update({k: getattr(self, k) for k in takes})
        built = factory(**kwargs)
        if not callable(getattr(built, method, None)):
            raise TypeError(f"{label}() returned {type(built).__name__}, which has no method '{method}'")
        if base is not None and not isinstance(built, base):
            raise TypeError(f"{label}() returned {type(built).__name__}, which is not a dlsched.{base.__name__}")
        if kind == "coordination" and not hasattr(built, "allows_packing"):
            raise TypeError(f"{label}() returned {type(built).__name__}, which has no 'allows_packing'")
        self.__dict__["_stage"] = built

    def __getattr__(self: Any, attr: str) -> Any:
        stage = self.__dict__.get("_stage")
        if stage is None or attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(stage, attr)

    return dataclasses.make_dataclass(
        f"{label}_{kind}", fields, namespace={"__post_init__": __post_init__, "__getattr__": __getattr__,
                                              "__doc__": factory.__doc__ or f"{kind} '{name}' built by {label}"})


# -- loading -------------------------------------------------------------------------------------------------


def load_plugin_file(path: str | Path) -> ModuleType:
    """Import the Python file at ``path`` (its module-level :func:`register_stage` calls register its stages).

    A file is imported once per process however often it is named. A missing file, or one that fails to
    import, raises :class:`InputError` naming the file and what went wrong (its line, for a syntax error).
    """
    given = str(path)
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError("plugin file not found" if not p.exists() else "plugin is not a file", source=given)
    resolved = p.resolve()
    if resolved in _FILES:
        return _FILES[resolved]
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    stem = re.sub(r"\W", "_", p.stem)
    module_name = f"dlsched_plugin_{stem}_{digest}"
    loader = importlib.machinery.SourceFileLoader(module_name, str(resolved))
    spec = importlib.util.spec_from_file_location(module_name, resolved, loader=loader)
    assert spec is not None  # a SourceFileLoader always gives a spec
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up here
    try:
        loader.exec_module(module)
    except InputError as exc:
        del sys.modules[module_name]
        raise InputError(f"plugin: {exc}", source=given) from None
    except SyntaxError as exc:
        del sys.modules[module_name]
        raise InputError(f"plugin has a syntax error: {exc.msg}", source=given, line=exc.lineno) from None
    except BaseException as exc:  # noqa: BLE001 - any failure of the user's file is reported as one line
        del sys.modules[module_name]
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise InputError(f"plugin failed to import: {type(exc).__name__}: {exc}", source=given) from None
    _FILES[resolved] = module
    return module


def load_plugins(paths: Iterable[str | Path] | None = None, *, entry_points: bool = True) -> None:
    """What the CLI does before it builds a configuration: each ``--plugin`` file, then the installed
    packages' ``dlsched.stages`` entry points."""
    for path in paths or ():
        load_plugin_file(path)
    if entry_points:
        load_entry_points()


def load_entry_points(group: str = ENTRY_POINT_GROUP, *, again: bool = False) -> list[str]:
    """Import every entry point installed packages declare in ``group`` (once per process unless ``again``).

    An entry point names a module (importing it registers its stages) or a callable, which is called with
    no arguments to register them. Returns the entry points loaded, as ``name = value``.
    """
    if group in _ENTRY_POINTS_LOADED and not again:
        return []
    _ENTRY_POINTS_LOADED.add(group)
    loaded = []
    for ep in importlib.metadata.entry_points(group=group):
        where = f"entry point '{ep.name} = {ep.value}'"
        dist = getattr(ep, "dist", None)
        if dist is not None:
            where += f" of package '{dist.metadata['Name']}'"
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, type):
                obj()
        except InputError as exc:
            raise InputError(f"{where}: {exc}", field="plugin") from None
        except Exception as exc:  # noqa: BLE001 - an installed package's failure, reported as one line
            raise InputError(f"{where} failed to load: {type(exc).__name__}: {exc}", field="plugin") from None
        loaded.append(f"{ep.name} = {ep.value}")
    return loaded
