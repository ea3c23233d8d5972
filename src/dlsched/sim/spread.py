"""Mean and spread of repeated runs, as papers report them.

``compare --seeds N`` runs each row N times; a table of means alone hides whether two schedulers differ by
more than the noise, so each metric also gets its standard deviation over the seeds (``<key>_std``, sample
standard deviation, 0 for one seed). Over several workloads (``--trace sia-philly:1..8``) a row is the mean
over the workloads of each workload's seed mean, with the standard deviation and the range (``<key>_min``,
``<key>_max``) over the workloads, as the Sia artifact's summary prints them.

Repetitions of a deterministic policy in a world without randomness are the same run N times; their spread
is 0 because nothing varied, not because the result is stable. :func:`identical` tells that case apart by
comparing the runs' job records, so the command can say that the seeds changed nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dlsched.sim.metrics import SUMMARY_KEYS, average_summaries

if TYPE_CHECKING:
    from dlsched.sim.run import RunRecords

#: Summary keys that measure the machine, not the schedule: they differ between identical runs.
TIMING_KEYS: frozenset[str] = frozenset({"policy_time_median_s", "policy_time_p99_s", "sim_wall_s"})
#: Summary keys that get a spread (the metrics; labels and counts of what was run do not).
SPREAD_KEYS: tuple[str, ...] = SUMMARY_KEYS


def _values(rows: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [float(v) for r in rows if isinstance(v := r.get(key), int | float) and not isinstance(v, bool)
            and math.isfinite(float(v))]


def _std(values: list[float]) -> float | None:
    if not values:
        return None
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def seed_row(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each metric over one row's seeds, with ``<key>_std`` beside every metric."""
    row = average_summaries(list(summaries))
    for key in SPREAD_KEYS:
        if key in row:
            row[f"{key}_std"] = _std(_values(summaries, key))
    row["runs"] = len(summaries)
    return row


def workload_row(per_trace: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One row over several workloads: each metric's mean over the workloads' (seed-mean) rows, with its
    standard deviation (``_std``) and range (``_min``, ``_max``) over the workloads."""
    row = average_summaries([{k: v for k, v in r.items() if not k.endswith(("_std", "_min", "_max"))}
                             for r in per_trace])
    for key in SPREAD_KEYS:
        values = _values(per_trace, key)
        if key in row:
            row[f"{key}_std"] = _std(values)
            row[f"{key}_min"] = min(values) if values else None
            row[f"{key}_max"] = max(values) if values else None
    row["workloads"] = len(per_trace)
    row["runs"] = sum(int(r.get("runs", 1)) for r in per_trace)
    return row


def _fingerprint(run: RunRecords) -> tuple[Any, ...]:
    """What a schedule produced, without the machine's timings: every job's start, finish and restarts,
    and the schedule's metrics."""
    jobs = tuple(sorted((j.job_id, j.start_s, j.finish_s, j.restarts, round(j.gpu_s, 6)) for j in run.jobs))
    metrics = tuple((k, run.summary.get(k)) for k in SUMMARY_KEYS if k not in TIMING_KEYS)
    return jobs, metrics


def identical(runs: Sequence[RunRecords]) -> bool:
    """Whether several runs (one row's seeds) produced the same schedule: the seeds changed nothing."""
    if len(runs) < 2:
        return False
    first = _fingerprint(runs[0])
    return all(_fingerprint(r) == first for r in runs[1:])
