"""A service's jobs as a dlsched trace, and what each of them measurably did.

Each finished job of the window becomes one trace row: its submission time (seconds from the window's first
submission), its model (the spec's ``model``, else one name per distinct command, ``cmd-<hash>``), its
request (GPUs, adaptivity, batch bounds, GPU types, priority, deadline) exactly as
:meth:`~dlsched.service.spec.JobSubmission.to_job_spec` gives the schedulers, and, so that ``dlsched
simulate --trace OUT.csv`` plays the file without any fitted world, ``duration_s``: the time the job held
GPUs (its incarnations' placements to their ends, summed) on ``reference_gpu``, the type it ran longest on,
at the GPU count it ran longest at. The replay in a fitted world (:mod:`dlsched.replay.whatif`) replaces
that duration by the job's fitted model whenever the job reported its steps.

Only jobs that succeeded are exported: a failed or cancelled job's work is not what it asked for, and an
unfinished one's is not known yet; :func:`select_jobs` says which were left out and why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dlsched.core import Adaptivity, InputError, JobSpec
from dlsched.replay.history import History
from dlsched.service.spec import JobSubmission

#: Events that end an incarnation's hold on its GPUs.
_ENDS = ("preempted", "requeued", "failure", "failed", "succeeded", "cancelled", "placed")


def parse_time(text: str | float | None, field_name: str) -> float | None:
    """``--since``/``--until``: Unix seconds or an ISO 8601 time (``2025-01-31T12:00``, UTC unless it says)."""
    if text is None or isinstance(text, int | float):
        return None if text is None else float(text)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"expected Unix seconds or an ISO 8601 time (2025-01-31T12:00), got {text!r}",
                         field=field_name) from None
    if when.tzinfo is None:
        from datetime import UTC

        when = when.replace(tzinfo=UTC)
    return when.timestamp()


@dataclass
class Selection:
    """The jobs a window holds: the finished ones to export, and the others with the reason they are not."""

    jobs: list[dict[str, Any]]
    left_out: dict[str, str] = field(default_factory=dict)

    @property
    def t0(self) -> float:
        return min(j["submitted_s"] for j in self.jobs)


def select_jobs(history: History, *, since: float | None = None, until: float | None = None,
                user: str | None = None) -> Selection:
    """The jobs submitted in ``[since, until)`` (of ``user``); InputError when none of them succeeded."""
    inside = [j for j in history.jobs if (since is None or j["submitted_s"] >= since)
              and (until is None or j["submitted_s"] < until) and (user is None or j["user"] == user)]
    where = _window_text(since, until, user)
    if not history.jobs:
        raise InputError("the service has no jobs at all: nothing to export or replay", field="state")
    if not inside:
        raise InputError(f"no job was submitted {where} (the service has {len(history.jobs)} jobs)",
                         field="since" if since is not None or until is not None else "user")
    done = [j for j in inside if j["status"] == "succeeded"]
    left = {j["id"]: (f"{j['status']}: its work is not known yet" if j["status"] in ("queued", "profiling",
                                                                                      "running")
                      else f"{j['status']}: its work is not what it asked for") for j in inside
            if j["status"] != "succeeded"}
    if not done:
        raise InputError(f"no job submitted {where} has finished successfully ({len(inside)} jobs: "
                         + ", ".join(f"{k} {v.split(':')[0]}" for k, v in list(left.items())[:6]) + ")",
                         field="state")
    return Selection(done, left)


def _window_text(since: float | None, until: float | None, user: str | None) -> str:
    parts = []
    if since is not None:
        parts.append(f"from {datetime.fromtimestamp(since).isoformat(timespec='seconds')}")
    if until is not None:
        parts.append(f"before {datetime.fromtimestamp(until).isoformat(timespec='seconds')}")
    if user is not None:
        parts.append(f"by {user}")
    return " ".join(parts) or "at all"


def command_model(submission: JobSubmission) -> str:
    """The model name of a job whose spec names none: one per distinct command (and working folder)."""
    digest = hashlib.sha1(f"{submission.working_dir}\0{submission.command}".encode()).hexdigest()[:8]
    return f"cmd-{digest}"


def job_model(job: dict[str, Any]) -> str:
    sub = JobSubmission.model_validate(job["submission"])
    return sub.model or command_model(sub)


@dataclass(frozen=True)
class Stint:
    """One incarnation's hold on its GPUs: from its placement to the event that ended it."""

    incarnation: int
    start_s: float
    end_s: float
    gpus: int
    gpu_type: str | None


def stints(job: dict[str, Any], events: Sequence[dict[str, Any]], node_types: dict[str, str]) -> list[Stint]:
    """Every incarnation's placement and end (an end that is the job's finish is its ``finished_s``)."""
    out = []
    evs = sorted(events, key=lambda e: e["time_s"])
    for i, e in enumerate(evs):
        if e["kind"] != "placed":
            continue
        placement = e.get("data", {}).get("placement") or {}
        end = next((x["time_s"] for x in evs[i + 1:] if x["kind"] in _ENDS), job.get("finished_s"))
        if end is None:
            continue
        types = [node_types.get(n) for n in placement]
        out.append(Stint(int(e.get("data", {}).get("incarnation", 0)), float(e["time_s"]), float(end),
                         sum(len(v) for v in placement.values()), types[0] if types else job.get("gpu_type")))
    return out


def held_by_count(ran: Sequence[Stint]) -> dict[tuple[int, str], float]:
    """Seconds held per (GPU count, type)."""
    out: dict[tuple[int, str], float] = defaultdict(float)
    for s in ran:
        out[(s.gpus, s.gpu_type or "unknown")] += max(0.0, s.end_s - s.start_s)
    return dict(out)


def node_types_of(history: History, cluster: Any | None) -> dict[str, str]:
    """Node name -> GPU type, from the cluster the service ran (its nodes are named ``<type>-<i>``)."""
    if cluster is not None:
        return {n.name: n.gpu_type for n in cluster.nodes}
    return {}


def to_spec(job: dict[str, Any], t0: float, ran: Sequence[Stint], *, user: str | None = None) -> JobSpec:
    """The job as a trace row (see the module docstring)."""
    sub = JobSubmission.model_validate(job["submission"])
    spec = sub.to_job_spec(job["id"], max(0.0, job["submitted_s"] - t0), user or job["user"])
    spec = dataclasses.replace(spec, model=sub.model or command_model(sub))
    held = held_by_count(ran)
    if held:
        (count, gtype), _ = max(held.items(), key=lambda kv: kv[1])
        total = sum(held.values())
        reference = gtype if gtype != "unknown" else spec.reference_gpu
        if Adaptivity(spec.adaptivity) == Adaptivity.RIGID:
            count = spec.num_gpus
        elif not spec.allows_gpu_count(count):
            count = spec.num_gpus
        spec = dataclasses.replace(spec, num_gpus=count, duration_s=max(total, 1e-3), reference_gpu=reference)
    if spec.deadline_s is not None:
        spec = dataclasses.replace(spec, deadline_s=max(spec.deadline_s, spec.submit_time_s))
    return spec


def pseudonyms(jobs: Sequence[dict[str, Any]]) -> dict[str, str]:
    """User name -> ``user-<n>`` in order of first submission (the same user keeps one pseudonym)."""
    out: dict[str, str] = {}
    for j in sorted(jobs, key=lambda j: j["submitted_s"]):
        out.setdefault(j["user"], f"user-{len(out) + 1}")
    return out


def export_specs(history: History, selection: Selection, cluster: Any | None, *,
                 anonymize: bool = False) -> list[JobSpec]:
    """The selected jobs as trace rows, in submission order."""
    types = node_types_of(history, cluster)
    names = pseudonyms(selection.jobs) if anonymize else {}
    t0 = selection.t0
    return [to_spec(j, t0, stints(j, history.events.get(j["id"], []), types), user=names.get(j["user"]))
            for j in sorted(selection.jobs, key=lambda j: j["submitted_s"])]


def median_or_none(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(vals) if vals else None
