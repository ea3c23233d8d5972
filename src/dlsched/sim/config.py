"""The run configuration: everything that determines one simulation, validated in one place.

The CLI (``simulate``, ``compare``), the experiments and the benchmarks all describe a run with a
:class:`RunConfig` and hand it to :func:`dlsched.sim.run.simulate`; nothing changes a run by reaching into the
objects it builds. The model is plain data so ``--out`` can save it (resolved: every default filled in) as
``config.json`` and ``--config`` can replay it.

Every field is checked for what it means (a round of 0 s or of a week is a typo, a seed is a non-negative
integer, ...), and a bad value becomes an :class:`~dlsched.core.InputError` naming the field and its allowed
range, which the CLI prints as one ``error:`` line. Numbers are never taken from ``true``/``false`` (a JSON
config that says ``"stall_rounds": true`` is a mistake, not 1). The ranges are listed in docs/simulator.md.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, cast

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from dlsched.core import InputError, Quotas, load_quotas
from dlsched.core.ranges import DAY_S, YEAR_S, Range
from dlsched.core.reading import unreadable
from dlsched.core.suggest import did_you_mean
from dlsched.policies.registry import STAGE_KINDS
from dlsched.sim.metrics import FtfCombine, FtfDefinition, FtfIsolated, FtfShare
from dlsched.world.base import WorldConfig
from dlsched.world.calibration import profile_names
from dlsched.world.sharing_worlds import SHARING_WORLDS

DEFAULT_CLUSTER = "sia-hetero-64"
#: Loads sia-hetero-64 enough that schedulers differ (325 jobs in 4 hours; see docs/schedulers.md for the table).
DEFAULT_TRACE = "synthetic:rate=80,hours=4,seed=1"
DEFAULT_POLICY = "fifo"
#: Stages a configuration may swap, in pipeline order (the registry's stage kinds).
STAGES: tuple[str, ...] = STAGE_KINDS
#: Engine limits that ``--set`` may also carry (they used to be set that way).
ENGINE_KEYS: tuple[str, ...] = ("max_time_s", "stall_rounds", "charge_policy_time", "explain", "round_offset_s",
                                "completion_at_round", "initial_state")
#: Keys ``config.json`` records for people that a replay does not read back.
RECORD_ONLY_KEYS: tuple[str, ...] = ("dlsched_version", "scheduler", "data")
_DAY_S = DAY_S
#: Longest simulated time a run may be asked to stop at: a trace spans at most a year, and its last jobs
#: may run long after it.
MAX_TIME_LIMIT_S = 10 * YEAR_S
#: Seeds are 64-bit; job limits beyond a million are typos (no trace dlsched reads is that long).
MAX_SEED = 2**63 - 1
MAX_JOBS = 1_000_000

#: Range checks for world options by meaning; their types come from WorldConfig itself, so options added to
#: WorldConfig are accepted (and typed) without touching this module.
_WORLD_LIMITS: dict[str, dict[str, float]] = {
    # a multiplier on iteration time: spanning nodes never speeds a job up, and 100x is already absurd
    "locality_penalty": {"ge": 1.0, "le": 100.0},
    "restart_delay_scale": {"ge": 0.0, "le": 1000.0},
    "default_restart_delay_s": {"ge": 0.0, "le": _DAY_S},
    "profile_batches": {"ge": 1, "le": 1000},
    "profile_steps": {"ge": 1, "le": 100000},
    # pausing a packed job to switch its CUDA context: measured 3.6 s (Gimbal 7.4); an hour is absurd
    "share_change_s": {"ge": 0.0, "le": 3600.0},
    # a share of interference, and the curvature of a saturating curve (MpsCurve refuses k outside (0, 50])
    "mps_isolation": {"ge": 0.0, "le": 1.0},
    "mps_curve_k": {"gt": 0.0, "le": 50.0},
    # a relative standard deviation of a reading, and the time between readings
    "monitor_noise": {"ge": 0.0, "le": 1.0},
    "monitor_period_s": {"ge": 0.0, "le": 3600.0},
}

#: World options that name one of a set of choices, and where the choices come from.
_WORLD_CHOICES: dict[str, tuple[str, Callable[[], tuple[str, ...]]]] = {
    "calibration": ("calibration profile", profile_names),
    "sharing_world": ("sharing world", lambda: SHARING_WORLDS),
}


def _choice_check(key: str, what: str, choices: Callable[[], tuple[str, ...]]) -> Any:
    def check(cls: Any, value: Any) -> Any:
        if value not in choices():
            raise ValueError(f"unknown {what} '{value}' (known: {', '.join(choices())})")
        return value

    check.__name__ = f"_known_{key}"
    return field_validator(key)(check)


def _world_options_model() -> type[BaseModel]:
    hints = typing.get_type_hints(WorldConfig)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(WorldConfig):
        limits: dict[str, Any] = _WORLD_LIMITS.get(f.name, {})
        if f.default is not dataclasses.MISSING:
            info = Field(f.default, **limits)
        elif f.default_factory is not dataclasses.MISSING:
            info = Field(default_factory=f.default_factory, **limits)
        else:
            info = Field(**limits)  # required, as in WorldConfig
        fields[f.name] = (hints[f.name], info)
    validators = {f"_known_{key}": _choice_check(key, what, fn) for key, (what, fn) in _WORLD_CHOICES.items()}
    return create_model("WorldOptions", __config__=ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True),
                        __doc__="Options of the simulated truth: the fields of WorldConfig, typed and checked.",
                        __module__=__name__, __validators__=validators, **fields)


if typing.TYPE_CHECKING:
    class WorldOptions(BaseModel):
        """Built at import from WorldConfig's fields, which a type checker cannot see."""

else:
    #: The fields of :class:`~dlsched.world.base.WorldConfig` as a pydantic model (typed, range-checked).
    WorldOptions = _world_options_model()


class FtfOptions(BaseModel):
    """Which reading of finish-time fairness (thesis eq. 3.6) the run reports; see :class:`FtfDefinition`.

    A metric only: the simulation is the same under every choice. Defaults follow the thesis's text; ``share=
    cluster``, ``combine=time`` are the Sia artifact's computation; ``isolated=started`` charges the isolated
    run the start-up a round-based scheduler imposes (``--set ftf.KEY=VALUE``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    share: FtfShare = "type"
    combine: FtfCombine = "ratio"
    isolated: FtfIsolated = "ideal"

    def definition(self) -> FtfDefinition:
        return FtfDefinition(share=self.share, combine=self.combine, isolated=self.isolated)


class RunConfig(BaseModel):
    """Everything that determines one simulation run (see docs/simulator.md, "One run configuration")."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    #: Preset name or cluster YAML path.
    cluster: str = Field(DEFAULT_CLUSTER, min_length=1)
    #: Every node group of the cluster this many times over (scaling studies).
    cluster_scale: int = Field(1, ge=1, le=1024)
    #: Named trace, ``synthetic:...``/``synergy:...`` spec or trace file; ``@tuned`` applies TunedJobs.
    #: Not given: the cluster's default trace (the first its preset lists), else :data:`DEFAULT_TRACE`.
    trace: str = Field(DEFAULT_TRACE, min_length=1)
    #: Seed of a generated trace that names none itself (None: the generator's own, 1) and of TunedJobs
    #: (``@tuned``; None: 0). The resolved config writes the seed into the trace spec and records this one.
    trace_seed: int | None = Field(None, ge=0, le=MAX_SEED)
    #: Use only the first N jobs of the trace (by submission time).
    jobs: int | None = Field(None, ge=1, le=MAX_JOBS)
    #: Jobs added in front of the trace, as rows of the canonical job table (docs/trace-format.md).
    extra_jobs: tuple[dict[str, str | int | float | None], ...] = ()
    #: ``[first, last)`` jobs by submission order that the summary covers (leave out warm-up, cool-down).
    summary_jobs: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=1)]] | None = None
    #: Measurement window ``[window_start, window_end)``: the summary covers the jobs submitted inside it,
    #: a bound written ``100j`` (job index by submission order) or ``2h``/``90m``/``3600s`` (submission time).
    window_start: str | None = None
    window_end: str | None = None
    #: Scheduler name (``dlsched policies``) and optional stage overrides.
    policy: str = Field(DEFAULT_POLICY, min_length=1)
    admission: str | None = None
    ordering: str | None = None
    allocation: str | None = None
    placement: str | None = None
    coordination: str | None = None
    #: Name of the run in tables and reports; None: the policy plus the stage overrides given
    #: (``fifo+las``, ``fifo@pal``). The resolved config records it, so a replay keeps its name.
    label: str | None = Field(None, min_length=1)
    #: Policy tunables, as strings the way ``--set`` gives them (the policy parses and rejects them).
    settings: dict[str, str] = Field(default_factory=dict)
    #: Options of the simulated truth (the fields of WorldConfig).
    world: WorldOptions = Field(default_factory=WorldOptions)
    #: Which reading of finish-time fairness the summary reports (metric only).
    ftf: FtfOptions = Field(default_factory=FtfOptions)
    #: Seed of the scheduler's and the engine's random choices.
    seed: int = Field(0, ge=0, le=MAX_SEED)
    #: Seed of the world's draws (per-GPU variability); None follows ``seed``.
    world_seed: int | None = Field(None, ge=0, le=MAX_SEED)
    #: Scheduling round length, seconds; None uses the scheduler preset's own (60 s; 360 s for Gavel, PAL).
    round_s: float | None = Field(None, ge=1.0, le=_DAY_S)
    #: Stop at this simulated time even if jobs remain (they are reported unfinished).
    max_time_s: float | None = Field(None, gt=0.0, le=MAX_TIME_LIMIT_S)
    #: Stop after this many rounds in which no job could run and none is still to arrive.
    stall_rounds: int = Field(200, ge=1, le=10_000_000)
    #: Charge the policy's own measured time to the simulation: a round's decision takes effect once it is
    #: computed (at most a round later), the previous allocation running meanwhile. Off by default, as the
    #: papers simulate; runs with it on depend on the machine's speed.
    charge_policy_time: bool = False
    #: Rounds start at ``round_offset_s + k * round_s`` (below ``round_s``): a replay of a service's history
    #: (``dlsched whatif``) sets the phase of the service's rounds against its first submission. 0: rounds at
    #: multiples of the round, the first at the first submission's round.
    round_offset_s: float = Field(0.0, ge=0.0, le=_DAY_S)
    #: A job completing inside a round is seen complete at the round's end, as ``dlsched serve`` sees it
    #: (its GPUs held and its JCT running until then); ``dlsched whatif`` sets it. Off by default: a job
    #: completes at its last step, as the papers simulate.
    completion_at_round: bool = False
    #: A JSON file of the cluster's state to start from (:mod:`dlsched.sim.initial`: the time, and per job
    #: its GPUs, the fraction of its work done, its attained service); ``dlsched whatif --at T`` writes one.
    #: None: the run starts from an empty cluster.
    initial_state: str | None = Field(None, min_length=1)
    #: Measured-data directory; None uses $DLSCHED_DATA, else the user data directory (recorded resolved).
    data_dir: str | None = Field(None, min_length=1)
    #: Per-user and per-team GPU quota file (YAML, docs/quotas.md) for the ``quota`` admission stage.
    quotas: str | None = Field(None, min_length=1)
    #: Record why each stage decided, per job and round (``explanations.jsonl`` with ``--out``; ``dlsched
    #: explain``). On by default: it costs a few percent of a run's time (``benchmarks/sim_speed.py``).
    explain: bool = True

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise input_error(exc) from None
        try:  # options that are valid alone but not together (gpu_speeds, straggler_episodes)
            self.world_config()
        except InputError as exc:
            raise InputError(str(exc).removeprefix(f"field '{exc.field}': "),
                             field=f"world.{exc.field}" if exc.field else "world") from None
        self.load_quotas()  # a bad quota file fails here, naming the file and its field

    @classmethod
    def parse(cls, data: Mapping[str, Any], source: str | None = None) -> RunConfig:
        """Validate ``data`` (a dict, e.g. read from ``config.json``), naming ``source`` in errors."""
        try:
            return cls(**dict(data))
        except InputError as exc:
            if source is None:
                raise
            message = str(exc).removeprefix(f"field '{exc.field}': ")
            raise InputError(message, source=source, field=exc.field) from None

    @model_validator(mode="before")
    @classmethod
    def _cluster_default_trace(cls, data: Any) -> Any:
        """A run that names no trace plays its cluster's (a preset lists the traces that fit it)."""
        if isinstance(data, Mapping) and data.get("trace") is None:
            cluster = data.get("cluster", DEFAULT_CLUSTER)
            trace = DEFAULT_TRACE
            if isinstance(cluster, str) and cluster:
                from dlsched.clusters import default_trace

                try:
                    trace = default_trace(cluster, DEFAULT_TRACE)
                except InputError:
                    pass  # a bad cluster is reported where the cluster is loaded, naming the field
            return {**data, "trace": trace}
        return data

    @field_validator("*", mode="before")
    @classmethod
    def _no_flags_as_numbers(cls, value: Any, info: Any) -> Any:
        """``true`` is not 1: a boolean where a number belongs is refused, not converted."""
        if isinstance(value, bool) and info.field_name in _NUMERIC_FIELDS:
            raise ValueError(f"expected a number, got {str(value).lower()}")
        return value

    @field_validator("settings", mode="before")
    @classmethod
    def _settings_as_strings(cls, value: Any) -> Any:
        """Tunables are strings as ``--set`` gives them; accept plain numbers and flags from Python callers."""
        if isinstance(value, Mapping):
            return {str(k): v if isinstance(v, str) or not isinstance(v, (int, float, bool)) else str(v)
                    for k, v in value.items()}
        return value

    @field_validator("world", mode="before")
    @classmethod
    def _none_words(cls, value: Any) -> Any:
        """``--set locality_penalty=none`` means "unset" as it always did (for options that may be unset;
        ``calibration=none`` names the profile called ``none``)."""
        if isinstance(value, Mapping):
            return {k: None if isinstance(v, str) and v.strip().lower() in ("none", "null") and _may_be_unset(k)
                    else v for k, v in value.items()}
        return value

    @field_validator("summary_jobs")
    @classmethod
    def _window_is_ordered(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and value[0] >= value[1]:
            raise ValueError(f"expected [first, last) with first < last, got {list(value)}")
        return value

    @field_validator("window_start", "window_end")
    @classmethod
    def _window_bound(cls, value: str | None, info: Any) -> str | None:
        if value is None:
            return None
        from dlsched.sim.window import parse_bound

        try:
            return parse_bound(value, info.field_name).text()
        except InputError as exc:
            raise ValueError(str(exc).removeprefix(f"field '{info.field_name}': ")) from None

    @model_validator(mode="after")
    def _window_ordered(self) -> RunConfig:
        from dlsched.sim.window import check_order

        check_order(self.window_start, self.window_end)
        return self

    @property
    def stage_overrides(self) -> dict[str, str | None]:
        return {s: getattr(self, s) for s in STAGES}

    def load_quotas(self) -> Quotas | None:
        """The quotas the ``quotas`` file declares; None without one."""
        return None if self.quotas is None else load_quotas(self.quotas)

    def world_config(self) -> WorldConfig:
        """The options as the world takes them."""
        return WorldConfig(**self.world.model_dump())


def _may_be_unset(key: str) -> bool:
    """Whether a world option accepts None (unknown keys: yes, so the error names the key, not the value)."""
    info = WorldOptions.model_fields.get(str(key))
    return info is None or type(None) in typing.get_args(info.annotation)


def world_with_defaults(world: BaseModel, defaults: Mapping[str, Any], source: str) -> BaseModel:
    """``world`` with a cluster's world defaults filled in where the run did not set the option itself.

    An option the run names (``--set world.calibration=none``, a ``config.json`` that records it) wins; the
    result records every default it took, so the resolved configuration replays the same world.
    """
    taken = {k: v for k, v in defaults.items() if k not in world.model_fields_set}
    if not taken:
        return world
    try:
        return WorldOptions(**{**world.model_dump(include=world.model_fields_set), **taken})
    except ValidationError as exc:
        err = input_error(exc)
        raise InputError(str(err).removeprefix(f"field '{err.field}': "), source=source,
                         field=f"world.{err.field}") from None


_NUMERIC_FIELDS = frozenset({"cluster_scale", "trace_seed", "jobs", "seed", "world_seed", "round_s", "max_time_s",
                             "stall_rounds", "round_offset_s"})
#: pydantic error types that a value outside, or not of, a numeric field's type raises.
_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number",
                           "int_parsing", "int_from_float", "float_parsing", "int_type", "float_type",
                           "value_error"})


def field_range(loc: list[str]) -> Range | None:
    """The allowed range of a numeric field (``round_s``, ``world.locality_penalty``) from its declaration."""
    model: type[BaseModel] = RunConfig
    if len(loc) == 2 and loc[0] == "world":
        model, loc = WorldOptions, loc[1:]
    if len(loc) != 1 or loc[0] not in model.model_fields:
        return None
    # annotated_types types bounds only as comparable; the numeric fields here declare int or float bounds
    lo: float | None = None
    hi: float | None = None
    lo_open = hi_open = False
    for m in model.model_fields[loc[0]].metadata:
        if isinstance(m, annotated_types.Ge):
            lo = cast(float, m.ge)
        elif isinstance(m, annotated_types.Gt):
            lo, lo_open = cast(float, m.gt), True
        elif isinstance(m, annotated_types.Le):
            hi = cast(float, m.le)
        elif isinstance(m, annotated_types.Lt):
            hi, hi_open = cast(float, m.lt), True
    return None if lo is None and hi is None else Range(lo, hi, lo_open, hi_open)


def input_error(exc: ValidationError, source: str | None = None) -> InputError:
    """The first problem pydantic found, as one line naming the field (``world.locality_penalty``) and, for
    a number, the range it must lie in."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    field = ".".join(loc) or None
    if err["type"] == "extra_forbidden":
        if len(loc) == 2 and loc[0] == "world":
            known = ", ".join(WorldOptions.model_fields)
            hint = did_you_mean(loc[1], WorldOptions.model_fields)
            return InputError(f"unknown world option{hint} (known: {known})", source=source, field=field)
        if len(loc) == 2 and loc[0] == "ftf":
            known = ", ".join(FtfOptions.model_fields)
            return InputError(f"unknown finish-time fairness option (known: {known})", source=source, field=field)
        hint = did_you_mean(loc[-1], RunConfig.model_fields) if loc else ""
        return InputError(f"unknown field{hint} (known: {', '.join(RunConfig.model_fields)})", source=source,
                          field=field)
    message = err["msg"].removeprefix("Value error, ")
    if "input" in err and err["type"] not in ("missing", "value_error"):
        message += f", got {err['input']!r}"
    rng = field_range(loc) if err["type"] in _RANGE_ERRORS else None
    if rng is not None:
        message += f" (allowed: {'a whole number ' + rng.phrase if _is_int_field(loc) else rng})"
    return InputError(message, source=source, field=field)


def _is_int_field(loc: list[str]) -> bool:
    model: type[BaseModel] = WorldOptions if len(loc) == 2 and loc[0] == "world" else RunConfig
    info = model.model_fields.get(loc[-1])
    return info is not None and "int" in str(info.annotation) and "float" not in str(info.annotation)


def route_settings(settings: Mapping[str, str]) -> dict[str, Any]:
    """Split ``--set`` pairs into config fields: world options, engine limits and policy tunables.

    ``world.KEY`` and bare world keys (``locality_penalty``) go to ``world``; ``ftf.KEY`` to ``ftf``;
    ``max_time_s``, ``stall_rounds``, ``charge_policy_time``, ``explain``, ``round_offset_s``,
    ``completion_at_round`` and ``initial_state`` to the engine fields; everything else
    is a policy tunable.
    """
    world: dict[str, str] = {}
    ftf: dict[str, str] = {}
    policy: dict[str, str] = {}
    out: dict[str, Any] = {}
    for key, raw in settings.items():
        bare = key.removeprefix("world.")
        if key.startswith("world.") or bare in WorldOptions.model_fields:
            world[bare] = raw
        elif key.startswith("ftf."):
            ftf[key.removeprefix("ftf.")] = raw
        elif key in ENGINE_KEYS:
            out[key] = raw
        else:
            policy[key] = raw
    out["world"], out["settings"] = world, policy
    if ftf:
        out["ftf"] = ftf
    return out


def load_config(path: str | Path) -> dict[str, Any]:
    """The fields of a saved ``config.json`` (unvalidated, so command-line flags can override them first)."""
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise InputError(unreadable(exc, "config file"), source=str(p)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=str(p), line=exc.lineno) from None
    if isinstance(data, list):
        raise InputError(f"holds {len(data)} runs (a 'compare' folder); replay one run's config.json",
                         source=str(p))
    if not isinstance(data, dict):
        raise InputError("expected a JSON object of run fields", source=str(p))
    return {k: v for k, v in data.items() if k not in RECORD_ONLY_KEYS}
