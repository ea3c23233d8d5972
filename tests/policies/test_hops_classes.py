"""Hops's ILP over server classes: the plan it maps back onto servers, against the exact ILP."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import ClusterView, InputError, Placement
from dlsched.policies import build_scheduler
from dlsched.policies.hops.classes import ServerClasses, place_signature
from dlsched.policies.hops.ordering import LatencyRatio
from policies.test_hops import TableEstimator, job, planner
from testkit import small_cluster


def _used(cluster, plan) -> np.ndarray:
    used = np.zeros(len(cluster.nodes), dtype=int)
    for d in plan.demands:
        assert sum(k for _, k in d.spread) == d.num_gpus and len(d.spread) == d.num_nodes
        assert len({gpus[0] for gpus, _ in d.spread}) == d.num_nodes  # distinct servers
        for gpus, k in d.spread:
            used[int(cluster.gpu_node[gpus[0]])] += k
    return used


def test_classes_group_servers_by_type_size_and_idle_gpus():
    cluster = small_cluster((("v100", 3, 4), ("t4", 2, 4)))
    classes = ServerClasses.of(cluster, np.array([4, 4, 2, 4, 0]))
    assert classes.members == [[0, 1], [2], [3]] and classes.free == [4, 2, 4]
    assert classes.signature([(1, 4), (2, 1)]) == ((0, 4), (1, 1))
    assert classes.signature([(4, 1)]) is None  # server 4 has no idle GPUs


def test_pieces_go_to_the_fullest_server_that_holds_them_and_never_overcommit():
    cluster = small_cluster((("v100", 3, 8),))
    classes = ServerClasses.of(cluster, np.array([8, 8, 8]))
    left = np.array([8, 8, 8])
    assert place_signature(classes, left, ((0, 3),)) == [(0, 3)]
    assert place_signature(classes, left, ((0, 4),)) == [(0, 4)]  # best fit: server 0 has 5 left, the least
    assert place_signature(classes, left, ((0, 8), (0, 8))) == [(1, 8), (2, 8)]
    assert place_signature(classes, left, ((0, 2),)) is None  # one GPU left anywhere
    assert left.tolist() == [1, 0, 0]


def test_a_packing_the_relaxation_allows_is_repaired_with_the_jobs_other_counts():
    # five 3-GPU jobs on two 8-GPU servers: 15 <= 16 GPUs, but only two fit per server. The class ILP picks
    # all five; mapping places four; the fifth also accepts 2 GPUs and gets a server's last two.
    cluster = small_cluster((("v100", 2, 8),))
    jobs = [job(f"j{i}", (3,), wait=100.0 * (5 - i)) for i in range(4)] + [job("j4", (2, 3), wait=50.0)]
    est = TableEstimator({(j.job_id, "v100"): 1.0 for j in jobs}, spread_cost=10.0)
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    plan = planner(est).allocate(view, LatencyRatio().order(view, jobs))
    got = {d.job.job_id: d.num_gpus for d in plan.demands}
    assert got == {"j0": 3, "j1": 3, "j2": 3, "j3": 3, "j4": 2}
    assert np.all(_used(cluster, plan) <= 8)
    assert plan.info["hops.objective"] <= plan.info["hops.bound"] + 1e-9


def test_a_running_job_keeps_its_servers_when_its_signature_is_kept():
    cluster = small_cluster((("v100", 3, 4),))
    running = job("r", (4,), wait=10.0, placement=Placement.of(range(8, 12)))  # all of server 2
    other = job("o", (4,), wait=5.0)
    est = TableEstimator({("r", "v100"): 1.0, ("o", "v100"): 1.0})
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=[running, other])
    plan = planner(est).allocate(view, [running, other])
    by_id = {d.job.job_id: d for d in plan.demands}
    assert by_id["r"].spread == ((tuple(range(8, 12)), 4),)
    assert by_id["o"].spread[0][0][0] in (0, 4)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_class_plans_fit_and_their_bound_covers_the_exact_optimum(data):
    sizes = data.draw(st.sampled_from([4, 8]))
    cluster = small_cluster((("v100", data.draw(st.integers(1, 3)), sizes), ("t4", data.draw(st.integers(1, 3)), sizes)))
    choices = [(1,), (2,), (1, 2), (2, 4), (4,), (1, 3, 6), (8,), (3, 5)]
    n = data.draw(st.integers(1, 7))
    jobs = [job(f"j{i}", data.draw(st.sampled_from(choices)), wait=data.draw(st.floats(0, 1e4))) for i in range(n)]
    est = TableEstimator({(j.job_id, t): data.draw(st.floats(0.5, 3.0)) for j in jobs for t in ("v100", "t4")},
                         spread_cost=data.draw(st.sampled_from([0.0, 0.3, 1.0])))
    lam = data.draw(st.sampled_from([0.0, 1.0, 3.0]))
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    ordered = LatencyRatio().order(view, jobs)
    classes = planner(est, lambda_fairness=lam, solver=data.draw(st.sampled_from(["auto", "lp-round", "milp"])),
                      mip_rel_gap=0.0).allocate(view, ordered)
    exact = planner(est, lambda_fairness=lam, server_classes=False, mip_rel_gap=0.0).allocate(view, ordered)
    assert np.all(_used(cluster, classes) <= sizes)
    for d in classes.demands:
        assert d.job.spec.allows_gpu_count(d.num_gpus)
    if classes.demands:
        # the class ILP relaxes the exact one: its bound is at least the exact optimum
        assert classes.info["hops.objective"] <= classes.info["hops.bound"] * (1 + 1e-7) + 1e-9
        assert exact.info["hops.objective"] <= classes.info["hops.bound"] * (1 + 1e-6) + 1e-9


def test_on_identical_idle_servers_the_class_plan_is_as_good_as_the_exact_one():
    cluster = small_cluster((("v100", 4, 8), ("t4", 2, 8)))
    counts = [(8,), (4, 8), (2, 4), (1, 2), (16,), (2,), (4,), (1, 2, 4)]
    jobs = [job(f"j{i}", c, wait=100.0 * (i + 1)) for i, c in enumerate(counts)]
    est = TableEstimator({(j.job_id, t): 1.0 + 0.5 * (i % 3) + (t == "v100") for i, j in enumerate(jobs)
                          for t in ("v100", "t4")}, spread_cost=0.2)
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    ordered = LatencyRatio().order(view, jobs)
    fast = planner(est, mip_rel_gap=0.0).allocate(view, ordered)
    exact = planner(est, server_classes=False, mip_rel_gap=0.0).allocate(view, ordered)
    assert fast.info["hops.classes"] == 2 and fast.info["hops.options"] < exact.info["hops.options"]
    assert fast.info["hops.objective"] == pytest.approx(exact.info["hops.objective"], rel=1e-6)


def test_solver_and_server_classes_are_tunables_and_a_bad_solver_is_refused():
    sched = build_scheduler("hops", settings={"solver": "milp", "server_classes": "off", "round_gap": "0.05"})
    assert sched.allocation.solver == "milp" and not sched.allocation.server_classes
    assert sched.allocation.round_gap == 0.05
    with pytest.raises(InputError, match="solver"):
        build_scheduler("hops", settings={"solver": "simplex"})
    with pytest.raises(InputError, match="round_gap"):
        build_scheduler("hops", settings={"round_gap": "2"})
