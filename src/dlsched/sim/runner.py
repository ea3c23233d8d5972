"""One simulation run from a resolved configuration, and the files it writes.

The configuration is plain data (a pydantic model) so it can be written next to the results and read
back: a run is reproducible from its ``config.json``. ``--set`` keys are split three ways: world knobs,
engine knobs, and everything else goes to the policy (which rejects keys it does not have).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from dlsched.clusters import load_cluster
from dlsched.core import Cluster, InputError, JobSpec
from dlsched.policies import build_scheduler
from dlsched.policies.registry import parse_value
from dlsched.sim.engine import Engine, SimConfig, SimulationResult
from dlsched.sim.metrics import jobs_frame, rounds_frame, summarize
from dlsched.sim.tuned_jobs import split_suffix as split_tuned
from dlsched.sim.tuned_jobs import tuned_jobs
from dlsched.traces import resolve_trace
from dlsched.world.base import World, WorldConfig

DEFAULT_CLUSTER = "sia-hetero-64"
DEFAULT_TRACE = "synthetic:rate=20,hours=8,seed=1"
DEFAULT_POLICY = "fifo"

_WORLD_KEYS = {f.name: f for f in dataclasses.fields(WorldConfig)}
_ENGINE_KEYS = {"max_time_s": float, "stall_rounds": int}


class RunConfig(BaseModel):
    """Everything that determines a run."""

    cluster: str = DEFAULT_CLUSTER
    trace: str = DEFAULT_TRACE
    policy: str = DEFAULT_POLICY
    ordering: str | None = None
    placement: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    seed: int = 0
    round_s: float = 60.0
    jobs: int | None = None


@dataclass
class RunOutput:
    config: RunConfig
    result: SimulationResult
    summary: dict[str, Any]
    label: str


def parse_settings(pairs: list[str] | None) -> dict[str, str]:
    """``key=value`` strings from ``--set`` into a dict, rejecting malformed ones."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set expects key=value, got '{pair}'", field="set")
        out[key.strip()] = value.strip()
    return out


def split_settings(settings: dict[str, str]) -> tuple[WorldConfig, dict[str, Any], dict[str, str]]:
    world_kwargs: dict[str, Any] = {}
    engine_kwargs: dict[str, Any] = {}
    policy: dict[str, str] = {}
    hints = {f.name: f.type for f in dataclasses.fields(WorldConfig)}
    for key, raw in settings.items():
        bare = key.removeprefix("world.")
        if bare in _WORLD_KEYS:
            world_kwargs[bare] = parse_value(raw, hints[bare], key)
        elif key in _ENGINE_KEYS:
            engine_kwargs[key] = parse_value(raw, _ENGINE_KEYS[key], key)
        else:
            policy[key] = raw
    return WorldConfig(**world_kwargs), engine_kwargs, policy


def load_jobs(trace: str, jobs: int | None, cluster: Cluster | None = None,
              seed: int = 0) -> tuple[list[JobSpec], str]:
    """The trace's jobs; a trailing ``@tuned`` applies TunedJobs for ``cluster`` (sim/tuned_jobs.py)."""
    base, tuned = split_tuned(trace)
    specs, name = resolve_trace(base)
    if jobs is not None:
        if jobs < 1:
            raise InputError(f"--jobs must be at least 1, got {jobs}", field="jobs")
        specs = specs[:jobs]
    if not specs:
        raise InputError("the trace holds no jobs", source=name)
    if tuned:
        if cluster is None:
            raise InputError(f"trace '{trace}': @tuned needs a cluster", field="trace")
        specs, name = tuned_jobs(specs, cluster, seed=seed), f"{name}@tuned"
    return specs, name


def prepare(config: RunConfig,
            on_progress: Callable[[float, int, int], None] | None = None) -> tuple[Engine, str]:
    """Validate everything and build the engine; raises InputError before any work or file is written."""
    if config.round_s <= 0:
        raise InputError(f"round length must be positive, got {config.round_s}", field="round_s")
    cluster = load_cluster(config.cluster)
    specs, trace_name = load_jobs(config.trace, config.jobs, cluster, config.seed)
    world_cfg, engine_kwargs, policy_settings = split_settings(config.settings)
    scheduler = build_scheduler(config.policy, ordering=config.ordering, placement=config.placement,
                                settings=policy_settings, seed=config.seed)
    world = World(cluster, world_cfg, seed=config.seed)
    sim_cfg = SimConfig(round_s=config.round_s, seed=config.seed, **engine_kwargs)
    engine = Engine(cluster, specs, scheduler, world, sim_cfg, on_progress=on_progress)
    if scheduler.traits.needs_oracle:
        # comparison runs only: the policy's estimator answers from the world's truth (Sia's "oracle")
        from dlsched.sim.oracle import OracleGoodput

        scheduler.attach_oracle(OracleGoodput(world, engine.physics_of))
    return engine, trace_name


def run(config: RunConfig, on_progress: Callable[[float, int, int], None] | None = None) -> RunOutput:
    engine, trace_name = prepare(config, on_progress)
    result = engine.run()
    summary = summarize(result.jobs, result.rounds, num_gpus=result.num_gpus, sim_wall_s=result.sim_wall_s)
    label = policy_label(config)
    summary = {"policy": label, "cluster": config.cluster, "trace": trace_name, "seed": config.seed, **summary}
    return RunOutput(config=config, result=result, summary=summary, label=label)


def policy_label(config: RunConfig) -> str:
    label = config.policy
    if config.ordering:
        label += f"+{config.ordering}"
    if config.placement:
        label += f"@{config.placement}"
    return label


def write_outputs(out_dir: str | Path, outputs: list[RunOutput], summary: dict[str, Any] | list[dict[str, Any]]) -> None:
    """Write results atomically: everything goes to a temporary folder first, then moves into place."""
    from dlsched.sim.report import RunArtifacts, write_report

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        if len(outputs) == 1:
            o = outputs[0]
            jobs_frame(o.result.jobs).to_csv(tmp / "jobs.csv", index=False)
            rounds_frame(o.result.rounds).to_csv(tmp / "rounds.csv", index=False)
            (tmp / "config.json").write_text(o.config.model_dump_json(indent=2) + "\n")
        else:
            for o in outputs:
                stem = _safe(o.label) + f"-seed{o.config.seed}"
                jobs_frame(o.result.jobs).to_csv(tmp / f"jobs-{stem}.csv", index=False)
                rounds_frame(o.result.rounds).to_csv(tmp / f"rounds-{stem}.csv", index=False)
            (tmp / "config.json").write_text(json.dumps([o.config.model_dump() for o in outputs], indent=2) + "\n")
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        seen: set[str] = set()
        runs = []
        for o in outputs:  # one overlay per policy (first seed), so the report stays readable
            if o.label in seen:
                continue
            seen.add(o.label)
            runs.append(RunArtifacts(label=o.label, jobs=o.result.jobs, rounds=o.result.rounds,
                                     segments=o.result.segments, summary=o.summary, num_gpus=o.result.num_gpus))
        write_report(tmp / "report.html", runs)
        if not out.exists():
            os.replace(tmp, out)
        else:
            for f in tmp.iterdir():
                os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
