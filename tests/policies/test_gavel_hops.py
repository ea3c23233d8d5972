"""The Hops paper's Gavel baseline (``gavel-hops``): the latency-ratio queue, leases handed out strictly in its
order (the first job that fits on no GPU type blocks every job behind it), each gang on one GPU type."""

from __future__ import annotations

import pytest

from dlsched.core import Adaptivity, ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimate
from dlsched.policies import build_scheduler
from dlsched.policies.hops.ordering import latency_ratio
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.run import attach_oracle
from dlsched.world.base import World
from testkit import (
    Recorder,
    StandInEstimator,
    assert_round_invariants,
    duration_job,
    small_cluster,
    with_estimator,
)


class Throughputs(StandInEstimator):
    """Per-type throughput ``speed[type] * k``, known for every job (as Gavel assumes)."""

    speed = {"t4": 1.0, "v100": 3.0}

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        s = self.speed[gpu_type]
        return GoodputEstimate(goodput=s * num_gpus, batch_size=256, throughput_sps=s * num_gpus, efficiency=1.0)


def job(name: str, k: int, wait_s: float) -> JobView:
    """A rigid job that waited ``wait_s`` of an hour's run: its latency ratio orders the queue."""
    spec = JobSpec(job_id=name, submit_time_s=0.0, model="cifar10", num_gpus=k, batch_size=256,
                   adaptivity=Adaptivity.RIGID)
    return JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None,
                   age_s=wait_s, wait_s=wait_s, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0,
                   progress_fraction=0.0, start_time_s=None, estimated_duration_s=3600.0,
                   profiled_types=("t4", "v100"), batch_limits=(256, 256))


def leases(queue: str, jobs: list[JobView], facts: dict | None = None) -> dict[str, tuple[str, ...]]:
    """Job id -> the GPU types of the GPUs it got, for one round of ``gavel-hops`` under ``queue`` (``facts``
    gets the allocation's explanation of each job)."""
    cluster = small_cluster((("t4", 1, 4), ("v100", 1, 4)))
    sched = with_estimator("gavel-hops", Throughputs(), queue=queue)
    d = sched.schedule(ClusterView(time_s=0.0, round_s=360.0, cluster=cluster, jobs=jobs))
    if facts is not None:
        facts.update({j.job_id: sched.allocation.facts_for(j.job_id) for j in jobs})
    return {k: tuple(sorted({cluster.gpu_type_of[g] for g in a.placement.gpus})) for k, a in d.allocations.items()}


# the queue: a (4 GPUs) first, then b (3), c (2), d (1); a and b fill a type each, c fits on neither, d would
QUEUE = [job("a", 4, 400.0), job("b", 3, 300.0), job("c", 2, 200.0), job("d", 1, 100.0)]


def test_the_first_job_that_fits_nowhere_blocks_every_job_behind_it():
    facts: dict = {}
    got = leases("strict", QUEUE, facts)
    assert set(got) == {"a", "b"}  # d would fit on t4's last GPU, but c is ahead of it and fits nowhere
    assert facts["c"]["blocked_by"] == facts["d"]["blocked_by"] == "c"
    assert "behind c" in facts["d"]["why"] and "blocked_by" not in facts["a"]


def test_backfill_passes_over_the_job_that_fits_nowhere():
    assert set(leases("backfill", QUEUE)) == {"a", "b", "d"}


def test_each_gang_lies_on_one_gpu_type():
    got = leases("strict", QUEUE)
    assert all(len(types) == 1 for types in got.values())
    assert got["a"] != got["b"]  # a takes the faster type whole, b the other


def test_the_preset_follows_the_latency_ratio_queue_and_validates_its_queue():
    sched = build_scheduler("gavel-hops")
    assert sched.ordering.name == "latency-ratio" and sched.allocation.queue == "strict"
    with pytest.raises((InputError, ValueError), match="queue"):
        build_scheduler("gavel-hops", settings={"queue": "sometimes"})


def test_a_run_keeps_gangs_whole_on_one_type_and_leases_a_prefix_of_the_queue():
    cluster = small_cluster((("t4", 1, 4), ("v100", 1, 4)))
    specs = [duration_job(f"j{i}", 30.0 * i, k, 600.0 + 500.0 * (i % 4)) for i, k in enumerate([4, 3, 2, 1, 4, 2, 3, 1])]
    sched = Recorder(build_scheduler("gavel-hops"))
    world = World(cluster)
    engine = Engine(cluster, specs, sched, world, SimConfig(round_s=360.0))
    attach_oracle(sched, world, engine)
    res = engine.run()
    assert all(j.finish_s is not None for j in res.jobs)
    assert_round_invariants(cluster, sched.log, specs, exact_gangs=True)
    blocked_rounds = 0
    for view, decision in sched.log:
        queue = sorted(view.jobs, key=lambda j: (-latency_ratio(view, j), j.spec.submit_time_s, j.job_id))
        placed = [j.job_id in decision.allocations for j in queue]
        assert placed == sorted(placed, reverse=True)  # the leased jobs are a prefix of the queue
        blocked_rounds += not all(placed)
    assert blocked_rounds > 0  # the queue did block at times: the check above had something to check
