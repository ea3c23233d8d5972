"""The waiting queue (Hops section 3.1): a job enters it when its profile ends, or on arrival when it is never
profiled. Its wait (``queue_wait_s``, the latency ratio) and the fragment count (``fragments_waiting``) start
there; ``wait_s``, ``latency_ratio_submit`` and ``fragments`` keep counting from submission."""

from __future__ import annotations

import pytest

from dlsched.core import Adaptivity, Decision, JobSpec, Placement
from dlsched.policies.stages import SchedulerTraits
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.metrics import summarize
from dlsched.world.base import World
from testkit import duration_job, small_cluster

ROUND_S = 600.0


class Scripted:
    """Round 0 runs ``x`` and leaves ``c`` waiting for its profile; round 1 profiles ``c``; round 2 runs it."""

    name = "scripted"
    traits = SchedulerTraits()

    def attach_oracle(self, estimator) -> None:
        pass

    def describe(self) -> str:
        return self.name

    def schedule(self, view) -> Decision:
        d = Decision()
        jobs = {j.job_id: j for j in view.jobs}
        if "x" in jobs:
            d.place("x", Placement.of((0, 1)))
        c = jobs.get("c")
        if c is not None and not c.profiling:
            if view.time_s >= ROUND_S and not c.profiled_types:
                d.profiles["c"] = Placement.of((2,))
            elif c.profiled_types:
                d.place("c", Placement.of((2, 3)))
        return d


def test_waits_and_fragments_count_from_entering_the_waiting_queue():
    cluster = small_cluster((("t4", 1, 4),))
    specs = [duration_job("x", 0.0, 2, 5000.0),
             JobSpec(job_id="c", submit_time_s=0.0, model="cifar10", num_gpus=2, batch_size=256,
                     adaptivity=Adaptivity.RIGID)]
    res = Engine(cluster, specs, Scripted(), World(cluster, seed=0), SimConfig(round_s=ROUND_S)).run()
    r0, r1, r2 = res.rounds[:3]
    # round 0: c waits for its profile (the profiling queue), two GPUs idle: only the old count has them
    assert (r0.idle_gpus, r0.queue_len, r0.profiling_jobs, r0.awaiting_profile) == (2, 1, 0, 1)
    assert (r0.fragments, r0.fragments_waiting) == (2, 0)
    # round 1: c is being profiled on GPU 2
    assert (r1.fragments, r1.fragments_waiting) == (1, 0)
    # round 2: c runs: nobody waits
    assert (r2.fragments, r2.fragments_waiting, r2.queue_len) == (0, 0, 0)
    c = next(j for j in res.jobs if j.job_id == "c")
    assert c.start_s == 2 * ROUND_S
    profile_s = 2 * ROUND_S - c.wait_s  # wait_s = start - submit - the profile's seconds
    assert 0 < profile_s < ROUND_S
    assert c.queue_wait_s == pytest.approx(ROUND_S - profile_s)  # from the profile's end to the start
    assert c.latency_ratio is not None and c.latency_ratio_submit is not None
    assert c.latency_ratio / c.latency_ratio_submit == pytest.approx(c.queue_wait_s / c.wait_s)
    x = next(j for j in res.jobs if j.job_id == "x")  # never profiled: in the waiting queue from its arrival
    assert x.queue_wait_s == pytest.approx(x.wait_s)
    summary = summarize(res.jobs, res.rounds, num_gpus=4, sim_wall_s=0.0)
    assert summary["fragments_waiting_per_round"] < summary["fragments_per_round"]
    assert summary["avg_queue_wait_s"] < summary["avg_wait_s"]
