"""What a job's workers wrote to ``reports.jsonl``, read incrementally and turned into what the scheduler sees.

The training library appends one JSON object a line (docs/service.md, "The worker protocol"). The service
reads only complete lines past the offset it has consumed, so a line being written while it reads is taken
next round, and it keeps that offset in its database, so a restarted service neither loses nor repeats a
report. A line that is not JSON (a worker killed mid-write leaves at most one) is skipped, never fatal.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlsched.core.view import GradientObservation, ThroughputObservation

REPORTS_FILE = "reports.jsonl"
CONTROL_FILE = "control.json"


def read_new_reports(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete lines of ``path`` past byte ``offset``, parsed, and the offset after the last of them."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return [], offset
    out: list[dict[str, Any]] = []
    for raw in chunk[: end + 1].splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("type"), str):
            out.append(obj)
    return out, offset + end + 1


@dataclass
class ReportDigest:
    """What one round's new reports of one job say, in the terms of the job's database row."""

    steps_done: int | None = None
    last_checkpoint_step: int | None = None
    progress: float | None = None
    last_report_s: float | None = None
    started: bool = False
    done: bool = False
    stopped: bool = False
    error: str | None = None
    #: The current incarnation wrote a checkpoint in these reports.
    checkpointed: bool = False
    #: Unix time the current incarnation's first reported step began (its first ``progress`` report's time
    #: less the steps it covers), when these reports hold it: the end of the incarnation's start-up.
    first_step_s: float | None = None
    throughput: list[ThroughputObservation] = field(default_factory=list)
    gradient: list[GradientObservation] = field(default_factory=list)
    #: (kind, message, data) for the job's event log.
    events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


def digest(reports: list[dict[str, Any]], *, incarnation: int, gpu_type: str | None, num_nodes: int,
           now_s: float) -> ReportDigest:
    """Fold the reports of the job's current incarnation into a :class:`ReportDigest`.

    Reports of an earlier incarnation (a worker that outlived its stop) still count for checkpoints, which
    are real whoever wrote them, but not for progress or observations of the current placement."""
    d = ReportDigest()
    for r in reports:
        kind = r["type"]
        current = int(r.get("incarnation", -1)) == incarnation
        when = float(r.get("time", now_s))
        if kind == "checkpoint" and isinstance(r.get("step"), int):
            d.last_checkpoint_step = max(d.last_checkpoint_step or 0, int(r["step"]))
            d.checkpointed = d.checkpointed or current
            continue
        if not current:
            continue
        d.last_report_s = when
        if kind == "start":
            d.started = True
            d.events.append(("started", f"incarnation {incarnation} started at step {r.get('resumed_step', 0)} "
                             f"on {r.get('world_size', '?')} workers, batch {r.get('batch_size')}",
                             {"resumed_step": r.get("resumed_step", 0)}))
        elif kind == "progress":
            if d.first_step_s is None:
                d.first_step_s = _first_step_began(r, when)
            _progress(d, r, gpu_type=gpu_type, num_nodes=num_nodes, when=when)
        elif kind == "done":
            d.done = True
            d.steps_done = max(d.steps_done or 0, int(r.get("step", 0)))
        elif kind == "stopped":
            d.stopped = True
            d.steps_done = max(d.steps_done or 0, int(r.get("step", 0)))
        elif kind == "error":
            d.error = str(r.get("message", "error"))
            d.events.append(("error", d.error, {}))
    return d


def _first_step_began(r: dict[str, Any], when: float) -> float:
    """When the first step a ``progress`` report covers began: its time less its steps' mean step time."""
    first, last, step_s = r.get("first_step"), r.get("last_step"), r.get("step_time_s")
    if isinstance(first, int) and isinstance(last, int) and isinstance(step_s, int | float) and step_s > 0:
        return when - max(1, last - first + 1) * float(step_s)
    return when


def _progress(d: ReportDigest, r: dict[str, Any], *, gpu_type: str | None, num_nodes: int, when: float) -> None:
    if isinstance(r.get("last_step"), int):
        d.steps_done = max(d.steps_done or 0, int(r["last_step"]))
    if r.get("progress") is not None:
        d.progress = float(r["progress"])
    world = int(r.get("world_size") or 0)
    step_s = r.get("step_time_s")
    if gpu_type is not None and world > 0 and isinstance(step_s, int | float) and step_s > 0:
        d.throughput.append(ThroughputObservation(
            time_s=when, gpu_type=gpu_type, num_nodes=max(1, num_nodes), num_gpus=world,
            local_bsz=max(1, int(r.get("local_bsz") or 1)), accum_steps=1, step_time_s=float(step_s),
            sync_time_s=float(r.get("sync_time_s") or 0.0)))
    sqr, var = r.get("grad_sqr"), r.get("grad_var")
    if isinstance(sqr, int | float) and isinstance(var, int | float) and r.get("batch_size"):
        d.gradient.append(GradientObservation(time_s=when, batch_size=int(r["batch_size"]), grad_sqr=float(sqr),
                                              grad_var=float(var)))


def write_control(job_dir: Path, *, incarnation: int, batch_size: int | None, stop: bool) -> None:
    """Write ``control.json`` atomically (temporary file, then rename), as the worker protocol requires."""
    job_dir.mkdir(parents=True, exist_ok=True)
    tmp = job_dir / f".{CONTROL_FILE}.tmp"
    tmp.write_text(json.dumps({"incarnation": incarnation, "batch_size": batch_size, "stop": stop}))
    group = job_dir.stat().st_gid
    if group != os.getegid():  # the folder is the job account's group's (dlsched.service.isolation): it reads
        os.chown(tmp, -1, group)
        os.chmod(tmp, 0o640)
    tmp.replace(job_dir / CONTROL_FILE)
