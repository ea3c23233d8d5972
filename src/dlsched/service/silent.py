"""Jobs that report nothing: unmodified scripts that know nothing of dlsched.

A script run as it is (``python train.py``, ``torchrun ...``) writes no ``reports.jsonl``: no step times, no
gradient statistics, no checkpoints the service knows of. The service finds this out from the job's first
run: ranks that have run ``silent_after_s`` without the ``start`` report ``dlsched.train`` writes when it
starts (or a profile run that did the same) mark the job *silent*, kept in the store's meta so a restarted
service knows it too. What follows:

- it is never hung for want of reports, and never profiled again (a profile of a script that reports
  nothing measures nothing and would run the whole script in the profile's folder);
- the scheduler sees its spec as given (a rigid job rigid; an elastic job's count changes only by a
  restart, never its batch) and, as its only throughput observation, the same unit speed on every GPU type
  at its smallest size: an assumption, stated in its explanation, since no statistic says otherwise; so
  Sia and Hops, which value jobs by their throughput models, can place it;
- it resumes from its own snapshots (``$DLSCHED_CHECKPOINT_DIR``); the service's ``DLSCHED_RESUME_STEP``
  stays 0, as it knows of no checkpoint.
"""

from __future__ import annotations

from dlsched.core import Adaptivity, Cluster, JobSpec
from dlsched.core.view import ThroughputObservation

#: Meta key prefix of a job found to report nothing.
SILENT = "silent:"


def unit_speed(spec: JobSpec, cluster: Cluster, time_s: float) -> list[ThroughputObservation]:
    """One observation per GPU type the job accepts: the same (unit) step time everywhere, at its size."""
    n = spec.min_gpus or spec.num_gpus
    return [ThroughputObservation(time_s=time_s, gpu_type=t, num_nodes=1, num_gpus=n, local_bsz=1, accum_steps=1,
                                  step_time_s=1.0, sync_time_s=0.0)
            for t in cluster.type_names if spec.allows_gpu_type(t)]


def explanation(job_id: str, round_no: int, time_s: float, policy: str, spec: JobSpec) -> dict[str, object]:
    """The record that says how the policy treats a silent job (the service adds it to the round's)."""
    kind = "rigid" if spec.adaptivity is Adaptivity.RIGID else "elastic (its count changes only by a restart)"
    n = spec.min_gpus or spec.num_gpus
    return {"round": round_no, "time_s": time_s, "job": job_id, "stage": "admission", "decided": "no statistics",
            "summary": f"runs without dlsched.train (it reports no step times or gradient statistics): '{policy}' "
                       f"schedules it as {kind}, assumed as fast on every GPU type at {n} GPU(s)",
            "facts": {"reports": False, "treated_as": "rigid" if spec.adaptivity is Adaptivity.RIGID else "elastic",
                      "assumed": "unit speed on every GPU type"}}
