"""The jobs of a run: the trace as a replay needs it spelled, its seed, TunedJobs, and extra jobs.

A generated trace that names no seed takes the run's ``trace_seed`` (else the generator's default), and the
resolved spec spells it out, so a saved configuration replays the same jobs; ``compare --seeds`` moves that
seed on to draw a new workload from the same distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlsched.core import Cluster, InputError, JobSpec
from dlsched.sim.config import RunConfig
from dlsched.sim.tuned_jobs import split_suffix as split_tuned
from dlsched.sim.tuned_jobs import tuned_jobs
from dlsched.traces import NAMED_TRACES, resolve_trace

#: Generated-trace families whose spec may carry ``seed=``; without one they take the config's trace_seed.
_GENERATED = ("synthetic", "synergy")
#: Named traces drawn from a seed (``gimbal-philly:seed=S``), with the seed each draws without one:
#: ``compare --seeds`` moves it on like a generated trace's, so each repetition sees another draw.
_SEEDED = {"gimbal-philly": 1, "gimbal-alibaba": 1, "hops": 0, "hops-table3": 0, "copter": 0}
_TRACE_FAMILIES = frozenset(n.partition(":")[0].partition("[")[0] for n in NAMED_TRACES)
#: Seeds used when the config gives no trace seed: the generators' own default, and TunedJobs' draw.
GENERATOR_SEED = 1
TUNED_SEED = 0


def load_jobs(config: RunConfig, cluster: Cluster | None = None) -> tuple[list[JobSpec], str]:
    """The run's jobs: the extra jobs, then the trace's first ``jobs``; ``@tuned`` applies TunedJobs."""
    specs, name, _ = load_jobs_counted(config, cluster)
    return specs, name


def load_jobs_counted(config: RunConfig, cluster: Cluster | None = None) -> tuple[list[JobSpec], str, int]:
    """:func:`load_jobs` plus how many jobs the trace holds before ``jobs`` cuts it (a cut beyond the trace
    is then said, not silently run short)."""
    base, tuned = split_tuned(resolve_trace_spec(config.trace, config.trace_seed))
    specs, name = resolve_trace(base)
    total = len(specs)
    if config.jobs is not None:
        specs = specs[:config.jobs]
    if not specs:
        raise InputError("the trace holds no jobs", source=name)
    if tuned:
        if cluster is None:
            raise InputError(f"trace '{config.trace}': @tuned needs a cluster", field="trace")
        seed = config.trace_seed if config.trace_seed is not None else TUNED_SEED
        specs, name = tuned_jobs(specs, cluster, seed=seed), f"{name}@tuned"
    if config.extra_jobs:
        specs = [*_extra_jobs(config.extra_jobs), *specs]
        ids = [s.job_id for s in specs]
        dup = next((i for i in ids if ids.count(i) > 1), None)
        if dup is not None:
            raise InputError(f"job id '{dup}' is both an extra job and a trace job", field="extra_jobs")
    return specs, name, total


def _extra_jobs(rows: Sequence[dict[str, Any]]) -> list[JobSpec]:
    from dlsched.traces.schema import spec_from_record

    return [spec_from_record({k: "" if v is None else v for k, v in row.items()}, "extra_jobs", i)
            for i, row in enumerate(rows, start=1)]


def resolve_trace_spec(trace: str, trace_seed: int | None) -> str:
    """The trace as a replay needs it: a file as an absolute path (replays from any folder), a generated trace
    with its seed spelled out (``trace_seed`` when it names none); named traces as they are."""
    base, tuned = split_tuned(trace)
    head, sep, args = base.partition(":")
    if head in _GENERATED:
        if not any(a.strip().startswith("seed=") for a in args.split(",")):
            seed = trace_seed if trace_seed is not None else GENERATOR_SEED
            base = f"{head}:{args},seed={seed}" if sep and args.strip() else f"{head}:seed={seed}"
    elif head not in _TRACE_FAMILIES:
        base = file_or_name(base)
    return f"{base}@tuned" if tuned else base


def _spec_seed(spec: str) -> int | None:
    """The ``seed=`` a generated trace spec names, or None."""
    _, _, args = spec.partition(":")
    for arg in args.split(","):
        key, _, value = arg.strip().partition("=")
        if key.strip() == "seed":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def trace_seed_used(config: RunConfig) -> int | None:
    """The seed the run's trace was drawn with: a generated trace's ``seed=`` (or a drawn named trace's, when
    spelt out), else TunedJobs' seed for ``@tuned``, else None (a fixed trace: a file or a named trace)."""
    base, tuned = split_tuned(config.trace)
    if base.partition(":")[0] in _GENERATED:
        return _spec_seed(resolve_trace_spec(base, config.trace_seed))
    if base.partition(":")[0] in _SEEDED and _spec_seed(base) is not None:
        return _spec_seed(base)  # a drawn named trace whose seed is spelt out (compare --seeds spells it)
    if tuned:
        return config.trace_seed if config.trace_seed is not None else TUNED_SEED
    return None


def with_trace_seed_offset(config: RunConfig, offset: int) -> RunConfig | None:
    """``config`` with the seed of its generated trace (and of ``@tuned``) moved on by ``offset``.

    ``compare --seeds N`` uses it so that each repetition sees a different workload drawn from the same
    distribution, not only a different world; a named trace drawn from a seed (``gimbal-philly``, ``hops``,
    ``copter``) moves on from the seed it names or draws by default. None when the trace is fixed (a file or a
    named trace without a seed or ``@tuned``), which no seed changes.
    """
    base, tuned = split_tuned(config.trace)
    head, _, args = base.partition(":")
    generated = head in _GENERATED or head in _SEEDED
    if not generated and not tuned:
        return None
    update: dict[str, Any] = {}
    if generated:
        spec = resolve_trace_spec(base, config.trace_seed)
        if head in _SEEDED and _spec_seed(spec) is None:
            spec = f"{head}:{args},seed={_SEEDED[head]}" if args.strip() else f"{head}:seed={_SEEDED[head]}"
        seed = (_spec_seed(spec) or 0) + offset
        _, _, spelled = spec.partition(":")
        kept = [a for a in spelled.split(",") if a.strip() and a.strip().partition("=")[0].strip() != "seed"]
        base = f"{head}:{','.join([*kept, f'seed={seed}'])}"
    if tuned:
        update["trace_seed"] = (config.trace_seed if config.trace_seed is not None else TUNED_SEED) + offset
    update["trace"] = f"{base}@tuned" if tuned else base
    return RunConfig.parse({**config.model_dump(), **update})


def file_or_name(text: str) -> str:
    path = Path(text).expanduser()
    return str(path.resolve()) if path.is_file() else text
