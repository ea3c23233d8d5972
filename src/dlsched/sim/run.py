"""One way to run a simulation: :func:`simulate` takes a :class:`RunConfig` and returns the run's records.

``dlsched simulate`` and ``compare``, every experiment and every benchmark go through here, so a run means
the same thing wherever it is started, and the configuration a run saves (resolved: the round length, stages,
seeds, world options and data directory it actually used) replays it. :func:`run_many` fans configurations out
over worker processes and returns the records in order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlsched.clusters import cluster_file, cluster_source, fitting_traces
from dlsched.core import Cluster, Decision, InputError, Node, Quotas
from dlsched.core.view import ClusterView
from dlsched.estimators.base import GoodputEstimator
from dlsched.policies import SCHEDULERS, Scheduler, build_scheduler
from dlsched.policies.reasons import take_explanations
from dlsched.policies.stages import SchedulerTraits
from dlsched.sim.config import STAGES, RunConfig, world_with_defaults
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.initial import load_initial_state
from dlsched.sim.metrics import summarize
from dlsched.sim.records import JobRecord, RoundRecord, Segment
from dlsched.sim.run_jobs import TUNED_SEED, file_or_name, load_jobs_counted, resolve_trace_spec
from dlsched.sim.trace_fit import explain_misfit
from dlsched.sim.window import in_window, window_note
from dlsched.world.base import World

Progress = Callable[[float, int, int], None]
#: Called with every round's view and the scheduler's decision (benchmarks read ``Decision.info``).
DecisionObserver = Callable[[ClusterView, Decision], None]


class StopRun(Exception):
    """Raise from an ``on_progress`` callback to end a run early (a wall-clock budget, say).

    :func:`simulate` then returns the rounds and segments simulated so far, no job records, and
    ``complete=False``.
    """


@dataclass
class RunRecords:
    """What one run produced, with the resolved configuration that reproduces it."""

    config: RunConfig
    #: The scheduler as built, naming its stages (``Scheduler.describe()``).
    scheduler: str
    label: str
    trace_name: str
    jobs: list[JobRecord]
    rounds: list[RoundRecord]
    segments: list[Segment]
    num_gpus: int
    end_time_s: float
    summary: dict[str, Any]
    #: Wall-clock seconds for building and running the simulation.
    wall_s: float
    complete: bool = True
    #: Where the run's data came from (:func:`data_sources`): the data directory, and which parts used the
    #: packaged fitted parameters because measured data was missing.
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Wall seconds per phase of the engine's work (``dlsched.sim.engine.PHASES``): where a round's time goes.
    phase_s: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Lines a person should read about the run (``--jobs`` beyond the trace, what the window kept).
    notices: list[str] = dataclasses.field(default_factory=list)
    #: Why each stage decided, per job and round (:mod:`dlsched.policies.reasons`; empty with ``explain``
    #: off): what ``--out`` writes to ``explanations.jsonl`` and :func:`dlsched.explain.explain` reads.
    explanations: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def config_record(self) -> dict[str, Any]:
        """``config.json``: the resolved configuration plus, for people, the version, the scheduler and where
        its data came from."""
        from dlsched.version import __version__

        return {"dlsched_version": __version__, "scheduler": self.scheduler, "data": self.data,
                **self.config.model_dump(mode="json")}


@dataclass
class PreparedRun:
    """A validated run, ready to go: the engine and the configuration resolved against what was built."""

    config: RunConfig
    engine: Engine
    scheduler: Scheduler
    trace_name: str
    label: str
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Jobs the trace holds before ``jobs`` cuts it (so a cut beyond the trace can be said).
    trace_jobs: int = 0


def data_sources(data_dir: str | None, world: World, packed_models: Sequence[str] | None = None) -> dict[str, Any]:
    """Where a run's inputs came from, for ``config.json`` and the one-line notice the CLI prints.

    Throughput and statistical efficiency always come from the fits packaged with dlsched (derived from the
    measured profiles by ``scripts/``). Per-GPU speeds come from the measured files when the data directory
    holds them; ``packaged`` lists what fell back to the packaged fitted parameters instead. A run whose
    scheduler packs jobs (``packed_models``: its trace's models) also records ``sharing``, the provenance of
    every pair speed and MPS curve the sharing world plays among those models
    (:meth:`dlsched.world.sharing_worlds.SharingWorld.provenance`).
    """
    origin = world.speeds.origin
    packaged = ["gpu_speeds"] if origin == "fitted" else []
    out: dict[str, Any] = {"dir": data_dir, "throughput": "packaged-fit", "efficiency": "packaged-fit",
                           "gpu_speeds": origin, "packaged": packaged}
    if packed_models is not None:
        out["sharing"] = world.sharing_world.provenance(packed_models)
    return out


def sharing_notice(data: dict[str, Any]) -> str | None:
    """One line saying which sharing world a packing run played and how much of it was measured."""
    sharing = data.get("sharing")
    if not sharing:
        return None
    pairs = ", ".join(f"{n} {k}" for k, n in sharing["pairs"].items())
    curves = ", ".join(f"{n} {k}" for k, n in sharing["mps_curves"].items())
    return (f"sharing world {sharing['world']}: pairs among the trace's models {pairs}; MPS curves {curves} "
            f"(config.json 'data.sharing')")


def data_notice(data: dict[str, Any]) -> str | None:
    """One line saying which parts used packaged fitted parameters because measured data was missing."""
    if not data.get("packaged"):
        return None
    where = data.get("dir") or "no data directory (set DLSCHED_DATA)"
    return (f"measured data missing ({where}): {', '.join(data['packaged'])} from the packaged fitted "
            f"parameters; config.json records it under 'data'")


def prepare(config: RunConfig, on_progress: Progress | None = None,
            on_decision: DecisionObserver | None = None) -> PreparedRun:
    """Validate everything and build the engine; raises InputError before any work or file is written."""
    data_dir = resolve_data_dir(config.data_dir)
    with data_env(data_dir):
        described = cluster_file(config.cluster)
        cluster = scale_cluster(described.build(), config.cluster_scale)
        # the cluster's world defaults (a sia-* preset's calibration) under what the run set itself
        world_options = world_with_defaults(config.world, described.world, cluster_source(config.cluster))
        scheduler = build_scheduler(config.policy, **config.stage_overrides, settings=dict(config.settings),
                                    seed=config.seed)
        if hasattr(scheduler, "explain"):
            scheduler.explain = config.explain
        world_seed = config.seed if config.world_seed is None else config.world_seed
        resolved = config.model_copy(update={
            "world": world_options, "cluster": file_or_name(config.cluster),
            "trace": resolve_trace_spec(config.trace, config.trace_seed),
            "trace_seed": config.trace_seed if config.trace_seed is not None else TUNED_SEED,
            "round_s": config.round_s if config.round_s is not None else default_round_s(config.policy),
            "world_seed": world_seed, "data_dir": data_dir,
            "label": policy_label(config), **stages_used(config),
            "quotas": None if config.quotas is None else str(Path(config.quotas).expanduser().resolve()),
            "initial_state": None if config.initial_state is None
            else str(Path(config.initial_state).expanduser().resolve())})
        quotas = _quotas_for(resolved, scheduler)
        # record the straggler-episode setting the world resolves (its default depends on gpu_speeds)
        resolved = resolved.model_copy(update={"world": resolved.world.model_copy(
            update={"straggler_episodes": resolved.world_config().episodes})})
        world = World(cluster, resolved.world_config(), seed=world_seed)
        specs, trace_name, trace_jobs = load_jobs_counted(resolved, cluster)
        assert resolved.round_s is not None  # resolve() fills it from the preset
        _check_round_overheads(world, float(resolved.round_s))
        if resolved.round_offset_s >= resolved.round_s:
            raise InputError(f"the rounds' offset must be below the round ({resolved.round_s:g} s), got "
                             f"{resolved.round_offset_s:g} s", field="round_offset_s")
        sim_cfg = SimConfig(round_s=float(resolved.round_s), seed=config.seed,
                            max_time_s=config.max_time_s, stall_rounds=config.stall_rounds,
                            ftf=config.ftf.definition(), charge_policy_time=config.charge_policy_time,
                            quotas=quotas, round_offset_s=config.round_offset_s,
                            completion_at_round=config.completion_at_round,
                            initial=None if resolved.initial_state is None
                            else load_initial_state(resolved.initial_state))
        played = scheduler if on_decision is None else _Observed(scheduler, on_decision)
        try:
            engine = Engine(cluster, specs, played, world, sim_cfg, on_progress=on_progress)
        except InputError as exc:  # a trace written for another cluster: say so, and which traces fit
            raise explain_misfit(exc, specs, cluster, world, trace=resolved.trace, cluster_name=config.cluster,
                                 fitting=fitting_traces(config.cluster)) from None
        attach_oracle(scheduler, world, engine)
    return PreparedRun(config=resolved, engine=engine, scheduler=scheduler, trace_name=trace_name,
                       label=resolved.label,  # type: ignore[arg-type]
                       data=data_sources(data_dir, world, [j.model for j in specs]
                                         if scheduler.traits.allows_packing else None),
                       trace_jobs=trace_jobs)


def simulate(config: RunConfig, *, on_progress: Progress | None = None,
             on_decision: DecisionObserver | None = None) -> RunRecords:
    """Run one simulation and return its records (jobs, rounds, segments, summary)."""
    t0 = time.perf_counter()
    run = prepare(config, on_progress, on_decision)
    engine = run.engine
    complete = True
    with data_env(run.config.data_dir):
        try:
            result = engine.run()
            jobs, rounds, segments, end_s, sim_wall_s = (result.jobs, result.rounds, result.segments,
                                                         result.end_time_s, result.sim_wall_s)
        except StopRun:
            complete = False
            jobs, rounds, segments = [], list(engine.rounds), list(engine.segments)
            end_s = rounds[-1].time_s + run.config.round_s if rounds else 0.0  # type: ignore[operator]
            sim_wall_s = time.perf_counter() - t0
    covered = in_window(window_jobs(jobs, run.config.summary_jobs), run.config.window_start, run.config.window_end)
    notices = [n for n in (jobs_notice(run), sharing_notice(run.data), window_note(len(jobs), len(covered), run.config.window_start,
                                                          run.config.window_end) if complete else None) if n]
    summary = summarize(covered, rounds, num_gpus=engine.cluster.num_gpus, sim_wall_s=sim_wall_s)
    summary = {"policy": run.label, "cluster": run.config.cluster, "trace": run.trace_name,
               "seed": run.config.seed, "calibration": run.config.world_config().calibration, **summary}
    return RunRecords(config=run.config, scheduler=run.scheduler.describe(), label=run.label,
                      trace_name=run.trace_name, jobs=jobs, rounds=rounds, segments=segments,
                      num_gpus=engine.cluster.num_gpus, end_time_s=end_s, summary=summary,
                      wall_s=time.perf_counter() - t0, complete=complete, data=run.data,
                      phase_s=dict(engine.phase_s), notices=notices,
                      explanations=take_explanations(run.scheduler))


def run_many(configs: Sequence[RunConfig], workers: int | None = None, *,
             on_result: Callable[[int, RunRecords | BaseException], None] | None = None,
             return_exceptions: bool = False) -> list[Any]:
    """Simulate every configuration, ``workers`` processes at a time (default: the CPUs this process may use).

    Records come back in the order of ``configs``; ``on_result(index, records)`` is called as each run ends.
    A failing run raises (after the others finish) unless ``return_exceptions``, which puts the exception in
    its slot (and hands it to ``on_result``) instead, so a long sweep can report a failure and keep the rest.
    """
    n = max(1, min(workers or cpu_count(), len(configs)))
    out: list[Any] = [None] * len(configs)

    def done(i: int, value: RunRecords | BaseException) -> None:
        out[i] = value
        if on_result is not None and (return_exceptions or not isinstance(value, BaseException)):
            on_result(i, value)

    if n == 1:
        for i, cfg in enumerate(configs):
            try:
                done(i, simulate(cfg))
            except Exception as exc:  # noqa: BLE001 - reported in the slot or re-raised below
                if not return_exceptions:
                    raise
                done(i, exc)
        return out
    with ProcessPoolExecutor(max_workers=n) as pool:
        futures = {pool.submit(simulate, cfg): i for i, cfg in enumerate(configs)}
        for fut in as_completed(futures):
            failure = fut.exception()
            done(futures[fut], failure if failure is not None else fut.result())
    failed = next((x for x in out if isinstance(x, BaseException)), None)
    if failed is not None and not return_exceptions:
        raise failed
    return out


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# -- pieces of a run ---------------------------------------------------------------------------------------


def attach_oracle(scheduler: Scheduler, world: World, engine: Engine) -> None:
    """Comparison runs only: a scheduler that asks for it gets an estimator answering from the world's truth."""
    if scheduler.traits.needs_oracle:
        from dlsched.sim.oracle import OracleGoodput

        scheduler.attach_oracle(OracleGoodput(world, engine.physics_of))
    if scheduler.traits.needs_monitor:
        from dlsched.sim.monitor import WorldMonitor

        scheduler.attach_monitor(WorldMonitor(world))  # type: ignore[attr-defined]


def _quotas_for(config: RunConfig, scheduler: Scheduler) -> Quotas | None:
    """The run's quotas; refused when the admission stage would ignore them (a run that names a quota file
    but admits everyone would report results as if quotas had held)."""
    quotas = config.load_quotas()
    admission = getattr(scheduler, "admission", None)
    if quotas is not None and not getattr(admission, "uses_quotas", False):
        name = getattr(admission, "name", "?")
        raise InputError(f"admission '{name}' ignores quotas; only admission 'quota' enforces them "
                         f"(add --admission quota)", field="quotas")
    return quotas


def _check_round_overheads(world: World, round_s: float) -> None:
    """Refuse a profiles file whose jobs would spend every round starting up: they could never progress."""
    worst = world.throughput.largest_round_overhead()
    if worst is not None and worst[1] >= round_s:
        raise InputError(f"model '{worst[0]}' spends {worst[1]:g} s of every round before its first step, not "
                         f"less than the round ({round_s:g} s): its jobs could never progress",
                         source=world.config.profiles, field="round_overhead_s")


def default_round_s(policy: str) -> float:
    """The scheduler preset's own round length (60 s for most; 360 s for Gavel and PAL)."""
    return float(SCHEDULERS[policy].round_s)


def stages_used(config: RunConfig) -> dict[str, str]:
    """Stage names the run uses: the overrides, else the preset's own."""
    entry = SCHEDULERS[config.policy]
    overrides = config.stage_overrides
    return {s: overrides.get(s) or entry.stage(s) for s in STAGES}


def policy_label(config: RunConfig) -> str:
    """The run's name: its ``label``, else ``policy`` with the overrides given (``fifo+las``, ``fifo@pal``)."""
    if config.label is not None:
        return config.label
    label = config.policy
    for stage in STAGES:
        value = getattr(config, stage)
        if value is not None:
            label += {"ordering": f"+{value}", "placement": f"@{value}"}.get(stage, f" {stage}={value}")
    return label


def jobs_notice(run: PreparedRun) -> str | None:
    """A line when ``jobs`` asks for more jobs than the trace holds (the run plays them all)."""
    asked = run.config.jobs
    if asked is None or asked <= run.trace_jobs:
        return None
    return (f"--jobs {asked} is more than trace '{run.trace_name}' holds ({run.trace_jobs} jobs); all "
            f"{run.trace_jobs} are played")


def window_jobs(jobs: Sequence[JobRecord], window: tuple[int, int] | None) -> list[JobRecord]:
    """Jobs in submission order (numeric ids in number order), cut to ``[first, last)`` when given."""
    def key(j: JobRecord) -> tuple:
        try:
            return (j.submit_s, 0, float(j.job_id), "")
        except ValueError:
            return (j.submit_s, 1, math.inf, j.job_id)

    ordered = sorted(jobs, key=key)
    return ordered if window is None else ordered[window[0]:window[1]]


def scale_cluster(cluster: Cluster, k: int) -> Cluster:
    """Every node ``k`` times over (copies next to the original, so types stay grouped)."""
    if k == 1:
        return cluster
    nodes: list[Node] = []
    for node in cluster.nodes:
        for c in range(k):
            nid = len(nodes)
            nodes.append(Node(node_id=nid, gpu_type=node.gpu_type, num_gpus=node.num_gpus,
                              speed_factor=node.speed_factor, rack=None if node.rack is None else f"{node.rack}.{c}",
                              name=f"{node.gpu_type}-{nid}", host=node.host))
    return dataclasses.replace(cluster, name=f"{cluster.name}-x{k}", nodes=tuple(nodes))


def resolve_data_dir(given: str | None) -> str | None:
    """The data directory as an absolute path: the given one (which must exist), else the default if present."""
    if given is not None:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise InputError(f"data directory {path} not found", field="data_dir")
        return str(path.resolve())
    from dlsched.datadir import data_dir

    found = data_dir()
    return None if found is None else str(found)


@contextlib.contextmanager
def data_env(path: str | None) -> Iterator[None]:
    """Point the data readers at ``path`` for the duration of a run (they read ``$DLSCHED_DATA``)."""
    from dlsched.datadir import ENV_VAR

    if path is None:
        yield
        return
    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = path
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = old


class _Observed:
    """The scheduler, with each decision also shown to an observer; everything else is the scheduler's."""

    def __init__(self, inner: Scheduler, observe: DecisionObserver) -> None:
        self._inner, self._observe = inner, observe
        self.name = inner.name

    @property
    def traits(self) -> SchedulerTraits:
        return self._inner.traits

    def attach_oracle(self, estimator: GoodputEstimator) -> None:
        self._inner.attach_oracle(estimator)

    def attach_monitor(self, monitor: object) -> None:
        self._inner.attach_monitor(monitor)  # type: ignore[attr-defined]

    def describe(self) -> str:
        return self._inner.describe()

    def schedule(self, view: ClusterView) -> Decision:
        decision = self._inner.schedule(view)
        self._observe(view, decision)
        return decision

    def schedule_more(self, view: ClusterView) -> Decision:
        """A plan inside a round (schedulers whose traits say ``plans_within_round``), observed as well."""
        more: Callable[[ClusterView], Decision] = self._inner.schedule_more  # type: ignore[attr-defined]
        decision = more(view)
        self._observe(view, decision)
        return decision
