"""Hops's planner: service window, configuration generation, the priority-weighted ILP and the latency-ratio queue."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimate
from dlsched.policies import build_scheduler
from dlsched.policies.hops.allocation import (
    HopsAllocation,
    priority_weights,
    sensitivity_adjustment,
    service_window,
)
from dlsched.policies.hops.configs import type_configs
from dlsched.policies.hops.ordering import LatencyRatio, expected_runtime_s, latency_ratio
from testkit import StandInEstimator, small_cluster


def job(job_id: str, counts=(1, 2, 4), *, wait=0.0, duration=3600.0, submit=0.0, placement=Placement.empty(),
        gpu_types=()) -> JobView:
    spec = JobSpec(job_id=job_id, submit_time_s=submit, model="m", num_gpus=counts[(len(counts) - 1) // 2],
                   adaptivity=Adaptivity.STRONG_SCALING if len(counts) > 1 else Adaptivity.RIGID,
                   duration_s=duration, gpu_counts=tuple(counts), gpu_types=tuple(gpu_types), min_gpus=min(counts),
                   max_gpus=max(counts))
    return JobView(spec=spec, status=JobStatus.RUNNING if placement else JobStatus.QUEUED, placement=placement,
                   batch_size=None, age_s=wait, wait_s=wait, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0,
                   progress_fraction=0.0, start_time_s=None, estimated_duration_s=duration)


class TableEstimator(StandInEstimator):
    """Goodput per (job, type, GPUs) from a table; spanning servers costs ``spread_cost`` per extra server."""

    def __init__(self, per_gpu: dict[tuple[str, str], float], spread_cost: float = 0.0) -> None:
        self.per_gpu, self.spread_cost = per_gpu, spread_cost

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        rate = self.per_gpu.get((job.job_id, gpu_type), 0.0)
        if rate <= 0 or not job.spec.allows_gpu_count(num_gpus):
            return None
        g = rate * num_gpus / (1.0 + self.spread_cost * (num_nodes - 1))
        return GoodputEstimate(goodput=g, batch_size=1, throughput_sps=g, efficiency=1.0)


def planner(estimator, **kw) -> HopsAllocation:
    a = HopsAllocation(**kw)
    a.attach_estimator(estimator)
    return a


# -- service window -----------------------------------------------------------------------------------------
def test_window_ends_at_the_job_whose_minimum_reaches_the_cluster_size():
    q = [job("a", (4, 8)), job("b", (8,)), job("c", (2, 4)), job("d", (1,))]
    assert [j.job_id for j in service_window(q, 12)] == ["a", "b"]  # 4 + 8 = 12 reaches 12: b is the boundary
    assert [j.job_id for j in service_window(q, 13)] == ["a", "b", "c"]  # 14 passes 13 at c
    assert [j.job_id for j in service_window(q, 100)] == ["a", "b", "c", "d"]  # the whole queue fits


@given(mins=st.lists(st.integers(1, 16), max_size=30), capacity=st.integers(1, 200))
def test_window_is_the_shortest_head_whose_minimums_reach_capacity(mins, capacity):
    q = [job(f"j{i}", (m,)) for i, m in enumerate(mins)]
    w = service_window(q, capacity)
    assert w == q[:len(w)]
    assert sum(mins[:len(w)]) >= capacity or len(w) == len(q)
    assert len(w) == 0 or sum(mins[:len(w) - 1]) < capacity


# -- configurations -------------------------------------------------------------------------------------------
def test_aggregated_on_every_server_with_room_distributed_only_for_low_sensitivity():
    idle = [(0, 8), (1, 3), (2, 5)]
    agg = type_configs("t", idle, [2, 4, 8], distributed=False, server_size=8)
    assert {c.servers for c in agg} == {((0, 2),), ((1, 2),), ((2, 2),), ((0, 4),), ((2, 4),), ((0, 8),)}
    dist = type_configs("t", idle, [2, 4, 8], distributed=True, server_size=8)
    spread = {c.servers for c in dist if c.num_nodes > 1}
    # from server 1: 3 + 1 covers 4, 3 + 5 covers 8; from server 0 everything fits on server 0 alone
    assert spread == {((1, 3), (2, 1)), ((1, 3), (2, 5))}


def test_sensitive_jobs_spread_only_what_no_server_holds():
    idle = [(0, 8), (1, 8)]
    cfgs = type_configs("t", idle, [4, 12], distributed=False, server_size=8)
    assert {c.servers for c in cfgs} == {((0, 4),), ((1, 4),), ((0, 8), (1, 4))}


@given(idle=st.lists(st.integers(0, 8), min_size=1, max_size=12),
       reqs=st.sets(st.integers(1, 16), min_size=1, max_size=8), distributed=st.booleans())
def test_configurations_fit_the_idle_gpus_and_stay_linear_in_servers(idle, reqs, distributed):
    servers = list(enumerate(idle))
    cfgs = type_configs("t", servers, sorted(reqs), distributed=distributed, server_size=8)
    free = dict(servers)
    for c in cfgs:
        assert c.num_gpus in reqs
        assert all(0 < k <= free[n] for n, k in c.servers)
        if c.num_nodes > 1:  # filled as much as possible: every server but the last gives all it has
            assert all(k == free[n] for n, k in c.servers[:-1])
    assert len(cfgs) <= len(reqs) * 2 * len(servers)


# -- the priority-weighted ILP ---------------------------------------------------------------------------
def _cluster_and_jobs():
    cluster = small_cluster((("v100", 2, 4), ("t4", 1, 4)))
    jobs = [job("a", (1, 2, 4), wait=1440), job("b", (2, 4), wait=720), job("c", (1, 4), wait=360),
            job("d", (4,), wait=2880)]
    per_gpu = {("a", "v100"): 3.0, ("a", "t4"): 1.0, ("b", "v100"): 1.2, ("b", "t4"): 1.0,
               ("c", "v100"): 2.0, ("c", "t4"): 1.0, ("d", "v100"): 1.1, ("d", "t4"): 1.0}
    return cluster, jobs, TableEstimator(per_gpu, spread_cost=0.5)


def _gain(est, cluster, j, gpu_type, nodes, gpus):
    """Normalised gain of one shape, the way the planner computes it (the job's slowest option is 1)."""
    shapes = [(t, n, k) for t in cluster.type_names for k in j.spec.requirement_set()
              for n in (1, 2) if est.estimate(j, t, n, k) is not None]
    lo = min(est.estimate(j, t, n, k).goodput for t, n, k in shapes)
    return est.estimate(j, gpu_type, nodes, gpus).goodput / lo


def _brute_force_best(cluster, jobs, est, weights):
    """Best weighted gain over every assignment of shapes (a tiny cluster: 2x4 v100 + 1x4 t4)."""
    options = []
    for j in jobs:
        opts = [None]
        for t in cluster.type_names:
            for k in j.spec.requirement_set():
                for n in (1, 2):
                    if est.estimate(j, t, n, k) is not None and k >= n and (n == 1 or t == "v100"):
                        opts.append((t, n, k))
        options.append(opts)
    best = 0.0
    for combo in itertools.product(*options):
        v100 = [(n, k) for o in combo if o and o[0] == "v100" for _, n, k in [o]]
        t4 = sum(o[2] for o in combo if o and o[0] == "t4")
        if t4 > 4 or not _fits_two_servers(v100, 4):
            continue
        value = sum(w * _gain(est, cluster, j, *o) for j, w, o in zip(jobs, weights, combo, strict=True) if o)
        best = max(best, value)
    return best


def _fits_two_servers(shapes, size):
    """Whether (nodes, GPUs) gangs fit two servers of ``size`` GPUs (a spread gang fills one server first)."""
    for assign in itertools.product((0, 1), repeat=len(shapes)):
        free = [size, size]
        ok = True
        for (n, k), s in zip(shapes, assign, strict=True):
            if n == 1:
                ok &= free[s] >= k
                free[s] -= k
            else:
                first = min(free[s], k - 1)
                ok &= first >= 1 and free[1 - s] >= k - first
                free[s] -= first
                free[1 - s] -= k - first
        if ok and min(free) >= 0:
            return True
    return False


def _plan_value(cluster, plan, est, weights_by_id):
    return sum(weights_by_id[d.job.job_id] * _gain(est, cluster, d.job, d.gpu_type, d.num_nodes, d.num_gpus)
               for d in plan.demands)


def test_lambda_zero_maximises_normalised_throughput():
    cluster, jobs, est = _cluster_and_jobs()
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    plan = planner(est, lambda_fairness=0.0, mip_rel_gap=0.0).allocate(view, jobs)
    ones = {j.job_id: 1.0 for j in jobs}
    assert _plan_value(cluster, plan, est, ones) == pytest.approx(_brute_force_best(cluster, jobs, est, [1.0] * 4))


def test_large_lambda_follows_the_greedy_queue_order():
    cluster, jobs, est = _cluster_and_jobs()
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    ordered = LatencyRatio().order(view, jobs)
    assert [j.job_id for j in ordered] == ["d", "a", "b", "c"]  # latency ratios 0.8, 0.47, 0.3, 0.25
    # at lambda 8 the weights fall 74x, 34x and 4x down the queue: each job ahead outweighs what the ones
    # behind could gain with its GPUs
    plan = planner(est, lambda_fairness=8.0, mip_rel_gap=0.0).allocate(view, ordered)
    got = {d.job.job_id: (d.gpu_type, d.num_gpus) for d in plan.demands}
    # greedy: d takes 4 v100 on one server (its only count), a its best, 4 v100 on the other server; b and c
    # then find only the t4 server: b (ahead of c) takes its best there, 4 t4, and c gets nothing
    assert got == {"d": ("v100", 4), "a": ("v100", 4), "b": ("t4", 4)}
    lam0 = planner(est, lambda_fairness=0.0).allocate(view, ordered)
    assert {d.job.job_id for d in lam0.demands} != set(got)  # throughput alone would pick differently


def test_plan_never_overcommits_a_server_and_names_exact_servers():
    cluster, jobs, est = _cluster_and_jobs()
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    plan = planner(est).allocate(view, LatencyRatio().order(view, jobs))
    used = np.zeros(len(cluster.nodes), dtype=int)
    for d in plan.demands:
        assert sum(k for _, k in d.spread) == d.num_gpus and len(d.spread) == d.num_nodes
        for gpus, k in d.spread:
            used[int(cluster.gpu_node[gpus[0]])] += k
    assert np.all(used <= [n.num_gpus for n in cluster.nodes])


def test_bias_rule_and_scaling():
    assert priority_weights(np.array([0.5, 2.0]), 1.0).tolist() == pytest.approx([0.25, 1.0])
    w = priority_weights(np.array([0.0, 1.0]), 1.0)
    assert w.tolist() == pytest.approx([0.01 / 1.01, 1.0])  # bias |min| + 0.01 keeps the zero job in play
    assert priority_weights(np.array([0.3, 0.6]), 0.0).tolist() == [1.0, 1.0]
    huge = priority_weights(np.array([0.1, 0.9]), 100.0)  # 9**100 overflows nothing: scaled, then floored
    assert huge.tolist() == [pytest.approx(1e-6), 1.0]


# -- latency ratio -----------------------------------------------------------------------------------------------
def test_expected_runtime_weighs_types_by_their_share_and_the_average_requirement():
    cluster = small_cluster((("v100", 1, 8), ("t4", 1, 8)))
    j = job("a", (2, 4, 6), duration=3600.0)  # num_gpus 4 = the average requirement
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=[j])
    assert expected_runtime_s(view, j) == pytest.approx(3600.0)  # no reports: every type alike
    j2 = job("b", (2, 4, 12), duration=3600.0)  # R_avg 6 > num_gpus 4: expected faster than the request
    assert expected_runtime_s(view, j2) == pytest.approx(3600.0 * 4 / 6)


def test_short_jobs_overtake_long_ones_that_waited_as_long():
    cluster = small_cluster()
    short, long_ = job("s", (1,), wait=600, duration=1200), job("l", (1,), wait=600, duration=36000, submit=-1)
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=[long_, short])
    assert [j.job_id for j in LatencyRatio().order(view, [long_, short])] == ["s", "l"]
    assert latency_ratio(view, short) == pytest.approx(0.5)


def test_the_latency_ratio_counts_the_wait_in_the_waiting_queue_not_for_a_profile():
    """Section 3.1: a job enters the waiting queue when its profile ends; the time it waited for GPUs to be
    profiled on is not what its priority weighs (the simulator hands the queue's wait over in the view)."""
    cluster = small_cluster()
    a = job("a", (1,), wait=900, duration=1000)
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=[a])
    assert latency_ratio(view, a) == pytest.approx(0.9)  # no queue wait known: the wait since submission
    a.queue_wait_s = 300.0
    assert latency_ratio(view, a) == pytest.approx(0.3)


def test_the_engine_hands_over_the_wait_from_the_end_of_the_first_profile():
    from dlsched.sim.config import RunConfig
    from dlsched.sim.run import simulate

    seen: dict[str, list[tuple[float | None, float]]] = {}

    def observe(view, decision) -> None:
        for j in view.jobs:
            seen.setdefault(j.job_id, []).append((j.queue_wait_s, j.wait_s))

    records = simulate(RunConfig(policy="hops", cluster="hops-64", trace="hops-table3:seed=1", jobs=4),
                       on_decision=observe)
    assert len(seen) == 4
    for job_id, views in seen.items():
        assert views[0][0] is None, job_id  # submitted, not yet profiled: not in the waiting queue
        assert any(q is not None for q, _ in views), job_id  # profiled, then planned from the waiting queue
        assert all(q is None or 0.0 <= q <= w + 1e-9 for q, w in views), job_id
    waited = {r.job_id: r.queue_wait_s for r in records.jobs}
    for job_id, views in seen.items():  # what the planner was told never exceeds what the record says
        assert max((q for q, _ in views if q is not None), default=0.0) <= waited[job_id] + 1e-9


def test_priorities_refresh_every_refresh_s():
    cluster = small_cluster()
    lr = LatencyRatio(refresh_s=30.0)
    a = job("a", (1,), wait=100, duration=1000)
    view0 = ClusterView(time_s=0.0, round_s=10.0, cluster=cluster, jobs=[a])
    assert lr.priority(view0, a) == pytest.approx(0.1)
    a.wait_s = 500
    assert lr.priority(ClusterView(time_s=20.0, round_s=10.0, cluster=cluster, jobs=[a]), a) == pytest.approx(0.1)
    assert lr.priority(ClusterView(time_s=30.0, round_s=10.0, cluster=cluster, jobs=[a]), a) == pytest.approx(0.5)


# -- registry ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["sia", "gavel"])
def test_sia_and_gavel_take_the_latency_ratio_queue_but_no_other(policy):
    sched = build_scheduler(policy, ordering="latency-ratio")
    assert sched.stages()["ordering"] == "latency-ratio"
    with pytest.raises(InputError, match="cannot steer"):
        build_scheduler(policy, ordering="las")


def test_hops_preset_and_its_tunables():
    sched = build_scheduler("hops", settings={"lambda_fairness": "0", "service_window": "off"})
    assert sched.stages() == {"admission": "all", "ordering": "latency-ratio", "allocation": "hops",
                              "placement": "hops", "coordination": "none"}
    assert sched.allocation.lambda_fairness == 0.0 and not sched.allocation.service_window
    with pytest.raises(InputError, match="lambda_fairness"):
        build_scheduler("hops", settings={"lambda_fairness": "-1"})


@settings(max_examples=25, deadline=None)
@given(waits=st.lists(st.floats(0, 1e5), min_size=1, max_size=6), lam=st.sampled_from([0.0, 1.0, 3.0]))
def test_every_plan_respects_requirements_and_capacity(waits, lam):
    cluster = small_cluster((("v100", 2, 4), ("t4", 2, 4)))
    counts = [(1, 2), (2, 4), (4,), (1, 3, 6), (8,), (2, 5)]
    jobs = [job(f"j{i}", counts[i % len(counts)], wait=w) for i, w in enumerate(waits)]
    est = TableEstimator({(j.job_id, t): 1.0 + i % 3 for i, j in enumerate(jobs) for t in ("v100", "t4")},
                         spread_cost=0.3)
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    plan = planner(est, lambda_fairness=lam).allocate(view, LatencyRatio().order(view, jobs))
    used = np.zeros(len(cluster.nodes), dtype=int)
    for d in plan.demands:
        assert d.job.spec.allows_gpu_count(d.num_gpus)
        for gpus, k in d.spread:
            used[int(cluster.gpu_node[gpus[0]])] += k
    assert np.all(used <= 4)


# -- sensitivity adjustment and plans within a round -----------------------------------------------------------
def test_sensitivity_adjustment_brings_in_exactly_the_jobs_the_rule_names():
    q = [job(f"q{i}", (m,)) for i, m in enumerate([2, 2, 1, 4, 1, 1, 3, 1])]
    rho = [2.0, 1.8, 1.9, 1.0, 1.5, 1.1, 1.0, 1.0]  # queue mean 1.4125; window (first 2) mean 1.9
    # past the boundary: q2 (1.9) too sensitive; q3 (1.0) low but needs 4 GPUs, not less than the 4 idle;
    # q4 (1.5) too sensitive; q5 (1.1, needs 1) joins: set mean (2.0 + 1.8 + 1.1) / 3 = 1.63, still high;
    # q6 (1.0, needs 3 < 4) joins: mean 1.475, still high; q7 (1.0, 1 GPU) joins: mean 1.38 <= 1.4125, stop
    assert sensitivity_adjustment(q, 2, rho, 4) == [0, 1, 5, 6, 7]
    # a window already no more sensitive than the queue is left alone
    calm = [1.0, 1.0, 2.0, 2.0, 1.5, 1.5, 1.5, 1.0]  # window mean 1.0 below the queue's 1.4375
    assert sensitivity_adjustment(q, 2, calm, 4) == [0, 1]
    assert sensitivity_adjustment(q, 2, [1.0] * 8, 4) == [0, 1]


def test_a_plan_inside_the_round_keeps_running_jobs_and_fills_idle_gpus_only():
    cluster = small_cluster((("v100", 2, 4),))
    running = job("r", (4,), placement=Placement.of(range(4)))
    waiting = [job("w1", (2, 4), wait=100), job("w2", (2,), wait=50)]
    est = TableEstimator({(j.job_id, "v100"): 1.0 for j in [running, *waiting]})
    view = ClusterView(time_s=30.0, round_s=60.0, cluster=cluster, jobs=[running, *waiting])
    plan = planner(est).allocate_more(view, [running, *waiting])
    by_id = {d.job.job_id: d for d in plan.demands}
    assert by_id["r"].pinned and by_id["r"].num_gpus == 4
    new = [d for d in plan.demands if not d.pinned]
    assert all(gpus[0] >= 4 for d in new for gpus, _ in d.spread)  # only server 1's GPUs were idle
    assert sum(d.num_gpus for d in new) <= 4 and "w1" in by_id
    off = planner(est, multi_plan=False).allocate_more(view, [running, *waiting])
    assert [d.job.job_id for d in off.demands] == ["r"]


def test_under_another_ordering_the_ilp_weighs_queue_positions():
    cluster, jobs, est = _cluster_and_jobs()
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs)
    a = planner(est, ordering="las")
    assert a.priorities(view, jobs).tolist() == pytest.approx([1.0, 0.75, 0.5, 0.25])
    lr = planner(est).priorities(view, jobs)
    # the latency ratios themselves: wait over eq. 9's age, the estimate scaled by num_gpus / R_avg
    # (a: 1440 s over 3600 * 2 / (7/3); b: 720 over 3600 * 2 / 3; c: 360 over 3600 / 2.5; d: 2880 over 3600)
    assert lr.tolist() == pytest.approx([1440 / (7200 * 3 / 7), 720 / 2400, 360 / 1440, 0.8])
    assert build_scheduler("hops", ordering="las").allocation.ordering == "las"


class SpreadCostEstimator(StandInEstimator):
    """Per-GPU goodput 1 on every type for every count; spanning servers costs the job's own ``cost`` per extra
    server, so its placement sensitivity (eq. 10) is ``1 + cost``."""

    def __init__(self, cost: dict[str, float]) -> None:
        self.cost = cost

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        g = num_gpus / (1.0 + self.cost[job.job_id] * (num_nodes - 1))
        return GoodputEstimate(goodput=g, batch_size=1, throughput_sps=g, efficiency=1.0)


def _fragmenting_round():
    """Two 4-GPU servers; three sensitive rigid 3-GPU jobs fill the window (3 + 3 + 3 reaches 8), two fit, and
    one GPU is left on each server; two insensitive 1-GPU jobs wait beyond the window."""
    cluster = small_cluster((("v100", 2, 4),))
    jobs = [job("a", (3,), wait=900), job("b", (3,), wait=800), job("c", (3,), wait=700),
            job("d", (1,), wait=60), job("e", (1,), wait=50)]
    est = SpreadCostEstimator({"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0, "e": 0.0})
    return ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs), jobs, est


def test_gpus_the_first_plan_leaves_idle_are_planned_at_once_for_fragments():
    view, jobs, est = _fragmenting_round()
    plan = planner(est).allocate(view, jobs)
    got = {d.job.job_id: d.num_gpus for d in plan.demands}
    # the first plan places a and b (c does not fit in what is left, and may not spread); the plan for the two
    # fragments that follows it brings d and e in by the sensitivity adjustment, and no GPU stays idle
    assert got == {"a": 3, "b": 3, "d": 1, "e": 1}
    used = np.zeros(2, dtype=int)
    for d in plan.demands:
        for gpus, k in d.spread:
            used[int(view.cluster.gpu_node[gpus[0]])] += k
    assert used.tolist() == [4, 4]
    assert plan.info["hops.filled"] == 2
    # the earlier reading (extra plans only at completions), and one plan per round, leave both GPUs idle
    for kw in ({"fill_at_round_start": False}, {"multi_plan": False}):
        assert {d.job.job_id for d in planner(est, **kw).allocate(view, jobs).demands} == {"a", "b"}
    # without the sensitivity adjustment the fragment plan's window holds c alone, which cannot use them
    assert {d.job.job_id for d in planner(est, sensitivity_adjustment=False).allocate(view, jobs).demands} == {"a", "b"}


@pytest.mark.parametrize(("keep_bonus", "moves"), [(1e-6, True), (None, False)])
def test_a_running_job_moves_only_for_a_gain_above_the_keep_bonus(keep_bonus, moves):
    # estimates 3% apart are within the noise of what jobs report: with a 5% bonus the job keeps its GPUs
    cluster = small_cluster((("t4", 1, 4), ("v100", 1, 4)))
    running = job("r", (4,), placement=Placement.of(range(4)), wait=10.0)
    est = TableEstimator({("r", "t4"): 1.0, ("r", "v100"): 1.03})
    view = ClusterView(time_s=60.0, round_s=60.0, cluster=cluster, jobs=[running])
    settings = {} if keep_bonus is None else {"keep_bonus": keep_bonus}  # None: the default, 5%
    (demand,) = planner(est, **settings).allocate(view, [running]).demands
    assert demand.gpu_type == ("v100" if moves else "t4")
    assert cluster.gpu_type_of[0] == "t4"
