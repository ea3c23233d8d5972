"""Hops's server classes refined by the estimator's server layer: servers it tells apart are planned apart,
servers it does not stay merged, and every plan fits the cluster."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_hops_estimator import profiled

from dlsched.core import ClusterView, InputError
from dlsched.policies import build_scheduler
from dlsched.policies.hops.allocation import HopsAllocation
from dlsched.policies.hops.classes import ServerClasses, profiles_agree
from dlsched.policies.hops.ordering import LatencyRatio
from policies.test_hops import job
from testkit import small_cluster


def _plan(jobs, cluster, **kw):
    """The round's first plan of ``jobs`` under Hops's own estimator (an in-memory store)."""
    view = ClusterView(time_s=60.0, round_s=60.0, cluster=cluster, jobs=jobs)
    alloc = HopsAllocation(store="sqlite:///", **kw)
    return alloc.allocate(view, LatencyRatio().order(view, jobs))


def _placed(cluster, plan) -> dict[str, tuple[str, tuple[tuple[int, int], ...]]]:
    """Per job: its GPU type and (server, GPUs) pairs."""
    return {d.job.job_id: (d.gpu_type, tuple(sorted((int(cluster.gpu_node[g[0]]), k) for g, k in d.spread)))
            for d in plan.demands}


def _used(cluster, plan) -> np.ndarray:
    used = np.zeros(len(cluster.nodes), dtype=int)
    for d in plan.demands:
        assert sum(k for _, k in d.spread) == d.num_gpus and len(d.spread) == d.num_nodes
        nodes = [int(cluster.gpu_node[gpus[0]]) for gpus, _ in d.spread]
        assert len(set(nodes)) == d.num_nodes  # distinct servers
        assert all(cluster.nodes[n].gpu_type == d.gpu_type for n in nodes)
        for n, (_, k) in zip(nodes, d.spread, strict=True):
            used[n] += k
    return used


def test_servers_split_only_where_their_answers_differ_beyond_the_tolerance():
    cluster = small_cluster((("rtx3090", 4, 8),))
    idle = np.full(4, 8)
    # server 1: job 0 ran 0.5% slower there than on the type; server 2: 20% slower; server 3: no records
    profiles = {1: {(0, "aggregated", 8): (99.5, 100.0)}, 2: {(0, "aggregated", 8): (80.0, 100.0)}}
    loose = ServerClasses.of(cluster, idle, profiles, tolerance=0.01)
    assert loose.members == [[0, 1, 3], [2]]
    assert loose.profile[0] == {} and loose.profile[1] == profiles[2]
    exact = ServerClasses.of(cluster, idle, profiles, tolerance=0.0)
    assert exact.members == [[0, 3], [1], [2]]
    assert profiles_agree({"k": (1.0, 2.0)}, {"k": (1.0, 5.0)}, 0.0)  # the same answer, whatever the type's
    assert not profiles_agree({"k": (1.0, 2.0)}, {}, 0.4)  # the other answers as the type: 2, 50% off


def test_identical_servers_give_the_plan_of_the_named_server_ilp():
    # every job ran at the same speed on every server it used: the server layer tells no server apart
    cluster = small_cluster((("rtx3090", 3, 4), ("1080ti", 2, 4)))
    counts = [(4,), (2, 4), (1, 2), (8,), (1,), (2,)]
    jobs = []
    for i, c in enumerate(counts):
        j = profiled(job(f"j{i}", c, wait=100.0 * (i + 1)), "1080ti", [(3, 1)], step_s=0.5 + 0.1 * i)
        j = profiled(j, "rtx3090", [(i % 3, 1)], step_s=0.3)
        j = profiled(j, "rtx3090", [((i + 1) % 3, 1)], step_s=0.3)
        jobs.append(j)
    classes = _plan(jobs, cluster, mip_rel_gap=0.0)
    named = _plan(jobs, cluster, mip_rel_gap=0.0, server_classes=False)
    assert classes.info["hops.servers_told_apart"] == 0 and classes.info["hops.classes"] == 2
    assert classes.info["hops.objective"] == pytest.approx(named.info["hops.objective"], rel=1e-9)
    got = {k: (t, sum(n for _, n in s)) for k, (t, s) in _placed(cluster, classes).items()}
    want = {k: (t, sum(n for _, n in s)) for k, (t, s) in _placed(cluster, named).items()}
    assert got == want


def test_a_server_told_apart_is_planned_as_the_named_server_ilp_plans_it():
    # j ran slower on server 0 than on server 1 (its host); k has only a one-GPU profile; both want 4 GPUs
    cluster = small_cluster((("rtx3090", 2, 4),))
    j = profiled(job("j", (4,), wait=200.0), "rtx3090", [(0, 1)])
    j = profiled(j, "rtx3090", [(0, 4)], step_s=1.0)
    j = profiled(j, "rtx3090", [(1, 4)], step_s=0.5)
    k = profiled(job("k", (4,), wait=100.0), "rtx3090", [(0, 1)])
    for kw in ({}, {"server_tolerance": 0.0}):
        classes = _plan([j, k], cluster, mip_rel_gap=0.0, **kw)
        named = _plan([j, k], cluster, mip_rel_gap=0.0, server_classes=False, **kw)
        assert classes.info["hops.servers_told_apart"] == 2 and classes.info["hops.classes"] == 2
        assert _placed(cluster, classes) == _placed(cluster, named) == {
            "j": ("rtx3090", ((1, 4),)), "k": ("rtx3090", ((0, 4),))}
        assert classes.info["hops.objective"] == pytest.approx(named.info["hops.objective"], rel=1e-9)


def test_server_tolerance_is_a_tunable_in_its_range():
    assert build_scheduler("hops", settings={"server_tolerance": "0.05"}).allocation.server_tolerance == 0.05
    with pytest.raises(InputError, match="server_tolerance"):
        build_scheduler("hops", settings={"server_tolerance": "-0.1"})


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_plans_over_servers_told_apart_fit_and_bound_the_named_server_ilp(data):
    size = data.draw(st.sampled_from([4, 8]))
    n3090, n1080 = data.draw(st.integers(2, 3)), data.draw(st.integers(1, 2))
    cluster = small_cluster((("rtx3090", n3090, size), ("1080ti", n1080, size)))
    servers = {"rtx3090": list(range(n3090)), "1080ti": list(range(n3090, n3090 + n1080))}
    choices = [(1,), (2,), (1, 2), (2, 4), (4,), (1, 3, 6), (8,), (3, 5)]
    jobs = []
    for i in range(data.draw(st.integers(1, 6))):
        j = job(f"j{i}", data.draw(st.sampled_from(choices)), wait=data.draw(st.floats(1.0, 1e4)))
        for t, nodes in servers.items():
            j = profiled(j, t, [(nodes[0], 1)])  # the profile: components and a one-GPU record
            # runs on some servers at their own speeds (one server, or two together)
            for _ in range(data.draw(st.integers(1, 3))):
                used = data.draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=2, unique=True))
                k = data.draw(st.sampled_from([1, 2, size]))
                j = profiled(j, t, [(n, k) for n in sorted(used)], step_s=data.draw(st.sampled_from([0.3, 0.35, 0.6])))
        jobs.append(j)
    lam = data.draw(st.sampled_from([0.0, 1.0, 3.0]))
    tol = data.draw(st.sampled_from([0.0, 0.01, 0.2]))
    classes = _plan(jobs, cluster, lambda_fairness=lam, mip_rel_gap=0.0, server_tolerance=tol,
                    solver=data.draw(st.sampled_from(["auto", "lp-round", "milp"])))
    event(f"servers told apart: {int(classes.info.get('hops.servers_told_apart', 0)) > 0}")
    assert np.all(_used(cluster, classes) <= size)
    for d in classes.demands:
        assert d.job.spec.allows_gpu_count(d.num_gpus)
    if not classes.demands:
        return
    assert classes.info["hops.objective"] <= classes.info["hops.bound"] * (1 + 1e-7) + 1e-9
    if tol == 0.0:
        # classes of equal answers price every configuration as the estimator does: a relaxation of the exact ILP
        named = _plan(jobs, cluster, lambda_fairness=lam, mip_rel_gap=0.0, server_tolerance=tol,
                      server_classes=False)
        assert named.info["hops.objective"] <= classes.info["hops.bound"] * (1 + 1e-6) + 1e-9
