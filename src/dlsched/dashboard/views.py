"""What the service's and the report's snapshots share: the allocation timeline built from per-round
holdings, and a job's series (throughput, batch size, goodput, restarts) from its progress reports."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def merge_timeline(rounds: Iterable[tuple[float, dict[str, tuple[int, str]]]], end_s: float) -> list[dict[str, Any]]:
    """Segments ``{job, start_s, end_s, gpus, gpu_type}`` from rounds given as (time, {job: (gpus, type)}):
    a job's consecutive rounds with the same holding are one segment, which ends when the holding changes,
    at the next round, or at ``end_s`` for the last round."""
    open_: dict[str, dict[str, Any]] = {}
    done: list[dict[str, Any]] = []
    for t, holding in rounds:
        for job in list(open_):
            seg = open_[job]
            if holding.get(job) != (seg["gpus"], seg["gpu_type"]):
                seg["end_s"] = t
                done.append(open_.pop(job))
        for job, (gpus, gpu_type) in holding.items():
            if job not in open_ and gpus > 0:
                open_[job] = {"job": job, "start_s": t, "end_s": t, "gpus": gpus, "gpu_type": gpu_type}
    for seg in open_.values():
        seg["end_s"] = max(seg["start_s"], end_s)
        done.append(seg)
    return sorted(done, key=lambda s: (s["start_s"], s["job"]))


def goodput_series(reports: list[dict[str, Any]], t0: float) -> list[dict[str, Any]]:
    """Points ``{t, throughput_sps, batch_size, goodput_sps, restarts}`` from a job's reports (the
    ``reports.jsonl`` records of docs/service.md), ``t`` in seconds after ``t0``.

    Throughput is the global batch over the step time. Goodput is throughput times Pollux's statistical
    efficiency ``(phi + M0) / (phi + M)``, with the gradient noise scale ``phi = grad_var / grad_sqr`` the
    job reported and ``M0`` its first batch size; without gradient statistics it is left out rather than
    guessed. Restarts count the incarnations started after the first."""
    points: list[dict[str, Any]] = []
    starts = 0
    first_batch: int | None = None
    for r in reports:
        kind = r.get("type")
        when = r.get("time")
        if not isinstance(when, int | float):
            continue
        if kind == "start":
            starts += 1
            points.append({"t": when - t0, "throughput_sps": None, "batch_size": None, "goodput_sps": None,
                           "restarts": max(0, starts - 1)})
            continue
        if kind != "progress":
            continue
        step_s, batch = r.get("step_time_s"), r.get("batch_size")
        if not (isinstance(step_s, int | float) and step_s > 0 and isinstance(batch, int) and batch > 0):
            continue
        first_batch = first_batch or batch
        tput = batch / step_s
        sqr, var = r.get("grad_sqr"), r.get("grad_var")
        goodput = None
        if isinstance(sqr, int | float) and isinstance(var, int | float) and sqr > 0 and var >= 0:
            phi = var / sqr
            goodput = tput * (phi + first_batch) / (phi + batch)
        points.append({"t": when - t0, "throughput_sps": tput, "batch_size": batch, "goodput_sps": goodput,
                       "restarts": max(0, starts - 1)})
    return points
