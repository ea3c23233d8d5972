"""Pollux: virtual nodes, mixed-type fix, fitness, genetic operators, and allocations that respect capacity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimate
from dlsched.policies import build_scheduler, scheduler_tunables
from dlsched.policies.pollux import (
    AllocationProblem,
    PolluxAllocation,
    VirtualCluster,
    fix_mixed_types,
    power_mean,
    speedup_table,
    trim_counts,
)
from dlsched.policies.stages import Plan
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.invariants import check_decision
from dlsched.world.base import World
from testkit import Recorder, StandInEstimator, assert_round_invariants, small_cluster, with_estimator

HETERO = (("t4", 2, 4), ("rtx", 1, 8), ("a100", 1, 8))


class TypeBlindEstimator(StandInEstimator):
    """Type-blind goodput: k**alpha, 5% less per extra node (a Pollux speedup function in miniature)."""

    mode = "none"

    def __init__(self, alpha: float = 0.8, unknown: frozenset[str] = frozenset()) -> None:
        self.alpha, self.unknown, self.updates = alpha, unknown, 0

    def update(self, view):
        self.updates += 1

    def goodput_many(self, job, gpu_type, shapes):
        shapes = np.asarray(shapes, dtype=float).reshape(-1, 2)
        n, k = shapes[:, 0], shapes[:, 1]
        return np.where((n >= 1) & (k >= n), k ** self.alpha / (1 + 0.05 * (n - 1)), 0.0)

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        if job.job_id in self.unknown:
            return None
        g = float(self.goodput_many(job, gpu_type, [[num_nodes, num_gpus]])[0])
        return GoodputEstimate(goodput=g, batch_size=128, throughput_sps=g, efficiency=1.0) if g > 0 else None


def job_view(i: int, placement=(), *, age=120.0, restarts=0, served=0.0, adaptivity=Adaptivity.ADAPTIVE,
             num_gpus=4, gpu_types=()) -> JobView:
    spec = JobSpec(job_id=f"j{i}", submit_time_s=float(i), model="cifar10", num_gpus=num_gpus,
                   adaptivity=adaptivity, gpu_types=tuple(gpu_types))
    return JobView(spec=spec, status=JobStatus.RUNNING if placement else JobStatus.QUEUED,
                   placement=Placement.of(placement), batch_size=None, age_s=age, wait_s=0.0,
                   attained_gpu_s=0.0, attained_service_s=served, restarts=restarts, progress_fraction=0.1,
                   start_time_s=0.0 if placement else None, batch_limits=(128, 4096))


def view_of(cluster, jobs, t=600.0) -> ClusterView:
    return ClusterView(time_s=t, round_s=60.0, cluster=cluster, jobs=list(jobs))


def small_problem(num_jobs=5, capacity=(4, 4, 4, 4), seed=0, base=None, restart=None):
    v = len(capacity)
    table = np.zeros((v + 1, 17))
    for n in range(1, v + 1):
        for r in range(n, min(16, 4 * n) + 1):
            table[n, r] = r ** 0.8 / (1 + 0.05 * (n - 1))
    speed = np.repeat(table[None], num_jobs, axis=0)
    base = np.zeros((num_jobs, v), dtype=np.int64) if base is None else np.asarray(base)
    return AllocationProblem(
        speedup=speed, base=base, capacity=np.array(capacity), cell_max=np.tile(np.array(capacity), (num_jobs, 1)),
        min_replicas=np.ones(num_jobs, dtype=int), max_replicas=np.full(num_jobs, 16),
        restart_factor=np.ones(num_jobs) if restart is None else np.asarray(restart), p=-1.0, scale=1.0,
        max_nodes=v, rng=np.random.default_rng(seed))


# -- virtual nodes and the mixed-type fix ------------------------------------------------------------------
def test_eight_gpu_nodes_become_two_virtual_nodes():
    cluster = small_cluster(HETERO)
    vc = VirtualCluster.of(cluster)
    assert vc.size == 4
    assert vc.num_vnodes == 2 + 2 + 2
    assert list(vc.capacity) == [4] * 6
    assert list(vc.node) == [0, 1, 2, 2, 3, 3]
    rtx = cluster.gpus_of_node(2)
    assert vc.gpus[2] == tuple(rtx[:4]) and vc.gpus[3] == tuple(rtx[4:])
    assert list(vc.state_of(Placement.of([rtx[0], rtx[5], rtx[6]]))) == [0, 0, 1, 2, 0, 0]


def test_mixed_types_keep_the_majority_type_and_ties_go_to_the_more_powerful():
    types = np.array([0, 0, 1, 2])  # index into type_names: least powerful first
    assert list(fix_mixed_types(np.array([3, 0, 2, 0]), types)) == [3, 0, 0, 0]
    assert list(fix_mixed_types(np.array([1, 1, 0, 2]), types)) == [0, 0, 0, 2]  # 2 vs 2: more powerful wins
    assert list(fix_mixed_types(np.array([0, 0, 3, 0]), types)) == [0, 0, 3, 0]


def test_trim_empties_the_smallest_nodes_first():
    assert list(trim_counts(np.array([4, 1, 2]), 2)) == [4, 0, 1]


def test_mixed_allocation_is_fixed_in_the_decision():
    cluster = small_cluster((("t4", 1, 4), ("a100", 1, 4)))
    sched = with_estimator("pollux", TypeBlindEstimator(), generations=0, population=2)
    vc = VirtualCluster.of(cluster)
    jobs = [job_view(0)]
    demands = PolluxAllocation._demands(cluster, vc, jobs, np.array([[2, 2]]))  # 2 t4 + 2 a100: tie -> a100
    assert [(d.gpu_type, d.num_gpus) for d in demands] == [("a100", 2)]
    d = sched.placement.place(view_of(cluster, jobs), Plan(demands))
    assert d.allocations["j0"].placement.gpus == (4, 5)


def test_a_gang_cut_by_the_type_fix_is_topped_up_on_its_type():
    # 2-GPU virtual nodes: t4 (v0), a100 (v1, v2). The type-blind search spreads a rigid 4-GPU gang over
    # t4 and a100; the fix keeps the a100 half, and the gang takes the free a100 virtual node to run whole.
    cluster = small_cluster((("t4", 1, 2), ("a100", 1, 4)))
    vc = VirtualCluster.of(cluster)
    gang = job_view(0, adaptivity=Adaptivity.RIGID, num_gpus=4)
    demands = PolluxAllocation._demands(cluster, vc, [gang], np.array([[2, 2, 0]]))
    assert [(d.gpu_type, d.num_gpus, d.spread) for d in demands] == [("a100", 4, (((2, 3), 2), ((4, 5), 2)))]
    # with the other a100 node held by another job, the gang cannot be whole on a100 and waits
    other = job_view(1)
    demands = PolluxAllocation._demands(cluster, vc, [gang, other], np.array([[2, 2, 0], [0, 0, 2]]))
    assert [(d.job.job_id, d.gpu_type, d.num_gpus) for d in demands] == [("j1", "a100", 2)]
    # an adaptive job keeps only what the fix leaves it: the other type's GPUs idle this round
    demands = PolluxAllocation._demands(cluster, vc, [other], np.array([[2, 2, 0]]))
    assert [(d.gpu_type, d.num_gpus) for d in demands] == [("a100", 2)]


# -- fitness -------------------------------------------------------------------------------------------------
def test_power_mean_is_pollux_harmonic_mean_at_p_minus_one():
    s = np.array([[1.0, 3.0], [0.0, 2.0]])
    expected = 2 / (1 / (1 + 1e-3) + 1 / (3 + 1e-3))
    assert power_mean(s, -1.0)[0] == pytest.approx(expected)
    assert power_mean(s, -1.0)[1] < 0.002  # a job without GPUs dominates the mean
    assert power_mean(np.array([[4.0, 1.0]]), 0.0)[0] == pytest.approx(2.0)


def test_restart_penalty_applies_only_to_moved_jobs():
    base = np.array([[4, 0, 0, 0], [0, 4, 0, 0]])
    prob = small_problem(2, base=base, restart=[0.5, 0.5])
    same = prob.job_speedups(base[None])[0]
    moved = prob.job_speedups(np.array([[[4, 0, 0, 0], [0, 0, 4, 0]]]))[0]
    assert moved[0] == pytest.approx(same[0])
    assert moved[1] == pytest.approx(0.5 * same[1])


def test_restart_factor_follows_pollux_formula():
    cluster = small_cluster((("v100", 1, 4),))
    sched = with_estimator("pollux", TypeBlindEstimator(), generations=0, population=2, restart_delay_s=30.0)
    young, old = job_view(0, age=30.0, restarts=0), job_view(1, age=600.0, restarts=4)
    captured = {}
    real = AllocationProblem.__post_init__

    def spy(self):
        captured["factor"] = np.array(self.restart_factor)
        real(self)

    AllocationProblem.__post_init__ = spy
    try:
        sched.schedule(view_of(cluster, [young, old]))
    finally:
        AllocationProblem.__post_init__ = real
    # jobs are ordered by attained service, then submit time: j0 then j1
    assert captured["factor"] == pytest.approx([30 / 60, (600 - 120) / 630])


def test_speedup_table_is_relative_to_the_base_shape_and_linear_when_unknown():
    def good(shapes):
        return shapes[:, 1].astype(float) ** 0.5

    t = speedup_table(good, (1, 4), 2, 8, 4)
    assert t[1, 4] == pytest.approx(1.0)
    assert t[2, 8] == pytest.approx(np.sqrt(2))
    assert t[1, 5] == 0.0  # 5 GPUs do not fit one 4-GPU node
    lin = speedup_table(lambda s: None, (1, 2), 2, 8, 4)
    assert lin[2, 8] == pytest.approx(4.0)


# -- genetic operators ---------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 7), nodes=st.integers(1, 5))
def test_repair_makes_any_matrix_feasible(seed, jobs, nodes):
    rng = np.random.default_rng(seed)
    cap = rng.integers(1, 9, size=nodes)
    prob = AllocationProblem(
        speedup=np.ones((jobs, nodes + 1, 65)), base=np.zeros((jobs, nodes), dtype=int), capacity=cap,
        cell_max=np.tile(cap, (jobs, 1)) * (rng.random((jobs, nodes)) < 0.8),
        min_replicas=rng.integers(1, 4, size=jobs), max_replicas=rng.integers(1, 12, size=jobs),
        restart_factor=np.ones(jobs), max_nodes=int(rng.integers(1, nodes + 1)), rng=rng)
    states = rng.integers(0, 10, size=(12, jobs, nodes))
    fixed = prob.repair(states)
    assert fixed.shape == states.shape and (fixed >= 0).all()
    assert (fixed.sum(axis=1) <= cap[None, :]).all()  # node capacity
    assert (fixed <= prob.cell_max[None]).all()  # refused types stay empty
    total = fixed.sum(axis=2)
    assert ((total == 0) | (total >= prob.min_replicas[None, :])).all()
    assert (total <= prob.max_replicas[None, :]).all()
    assert (np.count_nonzero(fixed, axis=2) <= prob.max_nodes).all()
    distributed = np.count_nonzero(fixed, axis=2) > 1
    per_node = ((fixed > 0) & distributed[:, :, None]).sum(axis=1)
    assert (per_node <= 1).all()  # at most one distributed job per node
    again = prob.repair(fixed)
    assert (again == fixed).all()


def test_search_finds_room_for_every_job_and_beats_the_current_allocation():
    prob = small_problem(num_jobs=6, seed=1)
    best, pop = prob.search(prob.base[None], population=20, generations=15)
    assert (best.sum(axis=1) >= 1).all()
    assert prob.fitness(best[None])[0] >= prob.fitness(pop).max() - 1e-12
    assert prob.fitness(best[None])[0] > prob.fitness(prob.base[None])[0]
    assert (best.sum(axis=0) <= prob.capacity).all()


def test_search_is_reproducible_with_a_seed():
    a = small_problem(seed=7).search(np.zeros((1, 5, 4), dtype=int), 12, 8)[0]
    b = small_problem(seed=7).search(np.zeros((1, 5, 4), dtype=int), 12, 8)[0]
    assert (a == b).all()


def test_a_lone_job_scales_out():
    prob = small_problem(num_jobs=1)
    best, _ = prob.search(prob.base[None], population=20, generations=30)
    assert best.sum() == 16


# -- the scheduler -----------------------------------------------------------------------------------------
def test_unchanged_allocation_keeps_the_same_gpus():
    cluster = small_cluster((("v100", 2, 4),))
    sched = with_estimator("pollux", TypeBlindEstimator(), population=10, generations=5, explore="false")
    jobs = [job_view(0), job_view(1)]
    d1 = sched.schedule(view_of(cluster, jobs))
    jobs = [job_view(i, d1.allocations[f"j{i}"].placement.gpus, age=10_000.0) for i in range(2)]
    d2 = sched.schedule(view_of(cluster, jobs, t=660.0))
    for j in jobs:
        a = d2.allocations[j.job_id].placement
        if a.num_gpus == j.placement.num_gpus and set(a.gpus) & set(j.placement.gpus):
            assert a == j.placement


def test_exploration_limits_growth_to_twice_the_largest_count_seen():
    cluster = small_cluster((("v100", 4, 4),))
    sched = with_estimator("pollux", TypeBlindEstimator(alpha=1.0), population=20, generations=20)
    d = sched.schedule(view_of(cluster, [job_view(0)]))
    assert d.allocations["j0"].placement.num_gpus == 1
    d = sched.schedule(view_of(cluster, [job_view(0, d.allocations["j0"].placement.gpus)], t=660.0))
    assert d.allocations["j0"].placement.num_gpus <= 2


def test_rigid_jobs_get_all_or_nothing_and_refused_types_stay_unused():
    cluster = small_cluster((("t4", 1, 4), ("a100", 1, 4)))
    sched = with_estimator("pollux", TypeBlindEstimator(), population=10, generations=10)
    jobs = [job_view(0, adaptivity=Adaptivity.RIGID, num_gpus=3), job_view(1, gpu_types=("t4",))]
    d = sched.schedule(view_of(cluster, jobs))
    check_decision(d, cluster, {j.job_id: j.spec for j in jobs}, allows_packing=False, rigid=False,
                   policy="pollux")
    if "j0" in d.allocations:
        assert d.allocations["j0"].placement.num_gpus == 3
    if "j1" in d.allocations:
        assert d.allocations["j1"].placement.gpu_types(cluster) == {"t4"}


def test_registry_builds_pollux_with_tunables_and_rejects_unknown_keys():
    assert scheduler_tunables("pollux")["allocation.p"] == -1.0
    s = build_scheduler("pollux", settings={"p": "-0.5", "pollux.generations": "3"}, seed=4)
    a = s.allocation
    assert isinstance(a, PolluxAllocation)
    assert a.p == -0.5 and a.generations == 3 and a.seed == 4
    with pytest.raises(InputError) as e:
        build_scheduler("pollux", settings={"lambda_": "1"})
    assert e.value.field == "lambda_"
    with pytest.raises(InputError):
        build_scheduler("pollux", ordering="las")  # Pollux ranks jobs through its fitness
    with pytest.raises(InputError):
        build_scheduler("pollux", placement="packed-sticky", settings={"speedup_base": "median"})
    with pytest.raises(InputError) as e:
        build_scheduler("pollux", settings={"batch_search": "coarse"})
    assert e.value.field == "batch_search"
    a = build_scheduler("pollux", settings={"speedup_base": "fair-spread", "batch_search": "dense"}).allocation
    assert a.speedup_base == "fair-spread" and a.require_estimator().batch_search == "dense"
    with pytest.raises(InputError) as e:
        build_scheduler("fifo", placement="pollux")  # nobody planned per-node counts
    assert "pollux" in str(e.value) and "gang" in str(e.value)


# -- every round of a simulation respects capacity (property) ------------------------------------------------
@st.composite
def clusters(draw):
    types = draw(st.lists(st.sampled_from(["t4", "rtx", "a100"]), min_size=1, max_size=3, unique=True))
    return small_cluster(tuple((t, draw(st.integers(1, 2)), draw(st.sampled_from([2, 4, 8]))) for t in types))


@st.composite
def traces(draw, cluster):
    n = draw(st.integers(1, 8))
    specs = []
    for i in range(n):
        rigid = draw(st.booleans()) and draw(st.booleans())
        k = draw(st.integers(1, min(8, cluster.max_gpus_single_type())))
        specs.append(JobSpec(job_id=f"j{i}", submit_time_s=draw(st.floats(0, 900)),
                             model=draw(st.sampled_from(["cifar10", "ncf", "deepspeech2"])), num_gpus=k,
                             adaptivity=Adaptivity.RIGID if rigid else Adaptivity.ADAPTIVE))
    return specs




@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 3))
def test_pollux_allocations_respect_capacity_every_round(data, seed):
    cluster = data.draw(clusters())
    specs = data.draw(traces(cluster))
    rec = Recorder(build_scheduler("pollux", settings={"population": "10", "generations": "4"}, seed=seed))
    Engine(cluster, specs, rec, World(cluster, seed=seed), SimConfig(round_s=60.0, max_time_s=1800.0)).run()
    assert_round_invariants(cluster, rec.log, specs, exact_gangs=False)
