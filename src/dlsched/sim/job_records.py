"""The per-job records a run ends with: times, GPU use, restarts, and the fairness readings that need the
whole run (finish-time fairness against the run's average contention, Hops's latency ratio).

Two waiting times: ``wait_s`` counts from submission (every scheduler's, service attained subtracted),
``queue_wait_s`` from the moment the job entered the waiting queue (Hops section 3.1: when its first profile
ends; on submission for a job never profiled). The latency ratio is the latter over eq. 9's expected run time
(the paper's definition); ``latency_ratio_submit`` keeps the former over the same time.

Computed once, when the engine stops; apart from the engine because it only reads what the run left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import partial

from dlsched.core import Cluster, JobStatus
from dlsched.sim.job_state import JobState
from dlsched.sim.metrics import (
    FTF_READINGS,
    ContentionProfile,
    FtfDefinition,
    fair_share_gpus,
    finish_time_fairness,
    isolated_start_s,
    time_sliced_runtime_s,
)
from dlsched.sim.records import JobRecord, RoundRecord


def job_records(states: Iterable[JobState], end_t: float, rounds: Sequence[RoundRecord], cluster: Cluster,
                round_s: float, ftf: FtfDefinition) -> list[JobRecord]:
    """One record per job of ``states`` (finished, still active, not yet arrived) of a run that ended at
    ``end_t``; ``ftf`` picks the finish-time fairness reading the records' ``ftf`` carries."""
    contention = ContentionProfile.from_rounds(rounds).average
    gpus_by_type = cluster.gpus_per_type
    out: list[JobRecord] = []
    for st in states:
        j, spec = st.job, st.job.spec
        if j.status is JobStatus.PENDING and spec.submit_time_s > end_t:
            wait = 0.0
        else:
            stop = j.finish_time_s if j.finish_time_s is not None else end_t
            wait = max(0.0, stop - spec.submit_time_s - j.attained_service_s)
        queue_wait = _queue_wait(st, end_t) if st.queue_entry_s is not None else wait
        ideal = st.phys.ideal_runtime_s()
        rec = JobRecord(job_id=spec.job_id, model=spec.model, user=spec.user, adaptivity=str(spec.adaptivity),
                        requested_gpus=spec.num_gpus, submit_s=spec.submit_time_s, start_s=j.start_time_s,
                        finish_s=j.finish_time_s, wait_s=wait, gpu_s=j.attained_gpu_s, restarts=j.restarts,
                        moves=j.moves, restart_gpu_s=j.restart_gpu_s, deadline_s=spec.deadline_s, ideal_runtime_s=ideal,
                        gpu_s_by_type=dict(j.gpu_s_by_type), shared_gpu_s=st.shared_gpu_s,
                        queue_wait_s=queue_wait)
        if j.finish_time_s is not None:
            jct = j.finish_time_s - spec.submit_time_s
            n_avg = contention(spec.submit_time_s, j.finish_time_s)
            lead = isolated_start_s(spec.submit_time_s, round_s, st.profile_s,
                                    st.phys.restart_delay_s)
            ideal_iso = {share: {g: time_sliced_runtime_s(partial(st.phys.isolated_runtime_s, g), k)
                                 for g, k in fair_share_gpus(gpus_by_type, n_avg, share).items()
                                 if spec.allows_gpu_type(g)}
                         for share in {r.share for r in FTF_READINGS}}
            for reading in FTF_READINGS:
                iso = ideal_iso[reading.share]
                if reading.isolated == "started":
                    iso = {g: t + lead for g, t in iso.items()}
                try:
                    rho = finish_time_fairness(jct, iso, gpus_by_type, combine=reading.combine)
                except ValueError:  # its fair share is below its smallest gang on every type: undefined
                    rho = None
                rec.ftf_by_reading[reading.label] = rho
            rec.ftf = rec.ftf_by_reading[ftf.label]
            age = st.phys.expected_runtime_s()
            if age > 0 and math.isfinite(age):
                rec.latency_ratio, rec.latency_ratio_submit = queue_wait / age, wait / age
            rec.latency_ratio_best = queue_wait / ideal if ideal > 0 and math.isfinite(ideal) else None
        out.append(rec)
    return out


def _queue_wait(st: JobState, end_t: float) -> float:
    """Seconds the job waited in the waiting queue: from its entry (its first profile's end) to its finish
    (or ``end_t``), less the service it attained meanwhile (running, restoring, further profiles)."""
    j = st.job
    stop = j.finish_time_s if j.finish_time_s is not None else end_t
    got = st.queue_wait_at(stop)
    return 0.0 if got is None else got
