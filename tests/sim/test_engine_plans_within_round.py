"""Plans inside a round: a scheduler whose traits say so plans again when a job completes mid-round."""

from __future__ import annotations

import pytest

from dlsched.core import Adaptivity, JobSpec
from dlsched.policies import build_scheduler
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.run import attach_oracle
from dlsched.world.base import World
from testkit import small_cluster


def two_jobs() -> list[JobSpec]:
    def spec(job_id: str, duration: float) -> JobSpec:
        return JobSpec(job_id, 0.0, "resnet50", 4, duration_s=duration, reference_gpu="1080ti",
                       adaptivity=Adaptivity.RIGID, gpu_counts=(4,), per_gpu_batch=True)

    return [spec("a", 120.0), spec("b", 120.0)]


def run(multi_plan: bool):
    cluster = small_cluster((("rtx3090", 1, 4),))
    world = World(cluster)
    # the oracle's throughputs: no profiling round before the jobs start
    sched = build_scheduler("hops", settings={"multi_plan": "on" if multi_plan else "off", "throughputs": "oracle"})
    engine = Engine(cluster, two_jobs(), sched, world, SimConfig(round_s=600.0))
    attach_oracle(sched, world, engine)
    return {j.job_id: j for j in engine.run().jobs}


def test_a_waiting_job_starts_when_the_running_one_completes_inside_the_round():
    jobs = run(multi_plan=True)
    first, second = sorted(jobs.values(), key=lambda j: j.start_s)
    assert first.start_s == 0.0 and 0.0 < first.finish_s < 600.0
    assert second.start_s == pytest.approx(first.finish_s)  # planned at the completion, not at 600 s
    assert second.finish_s < 600.0 and second.restarts == 0


def test_without_plans_inside_the_round_it_waits_for_the_next_round():
    jobs = run(multi_plan=False)
    second = max(jobs.values(), key=lambda j: j.start_s)
    assert second.start_s == 600.0
