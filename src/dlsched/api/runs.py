"""``dlsched.simulate``, ``dlsched.compare`` and ``dlsched.configure``: runs from Python, as the CLI makes them.

Each call builds a :class:`~dlsched.sim.config.RunConfig` (the one description of a run the CLI, config
files and experiments share), checks its names, and hands it to :func:`dlsched.sim.run.simulate`; nothing is
patched after it is built, so a run started here is the run ``dlsched simulate`` with the same options
makes, and its resolved ``config`` replays it anywhere.

Keywords are the RunConfig fields (``jobs=20``, ``seed=1``, ``round_s=360``, ``ordering='edf'``,
``world={...}``); ``settings={...}`` takes what ``--set`` takes (tunables as ``key``, ``KIND.key`` or
``STAGE.key``, ``world.KEY``, ``ftf.KEY``, engine limits); any other keyword is a world option if one has
that name, else a tunable of the run's stages (``slack_s=60``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlsched.api.checks import check_names
from dlsched.api.results import ComparisonResult, SimulationResult, summary_frame
from dlsched.core import InputError
from dlsched.sim.config import ENGINE_KEYS, RunConfig, WorldOptions

__all__ = ["compare", "configure", "simulate"]

#: Nested fields whose mappings merge key by key with a base configuration's.
_NESTED = ("world", "ftf", "settings")


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping of names to values, got {type(value).__name__}", field=key)
    return {str(k): v for k, v in value.items()}


def _route(options: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Keyword options as RunConfig fields, and the keys that were given as bare keywords and taken to be
    tunables (their refusal also looks among the fields)."""
    fields = RunConfig.model_fields
    out: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {k: {} for k in _NESTED}
    bare: list[str] = []
    for key, value in options.items():
        if key == "settings":
            for k, v in _mapping(value, key).items():
                if k.startswith("world.") or k in WorldOptions.model_fields:
                    nested["world"][k.removeprefix("world.")] = v
                elif k.startswith("ftf."):
                    nested["ftf"][k.removeprefix("ftf.")] = v
                elif k in ENGINE_KEYS:
                    out[k] = v
                else:
                    nested["settings"][k] = v
        elif key in ("world", "ftf"):
            nested[key].update(_mapping(value, key))
        elif key in fields:
            out[key] = value
        elif key in WorldOptions.model_fields:
            nested["world"][key] = value
        else:
            nested["settings"][key] = value
            bare.append(key)
    out.update({k: v for k, v in nested.items() if v})
    return out, bare


def _merged(common: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """A run's own options over the options every run shares (world, ftf and settings merge key by key)."""
    out = dict(common)
    for key, value in own.items():
        if key in _NESTED and key in out:
            out[key] = {**_mapping(out[key], key), **_mapping(value, key)}
        else:
            out[key] = value
    return out


def _base(config: RunConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields a base configuration set itself (defaults stay defaults, so a cluster's own world
    defaults still apply)."""
    if config is None:
        return {}
    if isinstance(config, RunConfig):
        return config.model_dump(exclude_unset=True)
    return _mapping(config, "config")


def configure(cluster: str | None = None, trace: str | None = None, policy: str | None = None, *,
              config: RunConfig | Mapping[str, Any] | None = None, **options: Any) -> RunConfig:
    """The checked :class:`RunConfig` for these options (over ``config``'s fields when given).

    Raises :class:`~dlsched.core.InputError` naming the field for any bad value, and the closest valid name
    for an unknown policy, stage, tunable or option.
    """
    given = {k: v for k, v in (("cluster", cluster), ("trace", trace), ("policy", policy)) if v is not None}
    routed, bare = _route({**given, **options})
    merged = _base(config)
    for key, value in routed.items():
        merged[key] = {**merged.get(key, {}), **value} if key in _NESTED else value
    cfg = RunConfig.parse(merged)
    check_names(cfg, bare)
    return cfg


def simulate(cluster: str | None = None, trace: str | None = None, policy: str | None = None, *,
             config: RunConfig | Mapping[str, Any] | None = None, **options: Any) -> SimulationResult:
    """Run one simulation and return its summary, job and round tables and resolved configuration.

    >>> r = simulate(cluster="sia-hetero-64", trace="synthetic:rate=20,hours=1,seed=1", policy="fifo", jobs=5)
    >>> r.jobs.shape[0], r.summary["jobs"]
    (5, 5)
    """
    from dlsched.sim.run import simulate as run_simulation

    cfg = configure(cluster, trace, policy, config=config, **options)
    return SimulationResult.of(run_simulation(cfg))


def compare(*runs: str | Mapping[str, Any] | RunConfig, seeds: int = 1, workers: int | None = None,
            **options: Any) -> ComparisonResult:
    """Run several schedulers (or variants) on the same cluster and trace and tabulate them.

    Each of ``runs`` is a policy name, a mapping of options for that run (a variant: ``{"policy": "fifo",
    "ordering": "edf", "label": "fifo+edf"}``) or a RunConfig; ``options`` apply to every run, a run's own
    options win. With ``seeds`` N each run repeats with seeds 0..N-1 (a generated trace's seed moves on as
    well) and the summary gives the mean and ``<metric>_std``. Runs go to ``workers`` processes (default: the
    CPUs); every configuration is checked before the first run starts.
    """
    from dlsched.sim.run import policy_label, prepare, run_many
    from dlsched.sim.run_jobs import with_trace_seed_offset

    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise InputError(f"expected a whole number of at least 1, got {seeds!r}", field="seeds")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError(f"expected a whole number of at least 1, got {workers!r}", field="workers")
    if not runs:
        raise InputError("name at least one run: a policy, a mapping of options or a RunConfig", field="runs")
    labels: list[str] = []
    configs: list[RunConfig] = []
    for item in runs:
        if isinstance(item, str):
            own: dict[str, Any] = {"policy": item}
        elif isinstance(item, RunConfig):
            own = item.model_dump(exclude_unset=True)
        else:
            own = _mapping(item, "runs")
        cfg = configure(**_merged(options, own))
        label = policy_label(cfg)
        if label in labels:
            raise InputError(f"two runs are called '{label}'; give them different labels (label=...)",
                             field="runs")
        labels.append(label)
        prepare(cfg)  # a bad cluster or trace fails now, before any run
        if seeds == 1:
            configs.append(cfg)
            continue
        for s in range(seeds):
            one = cfg.model_copy(update={"seed": cfg.seed + s, "label": label})
            configs.append(with_trace_seed_offset(one, s) or one)
    records = run_many(configs, workers)
    groups = {label: [SimulationResult.of(r) for r in records[i * seeds:(i + 1) * seeds]]
              for i, label in enumerate(labels)}
    return ComparisonResult(summary=summary_frame(groups), runs=groups)
