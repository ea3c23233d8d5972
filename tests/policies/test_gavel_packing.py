"""Gavel's packing policy for makespan: it packs a pair when sharing beats taking turns, places a pair on
the same GPUs, and keeps the packing rules and invariants every round."""

from __future__ import annotations

import pytest

from dlsched.core import Adaptivity, ClusterView, JobSpec, JobStatus, JobView, Placement
from dlsched.core.packing import holders
from dlsched.policies import build_scheduler
from dlsched.policies.gavel.packing import GavelPackingAllocation
from dlsched.sim.engine import Engine, SimConfig
from dlsched.world.base import World, WorldConfig
from testkit import Recorder, assert_round_invariants, small_cluster

ONE_GPU = small_cluster((("a40", 1, 1),))


def spec(job_id: str, model: str, gpus: int, duration: float, submit: float = 0.0) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=submit, model=model, num_gpus=gpus, duration_s=duration,
                   adaptivity=Adaptivity.RIGID, reference_gpu="a40")


def view_of(cluster, specs: list[JobSpec]) -> ClusterView:
    jobs = [JobView(spec=s, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                    wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                    start_time_s=None, estimated_duration_s=s.duration_s) for s in specs]
    return ClusterView(time_s=0.0, round_s=360.0, cluster=cluster, jobs=jobs)


def test_the_lp_packs_a_pair_that_shares_well_and_alternates_one_that_does_not():
    alloc = GavelPackingAllocation()
    good = view_of(ONE_GPU, [spec("a", "efficientnet", 1, 3600.0), spec("b", "mobilenetv2", 1, 3600.0)])
    x = alloc.shares(good, good.jobs)
    assert x.get(("a", "b"), 0.0) > 0.9  # 0.91 + 0.92 of their speeds at once beats taking turns
    # the makespan optimum evens out the two jobs' progress: the slower one in the pair gets a little alone
    rate_a = 0.9095 * x[("a", "b")] + x.get(("a",), 0.0)
    rate_b = 0.924 * x[("a", "b")] + x.get(("b",), 0.0)
    assert rate_a == pytest.approx(rate_b, rel=1e-6)
    bad = view_of(ONE_GPU, [spec("a", "resnet50", 1, 3600.0), spec("b", "lstm", 1, 3600.0)])
    x = alloc.shares(bad, bad.jobs)
    assert x.get(("a", "b"), 0.0) == pytest.approx(0.0, abs=1e-6)  # 0.41 + 0.42: taking turns is faster
    assert x[("a",)] == pytest.approx(0.5, abs=1e-6) and x[("b",)] == pytest.approx(0.5, abs=1e-6)


def run(cluster, specs, **kw):
    rec = Recorder(build_scheduler("gavel-packing", **kw))
    world = World(cluster, WorldConfig(variability=False), seed=0)
    res = Engine(cluster, specs, rec, world, SimConfig(round_s=360.0)).run()
    return {r.job_id: r for r in res.jobs}, rec.log


def test_a_packed_pair_runs_on_the_same_gpus_and_the_rules_hold():
    cluster = small_cluster((("a40", 2, 2),))
    specs = [spec("a", "efficientnet", 2, 3600.0), spec("b", "mobilenetv2", 2, 3600.0),
             spec("c", "resnet18", 2, 1800.0), spec("d", "efficientnet", 2, 1800.0), spec("e", "resnet18", 2, 900.0)]
    got, log = run(cluster, specs)
    assert_round_invariants(cluster, log, specs, exact_gangs=True, packing=True)
    shared = [js for _, d in log for js in holders({j: a.placement for j, a in d.allocations.items()}).values()
              if len(js) > 1]
    assert shared  # five 2-GPU jobs on 4 GPUs: Gavel packs some of them
    assert all(r.finish_s is not None for r in got.values())
