"""Gavel's allocation stage: its options, its round mechanism, and leases that respect capacity (the LPs
are tested in ``test_gavel_lp.py``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlsched.policies.gavel.allocation as gavel_allocation
from dlsched.core import Adaptivity, ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimate
from dlsched.policies import build_scheduler, scheduler_tunables
from dlsched.policies.gavel import GavelAllocation, rigid_view
from dlsched.policies.gavel.lp import OBJECTIVES
from dlsched.policies.stages import StagedScheduler
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.invariants import check_decision
from dlsched.sim.oracle import OracleGoodput
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


def test_with_bootstrapped_throughputs_new_jobs_are_profiled_on_one_gpu_per_type_before_they_run():
    cluster = small_cluster((("t4", 1, 4), ("v100", 1, 4)))
    sched = gavel(throughputs="bootstrap")
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


# -- the options: Gavel's code by default, each earlier deviation on request ---------------------------------
class PerJobThroughputs(StandInEstimator):
    """Per-job, per-type throughput (x GPUs); a type missing from a job's table is one it cannot run on."""

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table = table

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        s = self.table[job.job_id].get(gpu_type, 0.0)
        if s <= 0:
            return None
        return GoodputEstimate(goodput=s * num_gpus, batch_size=job.spec.batch_size or 0,
                               throughput_sps=s * num_gpus, efficiency=1.0)


def test_defaults_follow_gavels_code():
    tunables = scheduler_tunables("gavel")
    assert tunables["allocation.throughputs"] == "profiled"
    assert tunables["allocation.normalize_throughputs"] is False
    assert tunables["allocation.maxmin_reference"] == "proportional"
    assert tunables["allocation.ftf_isolated"] == "equal-share"
    assert tunables["allocation.ftf_age"] == "isolated-time"
    assert build_scheduler("gavel").traits.needs_oracle  # Gavel's throughputs are profiled offline
    assert not build_scheduler("gavel", settings={"throughputs": "bootstrap"}).traits.needs_oracle


def test_options_parse_and_bad_values_are_refused():
    s = build_scheduler("gavel", settings={"throughputs": "bootstrap", "normalize_throughputs": "on",
                                           "maxmin_reference": "max-min-lp", "ftf_isolated": "max-min-lp",
                                           "gavel.ftf_age": "wall-clock"})
    a = s.allocation
    assert isinstance(a, GavelAllocation)
    assert (a.throughputs, a.normalize_throughputs, a.maxmin_reference, a.ftf_isolated, a.ftf_age) \
        == ("bootstrap", True, "max-min-lp", "max-min-lp", "wall-clock")
    assert "normalized" in a.describe() and "ftf_age=wall-clock" in a.describe()
    for key, bad in (("throughputs", "guessed"), ("maxmin_reference", "equal-share"), ("ftf_isolated", "proportional"),
                     ("ftf_age", "cpu"), ("normalize_throughputs", "maybe")):
        with pytest.raises(InputError) as e:
            build_scheduler("gavel", settings={key: bad})
        assert key in str(e.value)


def test_profiled_throughputs_without_the_oracle_is_an_error_not_a_guess():
    cluster = small_cluster((("v100", 1, 2),))
    sched = build_scheduler("gavel")
    with pytest.raises(RuntimeError, match="oracle"):
        sched.schedule(view_of(cluster, [job_view(0, 1, profiled=())]))


def test_profiled_throughputs_skip_profiling():
    cluster = small_cluster((("t4", 1, 4), ("v100", 1, 4)))
    d = gavel().schedule(view_of(cluster, [job_view(0, 2, profiled=())]))  # never profiled, still runs
    assert not d.profiles and len(d.allocations["j0"].placement) == 2


def test_throughputs_are_steps_per_second():
    # 512 samples/s at batch 256 is 2 steps/s
    sched = gavel(speed={"v100": 256.0})
    assert sched.allocation.throughput(job_view(0, 2), "v100", per_node=4, gpus_of_type=4) == pytest.approx(2.0)
    assert sched.allocation.throughput(job_view(0, 8), "v100", per_node=4, gpus_of_type=4) == 0.0  # gang too big


def test_normalize_throughputs_changes_who_gets_the_fast_type():
    # A = (8, 10) and B = (0.5, 2) steps/s on (t4, v100): raw sums favour A on the v100 (10.5 > 10); normalised
    # shares favour B there (see test_gavel_lp.test_max_sum_throughput_uses_raw_throughputs).
    cluster = small_cluster((("t4", 1, 1), ("v100", 1, 1)))
    est = PerJobThroughputs({"j0": {"t4": 8.0, "v100": 10.0}, "j1": {"t4": 0.5, "v100": 2.0}})
    jobs = [job_view(0, 1), job_view(1, 1)]
    for normalize, fast in ((False, "j0"), (True, "j1")):
        sched = with_estimator("gavel", est, normalize_throughputs=str(normalize))
        sched.schedule(view_of(cluster, jobs))
        assert sched.allocation.time_fractions[fast]["v100"] == pytest.approx(1.0, abs=1e-4)


def test_maxmin_reference_reaches_the_lp():
    # The three-job example of test_gavel_lp: A only on t4, B only on v100, C on both (t4 2, v100 1).
    cluster = small_cluster((("t4", 1, 1), ("v100", 1, 1)))
    est = PerJobThroughputs({"j0": {"t4": 1.0}, "j1": {"v100": 1.0}, "j2": {"t4": 2.0, "v100": 1.0}})
    jobs = [job_view(i, 1) for i in range(3)]
    for reference, share in (("proportional", 0.5), ("max-min-lp", 2 / 3)):
        sched = with_estimator("gavel", est, objective="max-min", maxmin_reference=reference)
        sched.schedule(view_of(cluster, jobs))
        assert sched.allocation.time_fractions["j0"]["t4"] == pytest.approx(share, abs=1e-3)


def test_finish_time_fairness_hands_the_lp_its_options_and_the_isolated_time(monkeypatch):
    calls = []
    real = gavel_allocation.solve_allocation

    def spy(*args, **kw):
        calls.append(kw)
        return real(*args, **kw)

    monkeypatch.setattr(gavel_allocation, "solve_allocation", spy)
    cluster = small_cluster((("v100", 1, 2),))

    def job(progress: float, age: float) -> JobView:
        j = job_view(0, 1, profiled=("v100",), age=age)
        j.progress_fraction = progress
        return j

    # 256 samples/s at batch 256: 1 step/s; 3600 s estimate, so 3600 steps left at the start.
    sched = gavel(objective="finish-time-fairness", speed={"v100": 256.0}, ftf_isolated="equal-share")
    sched.schedule(view_of(cluster, [job(0.0, 0.0)], t=0.0, round_s=360.0))
    sched.schedule(view_of(cluster, [job(0.25, 360.0)], t=360.0, round_s=360.0))
    assert calls[0]["isolated_time_s"] == pytest.approx([0.0])
    assert calls[1]["remaining"] == pytest.approx([2700.0])
    # 900 steps done at the isolated throughput of the first solve: one job alone gets a whole GPU (the
    # equal share of 2 GPUs capped at running all the time), 1 step/s, so 900 s of isolated time.
    assert calls[1]["isolated_time_s"] == pytest.approx([900.0])
    assert sched.allocation.isolated_time_s == {"j0": pytest.approx(900.0)}
    assert calls[1]["ftf_isolated"] == "equal-share" and calls[1]["normalize"] is False

    calls.clear()
    wall = gavel(objective="finish-time-fairness", speed={"v100": 256.0}, ftf_age="wall-clock")
    wall.schedule(view_of(cluster, [job(0.0, 0.0)], t=0.0, round_s=360.0))
    wall.schedule(view_of(cluster, [job(0.25, 360.0)], t=360.0, round_s=360.0))
    assert calls[1]["isolated_time_s"] == pytest.approx([360.0])  # the job's age
    assert wall.allocation.isolated_time_s == {}


def test_a_short_simulation_runs_on_the_oracle_throughputs():
    from dlsched.sim.config import RunConfig
    from dlsched.sim.run import simulate

    profiled = []
    rec = simulate(RunConfig(trace="synthetic:rate=6,hours=1", policy="gavel", jobs=4, seed=1,
                             settings={"objective": "finish-time-fairness"}),
                   on_decision=lambda view, decision: profiled.extend(decision.profiles))
    assert rec.complete and all(j.finish_s is not None for j in rec.jobs)
    assert not profiled  # throughputs known from the start: no profiling


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
@given(data=st.data(), objective=st.sampled_from(OBJECTIVES), lease=st.sampled_from([60.0, 360.0]),
       source=st.sampled_from(["profiled", "bootstrap"]))
def test_gavel_leases_respect_capacity_every_round(data, objective, lease, source):
    cluster = data.draw(clusters())
    specs = data.draw(traces(cluster))
    sched = build_scheduler("gavel", settings={"objective": objective, "lease_s": str(lease), "throughputs": source})
    rec = Recorder(sched)
    world = World(cluster, seed=0)
    engine = Engine(cluster, specs, rec, world, SimConfig(round_s=60.0, max_time_s=3600.0))
    if sched.traits.needs_oracle:  # what sim.run.attach_oracle does
        sched.attach_oracle(OracleGoodput(world, engine.physics_of))
    engine.run()
    assert_round_invariants(cluster, rec.log, specs, exact_gangs=True)
