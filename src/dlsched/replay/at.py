"""``dlsched whatif --at T``: the replay starts from the cluster's state at T, as the service's history has it.

* jobs that **finished by T** are left out of every row, the measured one too (their GPUs were free again by
  T, and nothing a policy does after T changes them); the notes name them;
* jobs **running at T** start the replay on the GPUs the service's last round at or before T gave them (its
  recorded decision; the ``placed`` event of the incarnation running then when the round lacks the job),
  with the work their last report before T says they had done (``samples_seen`` over the fitted work), or,
  for a job that reported nothing, the share of its held time it had held by T; each carries its restarts,
  its attained service and GPU-seconds, its first start and the types it had run or been profiled on, and
  a job placed shortly before T pays only the rest of its fitted start-up;
* jobs **queued at T** wait (a job preempted before T keeps the work it had done), and later ones arrive
  as recorded.

The first simulated round is the service's state itself (:mod:`dlsched.sim.initial`): from the next round
boundary the replayed policy decides, and may move a carried job as any other, paying the restart.
What comes out is an :class:`~dlsched.sim.initial.InitialState` in the replay's time (seconds from the
first submission among the jobs it keeps) and a summary for the output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dlsched.core import InputError, JobSpec
from dlsched.replay.export import Selection, stints
from dlsched.replay.history import History
from dlsched.sim.initial import InitialJob, InitialState

#: Events after which an incarnation no longer holds GPUs (as :mod:`dlsched.replay.export` reads them).
_ENDS = ("preempted", "requeued", "failure", "failed", "succeeded", "cancelled", "placed")


def _when(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def select_at(selection: Selection, at: float) -> tuple[Selection, list[str]]:
    """The window's jobs still unfinished at ``at`` and the ids of those finished by then; InputError naming
    ``--at`` when ``at`` lies outside the window's history (before its first submission, at or after its last
    finish)."""
    first = min(j["submitted_s"] for j in selection.jobs)
    last = max(j["finished_s"] for j in selection.jobs)
    if not first <= at < last:
        raise InputError(f"--at {_when(at)} is outside the history: its finished jobs run from "
                         f"{_when(first)} (first submission) to {_when(last)} (last finish)", field="at")
    done = sorted((j for j in selection.jobs if j["finished_s"] <= at), key=lambda j: j["finished_s"])
    keep = [j for j in selection.jobs if j["finished_s"] > at]
    left = dict(selection.left_out)
    for j in done:
        left[j["id"]] = "finished before --at: left out of every row, the measured one too"
    return Selection(keep, left), [j["id"] for j in done]


def _global_gpus(placement: dict[str, Any], offsets: dict[str, int]) -> tuple[int, ...]:
    return tuple(sorted(offsets[node] + int(g) for node, gpus in placement.items() for g in gpus))


def _placement_at(history: History, job_id: str, at: float) -> tuple[dict[str, Any], float] | None:
    """The placement the job held at ``at`` and when that incarnation was placed, or None when it held none:
    the service's last round at or before ``at`` (its decision), else the ``placed`` event running then."""
    evs = sorted(history.events.get(job_id, []), key=lambda e: e["time_s"])
    held = None
    for i, e in enumerate(evs):
        if e["kind"] != "placed" or e["time_s"] > at:
            continue
        end = next((x["time_s"] for x in evs[i + 1:] if x["kind"] in _ENDS), math.inf)
        if end > at:
            held = (dict(e.get("data", {}).get("placement") or {}), float(e["time_s"]))
    if held is None:
        return None
    rounds = [r for r in history.rounds if r["time_s"] <= at]
    if rounds:
        alloc = ((rounds[-1].get("decision") or {}).get("allocations") or {}).get(job_id)
        if alloc and alloc.get("placement"):
            return dict(alloc["placement"]), held[1]
    return held


def _profiled(history: History, job_id: str, at: float, types: set[str]) -> tuple[str, ...]:
    """The GPU types the job had been profiled on by ``at`` (its ``profiling on A, B`` events) and run on."""
    out = set(types)
    for e in history.events.get(job_id, []):
        if e["kind"] == "profiling" and e["time_s"] <= at and "profiling on " in e["message"]:
            out.update(t.strip() for t in e["message"].split("profiling on ", 1)[1].split(","))
    return tuple(sorted(t for t in out if t))


def initial_state(history: History, selection: Selection, at: float, built: Any, world: dict[str, Any],
                  specs: Sequence[JobSpec]) -> tuple[InitialState | None, dict[str, Any]]:
    """The state at ``at`` in the replay's time (None when no kept job was submitted by then), and what it
    holds per job for the output (see the module docstring)."""
    t0 = selection.t0
    start = at - t0
    nodes = sorted(built.nodes, key=lambda n: n.name)
    offsets, n = {}, 0
    for node in nodes:
        offsets[node.name] = n
        n += node.num_gpus
    node_types = {node.name: node.gpu_type for node in nodes}
    by_id = {s.job_id: s for s in specs}
    jobs: list[InitialJob] = []
    running: dict[str, Any] = {}
    queued: list[str] = []
    notes: list[str] = []
    for j in sorted(selection.jobs, key=lambda j: j["submitted_s"]):
        if j["submitted_s"] > at:
            continue
        spec = by_id[j["id"]]
        ran = [s for s in stints(j, history.events.get(j["id"], []), node_types) if s.start_s < at]
        service = sum(min(s.end_s, at) - s.start_s for s in ran)
        gpu_s: dict[str, float] = {}
        for s in ran:
            key = s.gpu_type or ""
            gpu_s[key] = gpu_s.get(key, 0.0) + s.gpus * (min(s.end_s, at) - s.start_s)
        progress = _progress_at(history, j, at, world, ran, service)
        held = _placement_at(history, j["id"], at)
        gpus: tuple[int, ...] = ()
        placed_s = None
        if held is not None:
            gpus = _global_gpus(held[0], offsets)
            placed_s = held[1] - t0
            if not spec.allows_gpu_count(len(gpus)):
                notes.append(f"{j['id']} held {len(gpus)} GPUs at --at, a count its replay cannot run: "
                             "it starts the replay queued")
                gpus = ()
        started = j.get("started_s")
        # an adaptive job's batch is left to the world (the goodput-best for its GPUs, as for any placement)
        jobs.append(InitialJob(job_id=j["id"], gpus=gpus, progress=progress,
                               placed_s=placed_s if gpus else None,
                               start_time_s=started - t0 if started is not None and started <= at else None,
                               restarts=max(0, len(ran) - 1), attained_service_s=max(0.0, service),
                               gpu_s_by_type={k: v for k, v in gpu_s.items() if k},
                               profiled_types=_profiled(history, j["id"], at, {s.gpu_type for s in ran
                                                                               if s.gpu_type})))
        if gpus:
            running[j["id"]] = {"gpus": list(held[0].items()) if held else [], "progress": progress,
                                "placed_s": placed_s}
        else:
            queued.append(j["id"])
    info = {"time_s": at, "replay_time_s": start, "running": running, "queued": queued, "notes": notes}
    if start <= 0 or not jobs:
        return None, info
    return InitialState(time_s=start, jobs=tuple(jobs)), info


def _progress_at(history: History, job: dict[str, Any], at: float, world: dict[str, Any], ran: Sequence[Any],
                 service: float) -> float:
    """The fraction of its work the job had done by ``at``: its last report's ``samples_seen`` over the work
    fitted to it; for a job that reported nothing, the share of its held time it had held by then."""
    info = world["jobs"].get(job["id"], {})
    if info.get("reported"):
        total = float(world["models"][info["model"]]["target_samples"])
        seen = [int(r.get("samples_seen") or 0) for r in history.telemetry.get(job["id"], [])
                if r.get("type") == "progress" and isinstance(r.get("time"), int | float) and r["time"] <= at]
        done = seen[-1] / total if seen and total > 0 else 0.0
    else:
        whole = sum(s.end_s - s.start_s for s in stints(job, history.events.get(job["id"], []), {}))
        done = service / whole if whole > 0 else 0.0
    return min(max(done, 0.0), 0.999)

