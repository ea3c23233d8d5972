"""Sia and Gavel under Hops's latency-ratio queue: the head of the queue is served first."""

from __future__ import annotations

from dlsched.core import Adaptivity, ClusterView, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimate
from dlsched.policies import build_scheduler
from testkit import StandInEstimator, small_cluster


class Flat(StandInEstimator):
    """Every job runs at one unit per GPU on every type (so only the queue can tell jobs apart)."""

    mode = "oracle"

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        if not job.spec.allows_gpu_count(num_gpus):
            return None
        return GoodputEstimate(goodput=float(num_gpus), batch_size=1, throughput_sps=float(num_gpus), efficiency=1.0)


def rigid(job_id: str, submit: float, now: float, duration: float, gpus: int = 4) -> JobView:
    spec = JobSpec(job_id, submit, "m", gpus, duration_s=duration, adaptivity=Adaptivity.RIGID)
    return JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None,
                   age_s=now - submit, wait_s=now - submit, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0,
                   progress_fraction=0.0, start_time_s=None, estimated_duration_s=duration)


def one_winner(policy: str, ordering: str | None, **settings) -> set[str]:
    """Two 4-GPU jobs for one 4-GPU server: the long one came first, the short one has waited longer
    relative to its length (latency ratio 0.5 against 0.017)."""
    now = 600.0
    jobs = [rigid("long", 0.0, now, 36000.0), rigid("short", 100.0, now, 1000.0)]
    sched = build_scheduler(policy, ordering=ordering, settings={k: str(v) for k, v in settings.items()})
    sched.attach_oracle(Flat())
    view = ClusterView(time_s=now, round_s=60.0, cluster=small_cluster((("v100", 1, 4),)), jobs=jobs)
    return set(sched.schedule(view).allocations)


def test_gavel_leases_follow_the_latency_ratio_queue():
    assert one_winner("gavel", None) == {"long"}  # Gavel's own priorities: equal, so the earlier job
    assert one_winner("gavel", "latency-ratio") == {"short"}


def test_sia_hands_its_placer_the_demands_in_the_latency_ratio_queue_order():
    # Sia's ILP still decides who runs; under the latency-ratio queue its demands reach the placer in that
    # order, so when fragmentation leaves room for only some, the head of the queue is placed first
    from dlsched.policies.hops.ordering import LatencyRatio

    now = 600.0
    jobs = [rigid("long", 0.0, now, 36000.0, gpus=2), rigid("short", 100.0, now, 1000.0, gpus=2)]
    view = ClusterView(time_s=now, round_s=60.0, cluster=small_cluster((("v100", 1, 4),)), jobs=jobs)
    sched = build_scheduler("sia", ordering="latency-ratio", settings={"profiling": "oracle"})
    sched.attach_oracle(Flat())
    lr = sched.allocation.allocate(view, LatencyRatio().order(view, jobs))
    assert [d.job.job_id for d in lr.demands] == ["short", "long"]
    fifo = sched.allocation.allocate(view, jobs)
    assert [d.job.job_id for d in fifo.demands] == ["long", "short"]
