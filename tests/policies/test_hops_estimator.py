"""The hops allocation on its own estimator: the profiling queue, location-specific throughputs, a whole run."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_hops import job

from dlsched.core import Adaptivity, ClusterView, JobSpec, Placement, ThroughputObservation
from dlsched.estimators.hops_throughput import HopsThroughput
from dlsched.estimators.throughput_store import ThroughputStore
from dlsched.policies import build_scheduler
from dlsched.policies.hops.allocation import HopsAllocation
from dlsched.sim.engine import Engine, SimConfig
from dlsched.world.base import World
from testkit import small_cluster

COMPONENTS = (("T_f", 0.1), ("T_b", 0.2), ("T_u", 0.05), ("T_c", 0.0), ("params", 25e6))


def profiled(j, gpu_type: str, servers, step_s: float = 0.35):
    """``j`` as it reports a run on ``servers`` ((node, GPUs), ...) of ``gpu_type``."""
    o = ThroughputObservation(time_s=0.0, gpu_type=gpu_type, num_nodes=len(servers),
                              num_gpus=sum(k for _, k in servers), local_bsz=32, accum_steps=1, step_time_s=step_s,
                              sync_time_s=0.0, servers=tuple(servers), components=COMPONENTS, data_load_s=(0.1,))
    return replace(j, throughput_obs=[*j.throughput_obs, o],
                   profiled_types=tuple(sorted({*j.profiled_types, gpu_type})))


def test_profiling_queue_comes_first_on_gpus_no_job_holds(tmp_path):
    cluster = small_cluster((("1080ti", 2, 4), ("rtx3090", 1, 4)))  # GPUs 0-3, 4-7 (1080ti), 8-11 (rtx3090)
    running = profiled(profiled(job("r", (4,), placement=Placement.of(range(4))), "1080ti", [(0, 1)]),
                       "rtx3090", [(2, 1)])
    half = profiled(job("h", (1,), wait=10.0), "1080ti", [(1, 1)])  # profiled on 1080ti only
    new = [job("a", (1, 2), submit=1.0), job("b", (1, 2), submit=2.0)]
    view = ClusterView(time_s=60.0, round_s=60.0, cluster=cluster, jobs=[running, half, *new])
    alloc = HopsAllocation(store=str(tmp_path / "s.sqlite"))
    plan = alloc.allocate(view, view.jobs)
    got = {r.job.job_id: (r.shapes, r.gpus) for r in plan.profiles}
    # in arrival order, one GPU per type not yet profiled on, free ones first (the fullest server with one)
    assert got == {"h": ((("rtx3090", 1),), (8,)),
                   "a": ((("1080ti", 1), ("rtx3090", 1)), (4, 9)),
                   "b": ((("1080ti", 1), ("rtx3090", 1)), (5, 10))}
    planned = {d.job.job_id: d for d in plan.demands}
    assert "a" not in planned and "b" not in planned and "h" not in planned  # profiled this round: wait
    assert planned["r"].spread == ((tuple(range(4)), 4),)  # the running job keeps its server (4 idle there)
    # no server is promised more GPUs than it has beside the profiling ones
    for node in cluster.nodes:
        promised = sum(k for d in plan.demands for gpus, k in d.spread if gpus[0] in cluster.gpus_of_node(node.node_id))
        profiling = sum(1 for r in plan.profiles for g in r.gpus if g in cluster.gpus_of_node(node.node_id))
        assert promised + profiling <= node.num_gpus


def test_profiling_takes_a_running_jobs_gpu_when_the_type_has_none_free(tmp_path):
    cluster = small_cluster((("rtx3090", 1, 4),))
    running = profiled(job("r", (2, 4), placement=Placement.of(range(4))), "rtx3090", [(0, 1)])
    view = ClusterView(time_s=60.0, round_s=60.0, cluster=cluster, jobs=[running, job("a", (1,))])
    plan = HopsAllocation(store=str(tmp_path / "s.sqlite")).allocate(view, view.jobs)
    assert [(r.job.job_id, r.gpus) for r in plan.profiles] == [("a", (0,))]
    (d,) = plan.demands
    assert d.job.job_id == "r" and d.num_gpus == 2  # 3 GPUs are left for r: its largest requirement that fits


def test_the_plan_prefers_the_server_where_the_job_ran_faster(tmp_path):
    cluster = small_cluster((("rtx3090", 2, 4),))
    j = profiled(job("j", (4,)), "rtx3090", [(0, 1)])
    j = profiled(j, "rtx3090", [(0, 4)], step_s=1.0)  # slow on server 0 (its host)
    j = profiled(j, "rtx3090", [(1, 4)], step_s=0.5)  # fast on server 1
    view = ClusterView(time_s=60.0, round_s=60.0, cluster=cluster, jobs=[j])
    alloc = HopsAllocation(store=str(tmp_path / "s.sqlite"))
    (d,) = alloc.allocate(view, view.jobs).demands
    assert d.spread == ((tuple(cluster.gpus_of_node(1)), 4),)
    est = alloc.require_estimator()
    assert isinstance(est, HopsThroughput)
    assert est.explain("j", "rtx3090", ((0, 4),)) == (pytest.approx(4 * 32 / 1.0), ("server",))


def test_a_run_profiles_every_job_on_every_type_and_records_what_jobs_report(tmp_path):
    cluster = small_cluster((("1080ti", 1, 4), ("rtx3090", 1, 4)))
    specs = [JobSpec(f"j{i}", 30.0 * i, "resnet50", 2, duration_s=900.0, reference_gpu="1080ti",
                     adaptivity=Adaptivity.STRONG_SCALING, gpu_counts=(1, 2, 4), per_gpu_batch=True,
                     min_gpus=1, max_gpus=4) for i in range(3)]
    path = tmp_path / "run.sqlite"
    sched = build_scheduler("hops", settings={"store": str(path)})
    result = Engine(cluster, specs, sched, World(cluster), SimConfig(round_s=60.0)).run()
    assert all(j.finish_s is not None for j in result.jobs)
    assert all(j.start_s >= j.submit_s + 1.0 for j in result.jobs)  # profiled before the first start
    store = ThroughputStore(str(path))
    assert all(store.profiled_types(s.job_id) == {"1080ti", "rtx3090"} for s in specs)
    assert all(store.components(s.job_id, "1080ti").pattern == 1 for s in specs)  # torchvision ResNet-50
    assert store.count_observations() > 2 * len(specs)  # the profiles and the runs
