"""Summary statistics of a trace: what an experimenter checks before trusting a workload.

A trace that loads cleanly can still be the wrong workload (an hour instead of eight, GPU requests no
cluster can satisfy, durations in the wrong unit). :func:`trace_stats` reduces a job list to the handful of
numbers that reveal that, as a plain JSON-ready dict that the CLI prints as a table or as JSON.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from dlsched.core.job import Adaptivity, JobSpec


def trace_stats(specs: Sequence[JobSpec]) -> dict[str, object]:
    """Counts and rates of a trace; every value is a JSON-serialisable number, string, list or dict.

    Keys:
        jobs: number of jobs.
        first_submit_s, last_submit_s, span_hours: submission window.
        arrival_rate_per_hour: ``(jobs - 1) / span``, the inverse mean inter-arrival gap, which does not
            depend on where the trace window starts (None for fewer than 2 jobs or a zero span).
        gpu_demand: ``{num_gpus: jobs}``, sorted by GPU count; mean_gpus and max_gpus alongside.
        models, adaptivity, users: ``{name: jobs}``, most common first (``users`` is the user count).
        jobs_with_duration, jobs_with_iterations, jobs_adaptive_model: how each job's work is given.
        total_gpu_hours: ``sum(duration_s * num_gpus) / 3600`` over jobs with a duration (None if none);
            median_duration_s likewise.
        total_iterations: sum of ``iterations`` over iteration jobs (None if none).
        jobs_with_deadline: jobs that carry a deadline.
    """
    n = len(specs)
    times = np.array([s.submit_time_s for s in specs], dtype=float)
    first = float(times.min()) if n else None
    last = float(times.max()) if n else None
    span_h = (last - first) / 3600.0 if first is not None and last is not None else 0.0
    rate = (n - 1) / span_h if n >= 2 and span_h > 0 else None
    gpus = Counter(s.num_gpus for s in specs)
    durations = [(s.duration_s, s.num_gpus) for s in specs if s.duration_s is not None]
    iterations = [s.iterations for s in specs if s.iterations is not None]
    adaptive_model = sum(1 for s in specs if s.duration_s is None and s.iterations is None)
    modes = Counter(Adaptivity(s.adaptivity).value for s in specs)
    return {
        "jobs": n,
        "first_submit_s": first,
        "last_submit_s": last,
        "span_hours": round(span_h, 6),
        "arrival_rate_per_hour": None if rate is None else round(rate, 6),
        "gpu_demand": {k: gpus[k] for k in sorted(gpus)},
        "mean_gpus": round(sum(k * c for k, c in gpus.items()) / n, 6) if n else None,
        "max_gpus": max(gpus) if gpus else None,
        "models": dict(Counter(s.model for s in specs).most_common()),
        "adaptivity": {a.value: modes[a.value] for a in Adaptivity if modes[a.value]},
        "users": len({s.user for s in specs}),
        "jobs_with_duration": len(durations),
        "jobs_with_iterations": len(iterations),
        "jobs_adaptive_model": adaptive_model,
        "total_gpu_hours": round(sum(d * k for d, k in durations) / 3600.0, 6) if durations else None,
        "median_duration_s": float(np.median([d for d, _ in durations])) if durations else None,
        "total_iterations": float(sum(iterations)) if iterations else None,
        "jobs_with_deadline": sum(1 for s in specs if s.deadline_s is not None),
    }
