"""The per-round records of a simulation run, and which waiting jobs are in the waiting queue.

Apart from the engine (which calls it once per round) because the fragment counts need a fact only the end of
the run knows: whether a job that waits unprofiled at a round is in Hops's profiling queue (it is profiled
later, and enters the waiting queue when that profile ends, section 3.1) or already in the waiting queue (the
scheduler never profiles it: a scheduler that does not profile puts jobs in the waiting queue on arrival).
:func:`settle_waiting_queue` fills ``RoundRecord.awaiting_profile`` once the run has ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dlsched.core import Cluster, Placement
from dlsched.sim.holders import GpuHolders
from dlsched.sim.job_state import JobState
from dlsched.sim.records import RoundRecord

#: A round's record with the ids of the jobs that waited unprofiled then (neither running nor profiling).
PendingRound = tuple[RoundRecord, list[str]]


def round_record(round_no: int, t: float, policy_s: float, restarts: int, profiles: Mapping[str, Placement], *,
                 holders: GpuHolders, cluster: Cluster, active: Mapping[str, JobState]) -> PendingRound:
    """The record of the round that started at ``t`` (after its first plan was applied), and the ids of the
    jobs waiting unprofiled then. GPUs held come from the holder index (kept on placement changes), GPUs of
    every profile still running on top (those started this round and those that outlast an earlier one)."""
    running = holders.running
    per_type = holders.used_by_type(g for placement in profiles.values() for g in placement.gpus)
    by_type = {tn: int(per_type[i]) for i, tn in enumerate(cluster.type_names)}
    allocated = int(per_type.sum())
    idle = cluster.num_gpus - allocated
    queue = len(active) - running
    profiling = 0
    unprofiled: list[str] = []
    for job_id, st in active.items():
        j = st.job
        if j.placement:
            continue
        if j.profiling_until_s > t:
            profiling += 1
        elif not j.profiled_types:
            unprofiled.append(job_id)
    record = RoundRecord(round=round_no, time_s=t, allocated_gpus=allocated, idle_gpus=idle,
                         fragments=idle if queue > 0 else 0, queue_len=queue, running_jobs=running,
                         active_jobs=len(active), policy_s=policy_s, restarts=restarts,
                         gpus_by_type=by_type, profiling_jobs=profiling)
    return record, unprofiled


def settle_waiting_queue(pending: Iterable[PendingRound], profiled: set[str]) -> None:
    """Set each round's ``awaiting_profile``: of the jobs that waited unprofiled then, those profiled later
    in the run (they were in the profiling queue, not yet in the waiting queue)."""
    for record, unprofiled in pending:
        record.awaiting_profile = sum(1 for job_id in unprofiled if job_id in profiled)
