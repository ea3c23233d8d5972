"""A simulation that starts from a cluster's state, not from an empty cluster: ``RunConfig.initial_state``.

``dlsched whatif --at T`` replays a service's history from the moment T: the jobs running then hold the GPUs
the service had given them, with the work they had done, and the queued ones wait. The simulator is told
this through its inputs, a JSON file (:class:`InitialState`), never by reaching into a built engine:

.. code-block:: json

    {"time_s": 812.0,
     "jobs": [{"job_id": "j3", "gpus": [0, 1], "batch_size": 64, "progress": 0.42, "placed_s": 700.0,
               "start_time_s": 650.0, "restarts": 1, "attained_service_s": 160.0,
               "gpu_s_by_type": {"a100": 320.0}, "profiled_types": ["a100"]}]}

``time_s`` is where the run starts (trace seconds). Every job of the trace submitted by then is active at the
start; those listed carry what they had: ``gpus`` (global GPU ids of the cluster; empty for a job that
waits), ``progress`` (the fraction of its work done, which the engine turns into the world's work units; a
policy sees only the fraction, as it sees every job's), when its current placement began (``placed_s``: a job
placed shortly before still pays the rest of its start-up), its first start, restarts and the service and
GPU-seconds it attained. The first round (round 0) is the state itself: it runs from ``time_s`` to the next
round boundary on the listed placements, without asking the scheduler (the scheduler the history ran
decided it); from round 1 the scheduler decides as for any job, and moving a carried job costs a restart.

The state is checked like a decision (no GPU given to two jobs, a gang's count one its request allows)
when the engine is built, so a bad file is one :class:`~dlsched.core.InputError` before any work. A
scheduler that runs jobs rigidly runs each at its requested count only: a job the state gives another count
(an adaptive job a service's adaptive policy had shrunk) starts queued under it, with its progress
(:func:`unplaceable`; ``dlsched whatif`` names such jobs in its notes).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dlsched.core import Allocation, Cluster, Decision, InputError, JobSpec, JobStatus, Placement
from dlsched.core.reading import unreadable
from dlsched.sim.round_records import round_record

_FIELD = "initial_state"


class InitialJob(BaseModel):
    """One job's state at the start (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str = Field(min_length=1)
    gpus: tuple[int, ...] = ()
    batch_size: int | None = Field(default=None, ge=1)
    progress: float = Field(0.0, ge=0.0, lt=1.0)
    placed_s: float | None = None
    start_time_s: float | None = None
    restarts: int = Field(0, ge=0)
    attained_service_s: float = Field(0.0, ge=0.0)
    gpu_s_by_type: dict[str, float] = Field(default_factory=dict)
    profiled_types: tuple[str, ...] = ()


class InitialState(BaseModel):
    """The cluster's state at ``time_s``: the jobs that had GPUs, or work done, then."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_s: float = Field(ge=0.0, allow_inf_nan=False)
    jobs: tuple[InitialJob, ...] = ()


def load_initial_state(path: str | Path) -> InitialState:
    """The state in a JSON file; InputError naming ``initial_state.<field>`` when it is not one."""
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise InputError(unreadable(exc, "initial state file"), source=str(p), field=_FIELD) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=str(p), line=exc.lineno, field=_FIELD) from None
    try:
        return InitialState.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise InputError(err["msg"].removeprefix("Value error, "), source=str(p),
                         field=f"{_FIELD}.{where}" if where else _FIELD) from None


def check_initial_state(state: InitialState, specs: Sequence[JobSpec], cluster: Cluster) -> None:
    """Refuse a state the engine could not start from: a job not in the trace or not yet submitted at
    ``time_s``, a GPU outside the cluster or given to two jobs, a gang's count its request does not allow."""
    by_id = {s.job_id: s for s in specs}
    held: dict[int, str] = {}
    seen: set[str] = set()
    for i, ij in enumerate(state.jobs):
        where = f"{_FIELD}.jobs.{i}"
        spec = by_id.get(ij.job_id)
        if spec is None:
            raise InputError(f"job '{ij.job_id}' is not in the trace", field=f"{where}.job_id")
        if ij.job_id in seen:
            raise InputError(f"job '{ij.job_id}' is listed twice", field=f"{where}.job_id")
        seen.add(ij.job_id)
        if spec.submit_time_s > state.time_s:
            raise InputError(f"job '{ij.job_id}' is submitted at {spec.submit_time_s:g} s, after the start "
                             f"({state.time_s:g} s)", field=f"{where}.job_id")
        for g in ij.gpus:
            if not 0 <= g < cluster.num_gpus:
                raise InputError(f"GPU {g} of job '{ij.job_id}' is not in the cluster (GPUs 0-{cluster.num_gpus - 1})",
                                 field=f"{where}.gpus")
            if g in held:
                raise InputError(f"GPU {g} is given to both '{held[g]}' and '{ij.job_id}'", field=f"{where}.gpus")
            held[g] = ij.job_id
        if ij.gpus and not spec.allows_gpu_count(len(ij.gpus)):
            raise InputError(f"job '{ij.job_id}' holds {len(ij.gpus)} GPUs, a count its request does not allow",
                             field=f"{where}.gpus")
        for t in (ij.placed_s, ij.start_time_s):
            if t is not None and not (math.isfinite(t) and t <= state.time_s):
                raise InputError(f"job '{ij.job_id}': a time after the start ({t!r} s > {state.time_s:g} s)",
                                 field=f"{where}.placed_s" if t is ij.placed_s else f"{where}.start_time_s")


def unplaceable(state: InitialState, specs: Sequence[JobSpec], *, rigid: bool) -> list[str]:
    """The jobs the state places at a GPU count the scheduler cannot hold them at (a rigid scheduler: any
    count but the requested one); they start queued."""
    if not rigid:
        return []
    by_id = {s.job_id: s for s in specs}
    return [ij.job_id for ij in state.jobs if ij.gpus and len(ij.gpus) != by_id[ij.job_id].num_gpus]


def next_boundary(t: float, round_s: float, offset_s: float) -> float:
    """The first round boundary (``offset_s + k * round_s``) after ``t``."""
    k = math.floor((t - offset_s) / round_s) + 1
    end = offset_s + k * round_s
    return end if end > t else end + round_s


def start_from(engine: Any, state: InitialState) -> tuple[float, int]:
    """Run round 0 of ``engine`` from ``state``: admit the jobs submitted by ``time_s``, give the listed ones
    their progress, service and placements, and advance to the next round boundary on those placements.
    Returns that boundary and how many pending jobs were admitted (the engine's main loop goes on from them).
    ``engine`` is a :class:`dlsched.sim.engine.Engine` (not imported: the engine imports this module)."""
    cfg = engine.config
    t = state.time_s
    n = 0
    while n < len(engine.pending) and engine.pending[n].job.spec.submit_time_s <= t:
        st = engine.pending[n]
        st.job.status = JobStatus.QUEUED
        engine.active[st.job.job_id] = st
        n += 1
    decision = Decision()
    queued = set(unplaceable(state, [st.job.spec for st in engine.active.values()], rigid=engine.rigid))
    for ij in state.jobs:
        st = engine.active[ij.job_id]
        j = st.job
        j.progress = ij.progress * st.phys.total_work
        j.attained_service_s = ij.attained_service_s
        j.gpu_s_by_type = dict(ij.gpu_s_by_type)
        j.attained_gpu_s = sum(ij.gpu_s_by_type.values())
        j.profiled_types = tuple(sorted(ij.profiled_types))
        if ij.profiled_types and st.queue_entry_s is None:
            st.queue_entry_s, st.service_at_entry_s = t, ij.attained_service_s
        if ij.gpus and ij.job_id not in queued:
            decision.allocations[ij.job_id] = Allocation(Placement.of(list(ij.gpus)), ij.batch_size)
    engine._check(decision, t)
    engine._apply(decision, t)
    for ij in state.jobs:
        st = engine.active[ij.job_id]
        j = st.job
        j.restarts = ij.restarts
        placed = bool(ij.gpus) and ij.job_id not in queued
        j.start_time_s = ij.start_time_s if ij.start_time_s is not None else (t if placed else None)
        if placed:  # already running: the rest of its start-up only, if it was placed just before
            since = ij.placed_s if ij.placed_s is not None else -math.inf
            j.restart_until_s = max(t, since + st.phys.restart_delay_s)
            j.status = JobStatus.RESTARTING if j.restart_until_s > t else JobStatus.RUNNING
    end = next_boundary(t, cfg.round_s, cfg.round_offset_s)
    record, unprofiled = round_record(0, t, 0.0, 0, engine._profiles_running(t), holders=engine._holders,
                                      cluster=engine.cluster, active=engine.active)
    if unprofiled:
        engine._pending_rounds.append((record, unprofiled))
    record.info = {"initial_state": 1.0}
    engine._round_end = end
    engine._advance(t, end)  # the state's round: no plans within it (the scheduler did not make it)
    engine._check_progress(cfg.stall_rounds)
    engine.rounds.append(record)
    return end, n


def as_json(state: InitialState) -> dict[str, Any]:
    return state.model_dump(mode="json")
