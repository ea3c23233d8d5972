"""Sia's bootstrapped profiling of new jobs (thesis section 3.3.2).

A new job is first profiled on one minimum-sized configuration of each GPU type it accepts: one
data-parallel worker (``gpu_unit`` GPUs, so one GPU for most jobs) rounded up to a configuration on one
node. Profiling may take at most a share of each type per round; a job waits up to five rounds for room on
every type, then is profiled on the types that have room.
"""

from __future__ import annotations

import numpy as np

from dlsched.core import ClusterView, JobStatus, JobView
from dlsched.policies.sia.configs import ConfigSet
from dlsched.policies.stages import ProfileRequest

#: Rounds a new job waits for profiling room on every type before it is profiled on those with room.
MAX_PROFILE_WAIT_ROUNDS = 5


def profile_count(job: JobView, cs: ConfigSet, ti: int) -> int | None:
    """GPUs to profile a job on one type; None if one worker does not fit a node of the type."""
    unit = max(1, job.spec.gpu_unit)
    sel = (cs.type_idx == ti) & (cs.nodes == 1) & (cs.gpus >= unit)
    if not sel.any():
        return None
    return int(cs.gpus[sel].min())


def awaits_profiling(job: JobView) -> bool:
    """A job that has never been profiled, run or started profiling."""
    return not job.profiled_types and not job.placement and not job.profiling \
        and job.start_time_s is None and job.status is not JobStatus.PROFILING


class ProfilePlanner:
    """Chooses which new jobs to profile this round, and on how many GPUs of which type.

    State carried across rounds: ``waited`` (rounds each new job has waited for room) and ``unprofilable``
    (jobs with no type to profile on; they learn as they run).
    """

    def __init__(self, max_share: float) -> None:
        self.max_share = max_share
        self.waited: dict[str, int] = {}
        self.unprofilable: set[str] = set()

    def forget(self, active: set[str]) -> None:
        self.waited = {k: v for k, v in self.waited.items() if k in active}
        self.unprofilable &= active

    def plan(self, view: ClusterView, cs: ConfigSet, room: np.ndarray) -> tuple[list[ProfileRequest], np.ndarray]:
        """Profiling requests for new jobs, and the GPUs they take per type."""
        use = np.zeros(len(cs.type_names), dtype=np.int64)
        reqs: list[ProfileRequest] = []
        room = np.maximum(room, 0)
        budget = np.maximum(1, np.floor(cs.capacity * self.max_share)).astype(np.int64)
        budget = np.minimum(budget, room)
        new = sorted((j for j in view.jobs if awaits_profiling(j)), key=lambda j: (j.spec.submit_time_s, j.job_id))
        for job in new:
            wants: list[tuple[int, int]] = []
            for ti, t in enumerate(cs.type_names):
                if not job.spec.allows_gpu_type(t):
                    continue
                k = profile_count(job, cs, ti)
                if k is not None:
                    wants.append((ti, k))
            if not wants:
                self.unprofilable.add(job.job_id)
                continue
            # within the per-round budget; a type's first profile of the round may exceed it (a big pipeline
            # unit), as long as the GPUs are there
            fits = [(ti, k) for ti, k in wants if use[ti] + k <= budget[ti] or (use[ti] == 0 and k <= room[ti])]
            waited = self.waited.get(job.job_id, 0)
            if not fits or (len(fits) < len(wants) and waited < MAX_PROFILE_WAIT_ROUNDS):
                self.waited[job.job_id] = waited + 1
                continue
            for ti, k in fits:
                use[ti] += k
            reqs.append(ProfileRequest(job, tuple((cs.type_names[ti], k) for ti, k in fits)))
        return reqs, use
