"""Sia policy: configurations, normalised goodput, restart factor, objective, job kinds, life cycle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core import (
    Adaptivity,
    ClusterView,
    InputError,
    JobSpec,
    JobStatus,
    JobView,
    Placement,
    ThroughputObservation,
)
from dlsched.policies import build_scheduler
from dlsched.policies.sia import (
    SiaAllocation,
    build_config_set,
    option_values,
    restart_factor,
)
from dlsched.policies.sia.placer import is_valid_shape
from dlsched.policies.sia.problem import Objective, RoundInputs, build_options
from dlsched.policies.stages import StagedScheduler
from testkit import Recorder, StandInEstimator, small_cluster


class FakeEstimator(StandInEstimator):
    """Stand-in goodput estimator: goodput = speed[type] * k**alpha, a little less per extra node.

    Like the bootstrap estimator, it knows nothing of a type a job was not profiled on (goodput 0) unless
    ``omniscient``.
    """

    mode = "bootstrap"

    def __init__(self, speed: dict[str, float], alpha: float = 0.9, omniscient: bool = False,
                 per_job: dict[str, dict[str, float]] | None = None) -> None:
        self.speed, self.alpha, self.omniscient = speed, alpha, omniscient
        self.per_job = per_job or {}
        self.updates = 0

    def update(self, view):
        self.updates += 1

    def goodput_many(self, job, gpu_type, shapes):
        shapes = np.asarray(shapes, dtype=float).reshape(-1, 2)
        if not self.omniscient and gpu_type not in job.profiled_types:
            return np.zeros(len(shapes))
        speed = self.per_job.get(job.job_id, self.speed).get(gpu_type, 0.0)
        n, k = shapes[:, 0], shapes[:, 1]
        ok = (k >= job.spec.lower_gpus) & (k <= job.spec.upper_gpus) & (k % job.spec.gpu_unit == 0)
        return np.where(ok, speed * k ** self.alpha * 0.97 ** (n - 1), 0.0)


def jv(spec: JobSpec, *, placement=(), profiled=("t4", "a100"), profiling=False, age=600.0, restarts=0,
       status=None, served=None) -> JobView:
    pl = Placement.of(placement)
    if status is None:
        status = JobStatus.RUNNING if pl else JobStatus.QUEUED
    return JobView(spec=spec, status=status, placement=pl, batch_size=None, age_s=age, wait_s=0.0,
                   attained_gpu_s=0.0, attained_service_s=age if served is None else served, restarts=restarts,
                   progress_fraction=0.1, start_time_s=0.0 if (pl or restarts) else None,
                   profiled_types=tuple(profiled), profiling=profiling, batch_limits=(64, 4096))


def spec(job_id: str, num_gpus: int = 4, *, adaptivity=Adaptivity.ADAPTIVE, min_gpus: int = 1, batch_size=256,
         gpu_unit: int = 1, model: str = "cifar10", gpu_types=()) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=0.0, model=model, num_gpus=num_gpus, batch_size=batch_size,
                   min_gpus=min_gpus, adaptivity=adaptivity, gpu_unit=gpu_unit, gpu_types=tuple(gpu_types))


CLUSTER = small_cluster((("t4", 2, 4), ("a100", 1, 8)))  # GPUs 0-7 t4 (two nodes), 8-15 a100
SPEED = {"t4": 1.0, "a100": 3.0}


def sia(estimator=None, **params) -> StagedScheduler:
    sched = build_scheduler("sia")
    sched.allocation = SiaAllocation(**params)
    sched.attach_oracle(estimator or FakeEstimator(SPEED))
    return sched


def view(jobs, t=3600.0, cluster=CLUSTER) -> ClusterView:
    return ClusterView(time_s=t, round_s=60.0, cluster=cluster, jobs=list(jobs))


def gpu_type(d, job_id, cluster=CLUSTER):
    return {cluster.gpu_type_of[g] for g in d.allocations[job_id].placement.gpus}.pop()


# -- configurations and formulas ------------------------------------------------------------------------
def test_config_set_of_thesis_example():
    cluster = small_cluster((("rtx", 1, 2), ("a100", 1, 4)))  # A: 1 node x 2, B: 1 node x 4
    assert build_config_set(cluster).describe() == [(1, 1, "rtx"), (1, 2, "rtx"), (1, 1, "a100"), (1, 2, "a100"),
                                                    (1, 4, "a100")]


def test_config_set_of_sia_hetero_64():
    from dlsched.clusters import load_cluster

    cs = build_config_set(load_cluster("sia-hetero-64"))
    by_type: dict[str, list[tuple[int, int]]] = {}
    for n, k, t in cs.describe():
        by_type.setdefault(t, []).append((n, k))
    assert by_type["t4"] == [(1, 1), (1, 2), (1, 4)] + [(n, 4 * n) for n in range(2, 7)]
    assert by_type["rtx"] == [(1, 1), (1, 2), (1, 4), (1, 8), (2, 16), (3, 24)]
    assert by_type["a100"] == [(1, 1), (1, 2), (1, 4), (1, 8), (2, 16)]


def test_config_set_non_power_of_two_node():
    cs = build_config_set(small_cluster((("v100", 3, 6),)))
    assert cs.describe() == [(1, 1, "v100"), (1, 2, "v100"), (1, 4, "v100"), (1, 6, "v100"), (2, 12, "v100"),
                             (3, 18, "v100")]


def test_restart_factor_eq_3_3():
    assert restart_factor(age_s=10.0, restarts=0, penalty_s=30.0) == 1.0  # younger than one restart
    assert restart_factor(1000.0, 2, 50.0) == pytest.approx((1000 - 100) / 1050)
    assert restart_factor(100.0, 5, 50.0) == 0.0  # clipped
    # as the thesis writes it, a young job is discounted too: (10 - 0) / (10 + 30)
    assert restart_factor(10.0, 0, 30.0, young_free=False) == pytest.approx(0.25)
    assert restart_factor(1000.0, 2, 50.0, young_free=False) == restart_factor(1000.0, 2, 50.0)


def test_restart_factor_tunable_text_discounts_young_jobs():
    from dlsched.policies.registry import build_scheduler

    artifact = build_scheduler("sia", settings={"restart_factor": "sia"})
    text = build_scheduler("sia", settings={"restart_factor": "text"})
    assert artifact.allocation.restart_factor == "sia" and text.allocation.restart_factor == "text"
    with pytest.raises(ValueError, match="restart_factor"):
        build_scheduler("sia", settings={"restart_factor": "young"})


def test_option_values_follow_penalty_semantics():
    G = np.array([1.0, 4.0])
    r = np.ones(2)
    lam = np.full(2, 1.1)
    neg = option_values(G, r, lam, -0.5)
    assert neg == pytest.approx(1.1 - G ** -0.5)  # minimise G^p + lambda(1-|A|)  ==  maximise lambda - G^p
    assert neg[1] > neg[0] > 0  # more goodput is better, and any allocation beats none
    pos = option_values(G, r, lam, 1.0)
    assert pos == pytest.approx(G + 1.1)


# -- life cycle --------------------------------------------------------------------------------------------
def test_new_job_is_profiled_first_then_starts_small_on_its_best_type():
    s = sia()
    new = jv(spec("a"), profiled=(), age=0.0)
    d = s.schedule(view([new]))
    assert "a" not in d.allocations
    prof = d.profiles["a"]
    assert {CLUSTER.gpu_type_of[g] for g in prof.gpus} == {"t4", "a100"}
    assert len(prof) == 2  # one GPU of each type
    # while profiling, nothing happens to it
    d = s.schedule(view([jv(spec("a"), profiled=("t4", "a100"), profiling=True, status=JobStatus.PROFILING)]))
    assert not d.allocations and not d.profiles
    # profiled: starts with exactly one GPU, of the faster type
    d = s.schedule(view([jv(spec("a"), profiled=("t4", "a100"))]))
    assert len(d.allocations["a"].placement) == 1
    assert gpu_type(d, "a") == "a100"


def test_oracle_and_none_modes_skip_profiling():
    for mode in ("oracle", "none"):
        s = sia(FakeEstimator(SPEED, omniscient=True), profiling=mode)
        d = s.schedule(view([jv(spec("a"), profiled=(), age=0.0)]))
        assert not d.profiles
        assert len(d.allocations["a"].placement) == 1
    assert build_scheduler("sia", settings={"profiling": "oracle"}).traits.needs_oracle
    assert not sia().traits.needs_oracle


def test_gpu_count_at_most_doubles_per_round():
    s = sia()
    d = s.schedule(view([jv(spec("a", num_gpus=8), placement=[8, 9])]))
    assert len(d.allocations["a"].placement) == 4
    d = s.schedule(view([jv(spec("a", num_gpus=8), placement=list(d.allocations["a"].placement.gpus))]))
    assert len(d.allocations["a"].placement) == 8
    s2 = sia(max_doubling=False)
    d = s2.schedule(view([jv(spec("a"), placement=[8])]))
    assert len(d.allocations["a"].placement) == 8  # alone in the cluster: the whole a100 node


def test_a_requirement_set_without_the_double_grows_to_its_next_count():
    # Hops's requirement sets need not hold twice the current count: {1, 4, 8} grows 1 -> 4 -> 8, one
    # requirement per round, never straight to 8 and never stuck at 1
    counts = (1, 4, 8)
    js = JobSpec(job_id="a", submit_time_s=0.0, model="cifar10", num_gpus=4, batch_size=64, min_gpus=1,
                 max_gpus=8, adaptivity=Adaptivity.STRONG_SCALING, gpu_counts=counts, per_gpu_batch=True)
    s = sia()
    d = s.schedule(view([jv(js, placement=[8])]))
    assert len(d.allocations["a"].placement) == 4
    d = s.schedule(view([jv(js, placement=list(d.allocations["a"].placement.gpus))]))
    assert len(d.allocations["a"].placement) == 8


@pytest.mark.parametrize(("growth_cap", "expected"), [("current", 2), ("largest-seen", 8)])
def test_growth_cap_doubles_the_current_or_the_largest_count_seen(growth_cap, expected):
    # the job ran on 4 a100 GPUs before and runs on 1 now: 'current' doubles 1, 'largest-seen' doubles 4
    s = sia(growth_cap=growth_cap)
    job = jv(spec("a", num_gpus=8), placement=[8])
    job.throughput_obs = [ThroughputObservation(time_s=0.0, gpu_type="a100", num_nodes=1, num_gpus=4, local_bsz=64,
                                                accum_steps=1, step_time_s=0.1, sync_time_s=0.01)]
    d = s.schedule(view([job]))
    assert len(d.allocations["a"].placement) == expected
    with pytest.raises(InputError):
        build_scheduler("sia", settings={"growth_cap": "sometimes"})


def test_minimum_gpu_count_is_respected():
    s = sia()
    jobs = [jv(spec(f"j{i}", min_gpus=4)) for i in range(3)]
    d = s.schedule(view(jobs))
    assert d.allocations
    assert all(len(a.placement) >= 4 for a in d.allocations.values())
    assert sum(len(a.placement) for a in d.allocations.values()) <= 16


def test_rigid_job_gets_its_count_and_the_best_type():
    s = sia()
    r = spec("r", num_gpus=4, adaptivity=Adaptivity.RIGID, batch_size=512)
    d = s.schedule(view([jv(r)]))
    a = d.allocations["r"]
    assert len(a.placement) == 4 and a.batch_size == 512
    assert gpu_type(d, "r") == "a100"
    assert is_valid_shape(CLUSTER, a.placement)


def test_strong_scaling_keeps_its_batch_size_and_adaptive_jobs_pick_theirs():
    s = sia()
    d = s.schedule(view([jv(spec("s", adaptivity=Adaptivity.STRONG_SCALING, batch_size=1024)), jv(spec("a"))]))
    assert d.allocations["s"].batch_size == 1024
    assert d.allocations["a"].batch_size is None


def test_hybrid_parallel_jobs_scale_in_units():
    s = sia()
    j = spec("g", num_gpus=8, gpu_unit=2, model="gpt_pmp", min_gpus=2)
    d = s.schedule(view([jv(j, profiled=())]))
    assert all(len(p) == 2 for p in [Placement.of([g for g in d.profiles["g"].gpus
                                                   if CLUSTER.gpu_type_of[g] == t]) for t in ("t4", "a100")])
    d = s.schedule(view([jv(j, placement=[8, 9])]))
    assert len(d.allocations["g"].placement) == 4
    for _ in range(3):
        d = s.schedule(view([jv(j, placement=list(d.allocations["g"].placement.gpus))]))
        assert len(d.allocations["g"].placement) % 2 == 0


def test_heterogeneity_matches_jobs_to_types():
    # job x gains 3x on a100, job y only 1.1x: with one job per type available, x gets the a100s
    est = FakeEstimator(SPEED, per_job={"x": {"t4": 1.0, "a100": 3.0}, "y": {"t4": 1.0, "a100": 1.1}})
    s = sia(est, max_doubling=False)
    d = s.schedule(view([jv(spec("x", num_gpus=8, min_gpus=8)), jv(spec("y", num_gpus=8, min_gpus=8))]))
    assert gpu_type(d, "x") == "a100"
    assert gpu_type(d, "y") == "t4"


def test_non_preemptible_and_restarting_jobs_keep_their_gpus():
    many = [jv(spec(f"n{i}")) for i in range(20)]
    held = jv(spec("np"), placement=[0])
    s = sia(non_preemptible=("np",))
    d = s.schedule(view([held, *many]))
    assert d.allocations["np"].placement == held.placement
    restarting = jv(spec("rs"), placement=[1, 2], status=JobStatus.RESTARTING)
    d = sia().schedule(view([restarting, *many]))
    assert d.allocations["rs"].placement == restarting.placement


def test_restart_factor_keeps_running_jobs_in_place():
    # a job that restarted often keeps its t4 GPUs although the a100s are free and 3x faster
    often = jv(spec("a"), placement=[0, 1], restarts=30, age=1000.0)
    d = sia().schedule(view([often]))
    assert d.allocations["a"].placement == often.placement
    d = sia(restart_factor="off").schedule(view([often]))
    assert gpu_type(d, "a") == "a100"


@pytest.mark.parametrize("tie_break, moved", [("keep", 0), ("solver", 2)])
def test_a_running_job_is_not_swapped_for_an_identical_queued_one(tie_break, moved):
    # four rigid 4-GPU gangs fill the 16 GPUs, four identical ones wait: any choice of four is optimal;
    # "keep" restarts nobody for a tie, "solver" lets HiGHS swap two of them (what it does on this problem)
    def rigid(job_id, **kw):
        return jv(spec(job_id, num_gpus=4, adaptivity=Adaptivity.RIGID, batch_size=512), age=5000.0, **kw)
    running = [rigid(f"r{i}", placement=list(range(4 * i, 4 * i + 4)), restarts=1) for i in range(4)]
    queued = [rigid(f"q{i}") for i in range(4)]
    for order in (running + queued, queued + running, queued[::-1] + running[::-1]):
        d = sia(FakeEstimator(SPEED, omniscient=True), tie_break=tie_break).schedule(view(order))
        kept = [j for j in running if d.allocations.get(j.job_id) and d.allocations[j.job_id].placement == j.placement]
        assert len(running) - len(kept) == moved


def test_reserved_gpus_are_left_alone():
    s = sia(reserve=("a100:8",))
    jobs = [jv(spec(f"j{i}")) for i in range(12)]
    d = s.schedule(view(jobs))
    used = {g for a in d.allocations.values() for g in a.placement.gpus}
    assert used and not used & set(range(8, 16))


def test_more_jobs_than_gpus_everyone_waits_fairly_under_tau():
    cluster = small_cluster((("v100", 1, 2),))
    est = FakeEstimator({"v100": 1.0}, omniscient=True)
    s = sia(est, tau=300.0, profiling="none")
    jobs = [spec(f"j{i}") for i in range(4)]
    running: dict[str, list[int]] = {}
    served = dict.fromkeys([j.job_id for j in jobs], 0.0)
    ran_at: dict[str, list[float]] = {j.job_id: [] for j in jobs}
    for rnd in range(30):
        t = 60.0 * rnd
        views = [jv(j, placement=running.get(j.job_id, ()), age=t + 1, served=served[j.job_id]) for j in jobs]
        d = s.schedule(view(views, t=t, cluster=cluster))
        running = {k: list(a.placement.gpus) for k, a in d.allocations.items()}
        assert sum(len(g) for g in running.values()) <= 2
        for k in running:
            served[k] += 60.0
            ran_at[k].append(t)
    assert all(ran_at[j.job_id] for j in jobs), "every job gets a turn"
    without = sia(FakeEstimator({"v100": 1.0}, omniscient=True), profiling="none")
    running = {}
    got = set()
    for rnd in range(30):
        views = [jv(j, placement=running.get(j.job_id, ())) for j in jobs]
        d = without.schedule(view(views, t=60.0 * rnd, cluster=cluster))
        running = {k: list(a.placement.gpus) for k, a in d.allocations.items()}
        got |= set(running)
    assert len(got) < 4  # without the time-varying penalty the first jobs keep the GPUs


@pytest.mark.parametrize("solver", ["milp", "lp-round", "incremental", "auto", "continual", "warm-simplex",
                                    "lagrangian", "lpstar", "pop-4"])
def test_solvers_give_valid_decisions(solver):
    s = sia(solver=solver)
    jobs = [jv(spec(f"j{i}", num_gpus=8)) for i in range(6)]
    for _ in range(3):
        d = s.schedule(view(jobs))
        assert sum(len(a.placement) for a in d.allocations.values()) <= 16
        jobs = [jv(j.spec, placement=list(d.allocations[j.job_id].placement.gpus)
                   if j.job_id in d.allocations else ()) for j in jobs]
        assert d.info["sia.jobs"] == 6


@pytest.mark.parametrize("solver", ["pop-0", "pop-x", "pop", "lp*"])
def test_unknown_solvers_are_refused(solver):
    with pytest.raises(ValueError, match="solver must be one of"):
        SiaAllocation(solver=solver)


def test_continual_solver_with_shim_upgrade_gives_valid_decisions():
    s = build_scheduler("sia", settings={"solver": "continual", "shim_fill": "true", "shim_upgrade": "true"})
    assert s.allocation.shim_upgrade is True and s.allocation.shim_fill is True
    s.attach_oracle(FakeEstimator(SPEED))
    jobs = [jv(spec(f"j{i}", num_gpus=8)) for i in range(6)]
    for _ in range(3):
        d = s.schedule(view(jobs))
        gpus = [g for a in d.allocations.values() for g in a.placement.gpus]
        assert len(gpus) == len(set(gpus)) <= 16
        jobs = [jv(j.spec, placement=list(d.allocations[j.job_id].placement.gpus)
                   if j.job_id in d.allocations else ()) for j in jobs]
    assert d.allocations  # the free GPUs are used


def test_prox_steps_tunable_reaches_the_continual_method_and_is_range_checked():
    s = build_scheduler("sia", settings={"solver": "continual", "prox_steps": "200"})
    s.attach_oracle(FakeEstimator(SPEED))
    s.schedule(view([jv(spec(f"j{i}", num_gpus=8)) for i in range(3)]))
    assert s.allocation._continual.method.prox_steps == 200
    for bad in ("0", "-3", "100000"):
        with pytest.raises(InputError, match="prox_steps"):
            build_scheduler("sia", settings={"solver": "continual", "prox_steps": bad})


# -- registry --------------------------------------------------------------------------------------------
def test_registered_preset_parses_tunables():
    s = build_scheduler("sia", settings={"p": "-1", "lambda_": "2", "tau": "on", "restart_factor": "off",
                                         "solver": "milp", "sia.max_doubling": "false",
                                         "non_preemptible": "a,b", "reserve": "a100:8"})
    a = s.allocation
    assert isinstance(a, SiaAllocation)
    assert a.p == -1 and a.lambda_ == 2 and a.tau == 300.0
    assert a.restart_factor == "off" and a.max_doubling is False
    assert a.non_preemptible == ("a", "b") and a.reserve == ("a100:8",)
    assert build_scheduler("sia", settings={"tau": "120"}).allocation.tau == 120.0
    assert build_scheduler("sia").allocation.tau is None
    with pytest.raises(InputError, match="no tunable"):
        build_scheduler("sia", settings={"bogus": "1"})
    with pytest.raises(InputError):
        build_scheduler("sia", settings={"p": "0"})
    with pytest.raises(InputError):
        build_scheduler("sia", settings={"profiling": "magic"})
    with pytest.raises(InputError):
        build_scheduler("sia", ordering="las")


# -- engine property: capacity and gangs hold every round ----------------------------------------------
@st.composite
def clusters(draw):
    types = draw(st.lists(st.sampled_from(["t4", "rtx", "v100", "a100"]), min_size=1, max_size=3, unique=True))
    return small_cluster(tuple((t, draw(st.integers(1, 3)), draw(st.sampled_from([2, 4, 8]))) for t in types))


@st.composite
def workloads(draw, cluster):
    biggest = cluster.max_gpus_single_type()
    specs = []
    for i in range(draw(st.integers(1, 6))):
        submit = draw(st.floats(0, 1800, allow_nan=False))
        kind = draw(st.sampled_from(["adaptive", "strong", "rigid", "duration"]))
        gpus = draw(st.integers(1, min(8, biggest)))
        model = draw(st.sampled_from(["cifar10", "ncf", "deepspeech2"]))
        if kind == "duration":
            specs.append(JobSpec(job_id=f"j{i}", submit_time_s=submit, model="philly", num_gpus=gpus,
                                 duration_s=draw(st.floats(60, 1800)), adaptivity=Adaptivity.RIGID))
        else:
            adapt = {"adaptive": Adaptivity.ADAPTIVE, "strong": Adaptivity.STRONG_SCALING,
                     "rigid": Adaptivity.RIGID}[kind]
            specs.append(JobSpec(job_id=f"j{i}", submit_time_s=submit, model=model, num_gpus=gpus,
                                 batch_size=256 if model != "ncf" else 4096, adaptivity=adapt,
                                 min_gpus=draw(st.sampled_from([1, 1, 2]))))
    return specs


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_sia_decisions_respect_capacity_and_gangs_every_round(data):
    from dlsched.sim.engine import Engine, SimConfig
    from dlsched.world.base import World

    cluster = data.draw(clusters())
    specs = data.draw(workloads(cluster))
    tau = data.draw(st.sampled_from([None, 300.0]))
    solver = data.draw(st.sampled_from(["milp", "incremental", "continual"]))
    sched = build_scheduler("sia", settings={"solver": solver, **({"tau": str(tau)} if tau else {})})
    checked = []

    class Check(Recorder):
        def schedule(self, v):
            d = sched.schedule(v)
            used = np.zeros(cluster.num_gpus, dtype=int)
            for a in d.allocations.values():
                used[list(a.placement.gpus)] += 1
                assert is_valid_shape(cluster, a.placement)
            for p in d.profiles.values():
                used[list(p.gpus)] += 1
            assert used.max(initial=0) <= 1
            checked.append(len(d.allocations))
            return d

    engine = Engine(cluster, specs, Check(sched), World(cluster, seed=0), SimConfig(round_s=60.0, max_time_s=4 * 3600.0))
    res = engine.run()  # the engine's own invariant checks raise on any broken gang or over-committed GPU
    assert checked
    assert any(r.finish_s is not None for r in res.jobs) or math.isfinite(res.end_time_s)


def test_normalised_goodput_rows_have_minimum_n_min():
    s = sia()
    jobs = [jv(spec("a", min_gpus=2)), jv(spec("b")), jv(spec("r", num_gpus=4, adaptivity=Adaptivity.RIGID))]
    v = view(jobs)
    cs = build_config_set(CLUSTER)
    a = s.allocation
    inputs = RoundInputs(view=v, cs=cs, cur_config={}, forced_ids=set(), capacity=cs.capacity)
    opts = build_options(inputs, jobs, a.estimator, lambda j: a._candidates(cs, j), a._explore, a._restart_factor,
                         lambda js, congested: np.full(len(js), a.lambda_),
                         Objective(p=a.p, lambda_=a.lambda_, max_doubling=a.max_doubling, time_varying=False))
    mins = {opts.jobs[g].job_id: opts.G[opts.job_of == g].min() for g in range(len(opts.jobs))}
    # queued jobs only keep each type's smallest option; the row minimum over all options is N_min
    assert mins["a"] == pytest.approx(2.0)
    assert mins["b"] == pytest.approx(1.0)
    assert mins["r"] == pytest.approx(4.0)


def test_hybrid_parallel_job_in_the_simulator_runs_in_units_of_its_pipeline():
    from dlsched.clusters import load_cluster
    from dlsched.sim.engine import Engine, SimConfig
    from dlsched.world.base import World

    cluster = load_cluster("sia-hetero-64")
    gpt = JobSpec(job_id="gpt", submit_time_s=0.0, model="gpt_pmp", num_gpus=8, batch_size=48, min_gpus=8,
                  gpu_unit=8, adaptivity=Adaptivity.ADAPTIVE, gpu_types=("a100", "rtx"))
    counts: list[int] = []

    class Watch(Recorder):
        def schedule(self, v):
            d = self.inner.schedule(v)
            if "gpt" in d.profiles:
                assert {cluster.gpu_type_of[g] for g in d.profiles["gpt"].gpus} == {"a100", "rtx"}
                assert len(d.profiles["gpt"]) == 16  # one 8-GPU pipeline per type
            if "gpt" in d.allocations:
                counts.append(len(d.allocations["gpt"].placement))
            return d

    Engine(cluster, [gpt], Watch(build_scheduler("sia")), World(cluster), SimConfig(max_time_s=1800.0)).run()
    assert counts and all(k % 8 == 0 for k in counts)
    assert max(counts) == 16  # doubled once from its minimum, up to the two a100 nodes


@pytest.mark.parametrize(("zero_grad_stats", "shrinks"), [("keep", False), ("no-gain", True)])
def test_zero_gradient_report_does_not_shrink_a_running_job(zero_grad_stats, shrinks):
    # A job runs on 4 t4 GPUs with high gradient noise (large batches nearly free); then it reports the
    # (0, 0) statistics that the measured profiles hold late in training. Taken literally they make every
    # batch above B0 worthless, and at B0 this job's all-reduce costs more than 4 GPUs save, so Sia shrinks
    # it (a restart, undone at the next non-zero report); by default the report is skipped and the job
    # keeps its GPUs.
    from dlsched.core import GradientObservation
    from dlsched.estimators.throughput_model import ThroughputParams, compute_time, step_time

    cluster = small_cluster((("t4", 1, 4),))
    p = ThroughputParams(alpha_c=0.02, beta_c=0.0005, alpha_n=0.05, beta_n=0.002, alpha_r=0.08, beta_r=0.004)

    def tobs(k: int, b: int) -> ThroughputObservation:
        step = float(step_time(p, 1, k, b))
        return ThroughputObservation(time_s=0.0, gpu_type="t4", num_nodes=1, num_gpus=k, local_bsz=b, accum_steps=1,
                                     step_time_s=step, sync_time_s=step - float(compute_time(p, b)))

    sched = build_scheduler("sia", settings={"zero_grad_stats": zero_grad_stats})
    job = jv(spec("a", num_gpus=4), placement=[0, 1, 2, 3], profiled=("t4",), age=3600.0, restarts=2)
    job.throughput_obs = [tobs(1, b) for b in (16, 64, 256, 1024)] + [tobs(2, 512), tobs(4, 512)]
    job.gradient_obs = [GradientObservation(0.0, 2048, 1.0, 1e4)]
    first = sched.schedule(view([job], cluster=cluster))
    assert len(first.allocations["a"].placement) == 4
    job2 = jv(spec("a", num_gpus=4), placement=[0, 1, 2, 3], profiled=("t4",), age=3660.0, restarts=2)
    job2.gradient_obs = [GradientObservation(60.0, 2048, 0.0, 0.0)]
    second = sched.schedule(view([job2], t=3660.0, cluster=cluster))
    assert (len(second.allocations["a"].placement) < 4) is shrinks


@pytest.mark.parametrize(("growth_cap", "expected"), [("current", 1), ("largest-seen", 2)])
def test_a_profiled_job_starts_at_one_gpu_or_twice_its_profiled_count(growth_cap, expected):
    # The thesis starts every job on one GPU; the artifact's cap, twice the largest count a job was profiled
    # or ran at, lets a job profiled on one GPU start on two.
    s = sia(growth_cap=growth_cap)
    job = jv(spec("a", num_gpus=8))
    job.throughput_obs = [ThroughputObservation(time_s=0.0, gpu_type=t, num_nodes=1, num_gpus=1, local_bsz=64,
                                                accum_steps=1, step_time_s=0.1, sync_time_s=0.0)
                          for t in ("t4", "a100")]
    d = s.schedule(view([job]))
    assert len(d.allocations["a"].placement) == expected


def test_a_job_profiled_without_a_single_report_still_runs_and_stays():
    """Under ``dlsched serve`` a script that does not use dlsched.train reports no step times, so its profiles
    teach the learned estimator nothing; Sia must still run it (it once waited for ever with every GPU free)."""
    s = build_scheduler("sia")  # its own learned estimator, as the service runs it
    silent = JobSpec(job_id="plain", submit_time_s=0.0, model="cmd-0123abcd", num_gpus=2, batch_size=None,
                     adaptivity=Adaptivity.RIGID)
    d = s.schedule(view([jv(silent, profiled=("t4", "a100"))]))
    assert len(d.allocations["plain"].placement) == 2 and not d.profiles
    placed = tuple(d.allocations["plain"].placement.gpus)
    again = s.schedule(view([jv(silent, placement=placed, profiled=("t4", "a100"))]))
    assert tuple(again.allocations["plain"].placement.gpus) == placed
