"""A profile ending inside a round: the profiled job is planned at once (Hops section 3.6), not a round later.

Hops profiles a new job at the start of a round on GPUs no job holds; the profile lasts seconds, the round
minutes. With ``plan_on_profile_end`` (the default) the engine asks for another plan when the profile ends,
and the job starts on the GPUs left idle then; ``plan_on_profile_end=off`` is the earlier behaviour, where the
job waits for the next round boundary. The job's wait in the waiting queue counts from its profile's end.
"""

from __future__ import annotations

import pytest

from dlsched.core import Adaptivity, InputError, JobSpec
from dlsched.policies import build_scheduler
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.metrics import summarize
from dlsched.world.base import World
from testkit import small_cluster

ROUND_S = 600.0


def run(setting: str | None, tmp_path):
    cluster = small_cluster((("rtx3090", 1, 4),))
    spec = JobSpec("a", 0.0, "resnet50", 4, duration_s=120.0, reference_gpu="rtx3090",
                   adaptivity=Adaptivity.RIGID, gpu_counts=(4,), per_gpu_batch=True)
    settings = {"store": str(tmp_path / "store.sqlite")}
    if setting is not None:
        settings["plan_on_profile_end"] = setting
    sched = build_scheduler("hops", settings=settings)
    res = Engine(cluster, [spec], sched, World(cluster), SimConfig(round_s=ROUND_S)).run()
    return res, res.jobs[0]


def test_a_job_whose_profile_ends_mid_round_starts_before_the_next_round(tmp_path):
    res, job = run(None, tmp_path)  # the paper's behaviour is the default
    assert res.rounds[0].profiling_jobs == 1  # round 0 profiled it; three GPUs sat idle meanwhile
    assert job.start_s is not None and 0.0 < job.start_s < ROUND_S
    assert job.finish_s is not None and job.finish_s < ROUND_S
    # it waited nowhere: the profile's seconds are service, and it started the moment it joined the queue
    assert job.queue_wait_s == pytest.approx(0.0, abs=1e-6)
    assert job.latency_ratio == pytest.approx(0.0, abs=1e-6)


def test_with_the_option_off_the_profiled_job_waits_for_the_round_boundary(tmp_path):
    _, job = run("off", tmp_path)
    assert job.start_s == ROUND_S
    assert job.queue_wait_s is not None and job.queue_wait_s > 0
    assert job.queue_wait_s == pytest.approx(job.wait_s)  # profiled at its arrival: both waits agree
    assert job.latency_ratio == pytest.approx(job.latency_ratio_submit)


def test_the_option_is_validated_like_the_other_tunables(tmp_path):
    with pytest.raises((InputError, ValueError), match="plan_on_profile_end"):
        run("sometimes", tmp_path)


def test_summary_reports_both_waits_and_both_latency_ratios(tmp_path):
    res, _ = run(None, tmp_path)
    summary = summarize(res.jobs, res.rounds, num_gpus=4, sim_wall_s=0.0)
    for key in ("avg_wait_s", "avg_queue_wait_s", "latency_ratio_max", "latency_ratio_submit_max"):
        assert summary[key] is not None
