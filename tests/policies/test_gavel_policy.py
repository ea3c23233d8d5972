"""Gavel: the LP policies on hand-made examples, its round mechanism, and leases that respect capacity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimate
from dlsched.policies import build_scheduler, scheduler_tunables
from dlsched.policies.gavel import GavelAllocation, rigid_view
from dlsched.policies.gavel.lp import LP_METHODS, OBJECTIVES, normalized, solve_allocation
from dlsched.policies.stages import StagedScheduler
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.invariants import check_decision
from dlsched.world.base import World
from testkit import Recorder, StandInEstimator, assert_round_invariants, small_cluster, with_estimator


class StandInThroughputs(StandInEstimator):
    """Per-type throughput ``speed[type] * k``, known for every job (as Gavel assumes)."""

    def __init__(self, speed: dict[str, float]) -> None:
        self.speed = speed

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        s = self.speed.get(gpu_type, 0.0)
        if s <= 0:
            return None
        return GoodputEstimate(goodput=s * num_gpus, batch_size=job.spec.batch_size or 0,
                               throughput_sps=s * num_gpus, efficiency=1.0)


def job_view(i, k, placement=(), *, profiled=("t4", "v100"), age=100.0, submit=None) -> JobView:
    spec = JobSpec(job_id=f"j{i}", submit_time_s=float(i if submit is None else submit), model="cifar10",
                   num_gpus=k, batch_size=256, adaptivity=Adaptivity.ADAPTIVE)
    return JobView(spec=spec, status=JobStatus.RUNNING if placement else JobStatus.QUEUED,
                   placement=Placement.of(placement), batch_size=256 if placement else None, age_s=age,
                   wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                   start_time_s=None, estimated_duration_s=3600.0, profiled_types=tuple(profiled),
                   batch_limits=(128, 4096))


def view_of(cluster, jobs, t=0.0, round_s=60.0) -> ClusterView:
    return ClusterView(time_s=t, round_s=round_s, cluster=cluster, jobs=list(jobs))


# -- the LPs ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", LP_METHODS)
def test_max_sum_throughput_two_types_known_optimum(method):
    # job A: 4 on the fast type, 1 on the slow; job B: 2 and 1. One GPU of each type.
    # Normalised: A = (0.8, 0.2), B = (2/3, 1/3); A-fast + B-slow = 0.8 + 1/3 beats B-fast + A-slow = 0.867.
    tput = np.array([[4.0, 1.0], [2.0, 1.0]])
    x = solve_allocation("max-sum-throughput", tput, np.ones(2), np.array([1, 1]), method=method)
    assert x == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]), abs=1e-6)
    assert float((normalized(tput) * x).sum()) == pytest.approx(0.8 + 1 / 3, abs=1e-6)


@pytest.mark.parametrize("method", LP_METHODS)
def test_max_sum_throughput_respects_gang_size(method):
    # A needs 2 GPUs and fits only the 2-GPU fast type; B (1 GPU) runs anywhere: fast 2, slow 1.
    # Best: A on fast all the time (1), B on slow all the time (1/3): 4/3 > B fast + A half (7/6).
    tput = np.array([[3.0, 0.0], [2.0, 1.0]])
    x = solve_allocation("max-sum-throughput", tput, np.array([2, 1]), np.array([2, 1]), method=method)
    assert x == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]), abs=1e-6)


def test_interior_point_shares_time_between_equivalent_jobs():
    x = solve_allocation("max-sum-throughput", np.ones((4, 1)), np.ones(4), np.array([2]), method="ipm")
    assert x.ravel() == pytest.approx([0.5] * 4, abs=1e-4)
    v = solve_allocation("max-sum-throughput", np.ones((4, 1)), np.ones(4), np.array([2]), method="simplex")
    assert sorted(v.ravel().round(6)) == [0.0, 0.0, 1.0, 1.0]


def test_max_min_and_finish_time_fairness_split_a_contended_type_evenly():
    tput = np.ones((2, 1))
    mm = solve_allocation("max-min", tput, np.ones(2), np.array([1]))
    assert mm.ravel() == pytest.approx([0.5, 0.5], abs=1e-4)
    ftf = solve_allocation("finish-time-fairness", tput, np.ones(2), np.array([1]), ages_s=np.zeros(2),
                           remaining=np.ones(2))
    assert ftf.ravel() == pytest.approx([0.5, 0.5], abs=1e-3)


def _max_rho(x, tput, scale, capacity, ages, remaining):
    from dlsched.policies.gavel.lp import isolated_throughputs

    t = normalized(tput)
    iso = isolated_throughputs(t, np.asarray(scale, float), np.asarray(capacity, float))
    rate = (t * x).sum(axis=1)
    with np.errstate(divide="ignore"):
        return np.max((ages + remaining / rate) / (ages + remaining / iso))


def test_finish_time_fairness_places_each_job_where_it_is_not_worse_off():
    # A runs equally fast on both types, B only on type 0: A must take type 1 and leave type 0 to B
    tput = np.array([[1.0, 1.0], [1.0, 0.0]])
    x = solve_allocation("finish-time-fairness", tput, np.ones(2), np.array([1, 1]), ages_s=np.zeros(2),
                         remaining=np.ones(2))
    assert x == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-3)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 8))
def test_finish_time_fairness_is_no_worse_than_max_sum_on_its_own_objective(seed, jobs):
    rng = np.random.default_rng(seed)
    tput = rng.random((jobs, 2)) + 0.05
    scale, capacity = np.ones(jobs), np.array([2, 2])
    ages, remaining = rng.random(jobs) * 3600, rng.random(jobs) * 3600 + 60
    ftf = solve_allocation("finish-time-fairness", tput, scale, capacity, ages_s=ages, remaining=remaining)
    msum = solve_allocation("max-sum-throughput", tput, scale, capacity)
    assert _max_rho(ftf, tput, scale, capacity, ages, remaining) \
        <= _max_rho(msum, tput, scale, capacity, ages, remaining) * (1 + 5e-3)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 12), types=st.integers(1, 3),
       objective=st.sampled_from(OBJECTIVES), method=st.sampled_from(LP_METHODS))
def test_every_policy_respects_gavels_base_constraints(seed, jobs, types, objective, method):
    rng = np.random.default_rng(seed)
    tput = rng.random((jobs, types)) * (rng.random((jobs, types)) < 0.85)
    scale = rng.choice([1, 2, 4, 8], size=jobs)
    capacity = rng.integers(1, 17, size=types)
    tput[scale[:, None] > capacity[None, :]] = 0.0  # a gang larger than a type cannot run there
    x = solve_allocation(objective, tput, scale, capacity, ages_s=rng.random(jobs) * 7200,
                         remaining=rng.random(jobs) * 7200 + 1, method=method)
    assert x.shape == tput.shape
    assert (x >= 0).all() and (x <= 1 + 1e-9).all()
    assert (x.sum(axis=1) <= 1 + 1e-6).all()
    assert ((x * scale[:, None]).sum(axis=0) <= capacity + 1e-6).all()
    assert (x[tput <= 0] == 0).all()


def test_unknown_objective_is_an_input_error():
    with pytest.raises(InputError) as e:
        build_scheduler("gavel", settings={"objective": "min-jct"})
    assert e.value.field == "objective"


# -- the mechanism --------------------------------------------------------------------------------------------
def gavel(objective="max-sum-throughput", lease_s=360.0, speed=None, **kw) -> StagedScheduler:
    return with_estimator("gavel", StandInThroughputs(speed or {"t4": 1.0, "v100": 3.0}), objective=objective,
                          lease_s=lease_s, **kw)


def test_fast_type_goes_to_the_job_that_gains_most_and_gangs_are_whole():
    cluster = small_cluster((("t4", 1, 4), ("v100", 1, 4)))
    sched = gavel(speed={"t4": 1.0, "v100": 2.0})
    jobs = [job_view(0, 4), job_view(1, 2), job_view(2, 2)]
    d = sched.schedule(view_of(cluster, jobs))
    check_decision(d, cluster, {j.job_id: j.spec for j in jobs}, allows_packing=False, rigid=True,
                   policy="gavel")
    for job_id, a in d.allocations.items():
        assert a.batch_size == 256
        assert len(a.placement) == {"j0": 4, "j1": 2, "j2": 2}[job_id]
    assert sum(len(a.placement) for a in d.allocations.values()) == 8


def test_leases_hold_for_the_whole_round_and_time_shares_rotate():
    cluster = small_cluster((("v100", 1, 2),))
    sched = gavel(speed={"v100": 1.0})
    jobs = [job_view(i, 2, profiled=("v100",)) for i in range(2)]
    first = sched.schedule(view_of(cluster, jobs, t=0.0))
    (owner,) = first.allocations
    placed = [job_view(i, 2, first.allocations[f"j{i}"].placement.gpus if f"j{i}" == owner else (),
                       profiled=("v100",)) for i in range(2)]
    for t in (60.0, 120.0, 300.0):  # inside the lease: nothing moves
        d = sched.schedule(view_of(cluster, placed, t=t))
        assert set(d.allocations) == {owner}
    d = sched.schedule(view_of(cluster, placed, t=360.0))  # new round: the other job's turn
    assert set(d.allocations) == {"j0", "j1"} - {owner}


def test_round_length_equal_to_the_lease_rescheduled_every_round():
    cluster = small_cluster((("v100", 1, 2),))
    sched = gavel(speed={"v100": 1.0}, lease_s=120.0)
    jobs = [job_view(i, 2, profiled=("v100",)) for i in range(2)]
    a = sched.schedule(view_of(cluster, jobs, t=0.0, round_s=120.0))
    b = sched.schedule(view_of(cluster, jobs, t=120.0, round_s=120.0))
    assert set(a.allocations) != set(b.allocations)


def test_new_jobs_are_profiled_on_one_gpu_per_type_before_they_run():
    cluster = small_cluster((("t4", 1, 4), ("v100", 1, 4)))
    sched = gavel()
    jobs = [job_view(0, 2, profiled=())]
    d = sched.schedule(view_of(cluster, jobs))
    assert "j0" not in d.allocations
    assert d.profiles["j0"].gpu_types(cluster) == {"t4", "v100"}
    assert len(d.profiles["j0"]) == 2
    check_decision(d, cluster, {"j0": jobs[0].spec}, allows_packing=False, rigid=True, policy="gavel")


def test_rigid_view_keeps_the_request():
    j = rigid_view(job_view(0, 4))
    assert j.spec.adaptivity is Adaptivity.RIGID and j.spec.num_gpus == 4 and j.spec.batch_size == 256


def test_registry_builds_gavel_and_rejects_bad_settings():
    assert scheduler_tunables("gavel")["allocation.objective"] == "max-sum-throughput"
    assert scheduler_tunables("gavel")["allocation.lease_s"] == 360.0
    s = build_scheduler("gavel", settings={"objective": "max-min", "gavel.lease_s": "120"})
    assert isinstance(s.allocation, GavelAllocation) and s.traits.rigid
    assert s.allocation.objective == "max-min" and s.allocation.lease_s == 120.0
    with pytest.raises(InputError) as e:
        build_scheduler("gavel", settings={"p": "-1"})
    assert e.value.field == "p"
    with pytest.raises(InputError):
        build_scheduler("gavel", settings={"objective": "fastest"})
    with pytest.raises(InputError):
        build_scheduler("gavel", ordering="las")  # Gavel ranks jobs through its LP
    with pytest.raises(InputError):
        build_scheduler("gavel", settings={"lease_s": "nan"})


# -- every round of a simulation respects capacity (property) ------------------------------------------------
@st.composite
def clusters(draw):
    types = draw(st.lists(st.sampled_from(["t4", "rtx", "a100"]), min_size=1, max_size=3, unique=True))
    return small_cluster(tuple((t, draw(st.integers(1, 2)), draw(st.sampled_from([1, 2, 4, 8]))) for t in types))


@st.composite
def traces(draw, cluster):
    n = draw(st.integers(1, 8))
    specs = []
    for i in range(n):
        k = draw(st.integers(1, cluster.max_gpus_single_type()))
        if draw(st.booleans()):
            specs.append(JobSpec(job_id=f"j{i}", submit_time_s=draw(st.floats(0, 900)), model="philly", num_gpus=k,
                                 duration_s=draw(st.floats(60, 2400)), adaptivity=Adaptivity.RIGID))
        else:
            specs.append(JobSpec(job_id=f"j{i}", submit_time_s=draw(st.floats(0, 900)),
                                 model=draw(st.sampled_from(["cifar10", "ncf"])), num_gpus=k,
                                 batch_size=draw(st.sampled_from([None, 256, 512])),
                                 adaptivity=Adaptivity.ADAPTIVE))
    return specs




@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), objective=st.sampled_from(OBJECTIVES), lease=st.sampled_from([60.0, 360.0]))
def test_gavel_leases_respect_capacity_every_round(data, objective, lease):
    cluster = data.draw(clusters())
    specs = data.draw(traces(cluster))
    rec = Recorder(build_scheduler("gavel", settings={"objective": objective, "lease_s": str(lease)}))
    Engine(cluster, specs, rec, World(cluster, seed=0), SimConfig(round_s=60.0, max_time_s=3600.0)).run()
    assert_round_invariants(cluster, rec.log, specs, exact_gangs=True)
