"""A deadline-aware ordering: earliest deadline first.

Jobs with a deadline go first, the earliest deadline first; jobs without one follow, first come first
served; ties break by submit time, then job id, so a run is deterministic. dlsched ships an ``edf``
ordering (Gimbal's); this file shows how one's own is written, and registers it as ``my-edf``::

    dlsched simulate --plugin examples/stages/edf.py --ordering my-edf --jobs 20

``grace_s`` is a tunable (``--set grace_s=600``): deadlines are rounded down to multiples of it, and jobs
whose deadlines fall in one window are served in submission order, so a later job cannot overtake an earlier
one by a few seconds of deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dlsched
from dlsched.core.ranges import ranged


@dataclass
class EarliestDeadlineFirst:
    """Earliest deadline first; jobs without a deadline after those with one, by submit time."""

    #: Width (seconds) of the windows deadlines are rounded down to; 0 orders by the exact deadline.
    grace_s: float = ranged(0.0, 0.0, 86400.0)
    name: str = "my-edf"

    def order(self, view: dlsched.ClusterView, jobs: list[dlsched.JobView]) -> list[dlsched.JobView]:
        def key(j: dlsched.JobView) -> tuple[bool, float, float, str]:
            deadline = j.spec.deadline_s
            if deadline is None:
                return (True, math.inf, j.spec.submit_time_s, j.job_id)
            bucket = math.floor(deadline / self.grace_s) if self.grace_s > 0 else deadline
            return (False, bucket, j.spec.submit_time_s, j.job_id)

        return sorted(jobs, key=key)


dlsched.register_stage("ordering", "my-edf", EarliestDeadlineFirst)
