"""The oracle goodput adapter answers from the world's truth, through the estimator protocol."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dlsched.core import Adaptivity, ClusterView, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimator
from dlsched.policies.stages import SchedulerTraits
from dlsched.sim.oracle import OracleGoodput, spread_counts
from dlsched.world.base import World, WorldConfig
from testkit import duration_job, small_cluster

CLUSTER = small_cluster((("t4", 2, 4), ("a100", 1, 8)))
SHAPES = np.array([[1, 1], [1, 2], [1, 4], [2, 8], [1, 3], [2, 1]])


def adaptive(job_id="j", adaptivity=Adaptivity.ADAPTIVE, batch_size=None, num_gpus=1, model="cifar10",
             gpu_unit=1, gpu_types=()):
    return JobSpec(job_id=job_id, submit_time_s=0.0, model=model, num_gpus=num_gpus, batch_size=batch_size,
                   adaptivity=adaptivity, max_gpus=64, gpu_unit=gpu_unit, gpu_types=gpu_types)


def jview(spec: JobSpec, fraction: float = 0.0) -> JobView:
    return JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                   wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=fraction,
                   start_time_s=None)


def make(*specs, config=None):
    world = World(CLUSTER, config or WorldConfig(), seed=0)
    phys = {s.job_id: world.physics(s) for s in specs}
    return world, phys, OracleGoodput(world, phys.__getitem__)


def test_spread_counts_is_even_and_largest_first():
    assert spread_counts(1, 4) == (4,)
    assert spread_counts(2, 8) == (4, 4)
    assert spread_counts(3, 10) == (4, 3, 3)


def test_adaptive_goodput_is_the_worlds_best_batch_at_reported_progress():
    spec = adaptive()
    world, phys, oracle = make(spec)
    as_protocol: GoodputEstimator = oracle  # type-checks against the protocol policies code to
    assert as_protocol.mode == "oracle"
    jv = jview(spec, fraction=0.4)
    oracle.update(ClusterView(0.0, 60.0, CLUSTER, [jv]))
    progress = 0.4 * phys["j"].total_work
    eff = world.efficiency
    for gtype in ("t4", "a100"):
        g = oracle.goodput_many(jv, gtype, SHAPES)
        for (n, k), got in zip(SHAPES[:4], g[:4], strict=True):
            truth = world.throughput.best_batch("cifar10", gtype, spread_counts(n, k), progress, eff,
                                                max_batch=eff.max_batch_size("cifar10"))
            assert got == pytest.approx(truth.goodput)
        e = oracle.estimate(jv, gtype, 1, 4)
        truth = world.throughput.best_batch("cifar10", gtype, (4,), progress, eff,
                                            max_batch=eff.max_batch_size("cifar10"))
        assert e.batch_size == truth.batch_size
        assert e.efficiency == pytest.approx(truth.efficiency)
        assert e.goodput == pytest.approx(e.throughput_sps * e.efficiency)
        assert g[5] == 0.0  # 1 GPU over 2 nodes is not a shape
    # later progress changes the answer (noise grows, larger batches pay off)
    late = jview(spec, fraction=0.9)
    oracle.update(ClusterView(60.0, 60.0, CLUSTER, [late]))
    assert oracle.estimate(late, "t4", 1, 4).batch_size >= oracle.estimate(jv, "t4", 1, 4).batch_size


def test_fixed_batch_jobs_and_rigid_counts():
    strong = adaptive("s", Adaptivity.STRONG_SCALING, batch_size=512)
    rigid = adaptive("r", Adaptivity.RIGID, batch_size=256, num_gpus=4)
    world, phys, oracle = make(strong, rigid)
    js, jr = jview(strong), jview(rigid)
    oracle.update(ClusterView(0.0, 60.0, CLUSTER, [js, jr]))
    for n, k in SHAPES[:4]:
        e = oracle.estimate(js, "t4", int(n), int(k))
        assert e.batch_size == 512
        truth = world.throughput.batch_choice("cifar10", "t4", spread_counts(n, k), 512, 0.0, world.efficiency)
        assert e.goodput == pytest.approx(truth.goodput)
    g = oracle.goodput_many(jr, "a100", SHAPES)
    assert list(g > 0) == [False, False, True, False, False, False]


def test_answers_for_the_request_in_the_view():
    spec = adaptive("a", batch_size=256, num_gpus=2)
    world, _, oracle = make(spec)
    jv = jview(spec)
    oracle.update(ClusterView(0.0, 60.0, CLUSTER, [jv]))
    free = oracle.estimate(jv, "t4", 1, 4)
    as_rigid = dataclasses.replace(jv, spec=dataclasses.replace(spec, adaptivity=Adaptivity.RIGID))
    assert oracle.estimate(as_rigid, "t4", 1, 4) is None  # a rigid gang of 2
    fixed = oracle.estimate(as_rigid, "t4", 1, 2)
    assert fixed.batch_size == 256
    truth = world.throughput.batch_choice("cifar10", "t4", (2,), 256, 0.0, world.efficiency)
    assert fixed.goodput == pytest.approx(truth.goodput)
    assert oracle.estimate(jv, "t4", 1, 4).batch_size == free.batch_size


def test_unsupported_types_and_pipeline_units_are_zero():
    pipe = adaptive("p", model="gpt_pmp", num_gpus=2, gpu_unit=2)
    only_t4 = adaptive("o", gpu_types=("t4",))
    _, _, oracle = make(pipe, only_t4)
    jp, jo = jview(pipe), jview(only_t4)
    oracle.update(ClusterView(0.0, 60.0, CLUSTER, [jp, jo]))
    assert oracle.goodput_many(jp, "t4", SHAPES).max() == 0.0  # no gpt_pmp profile on t4
    g = oracle.goodput_many(jp, "a100", np.array([[1, 1], [1, 2], [1, 3], [1, 4]]))
    assert list(g > 0) == [False, True, False, True]
    assert oracle.estimate(jo, "a100", 1, 1) is None
    assert oracle.estimate(jo, "t4", 1, 1) is not None


def test_duration_jobs_run_at_type_speed_with_locality_penalty():
    job = duration_job("d", 0.0, 4, 600.0)
    world, phys, oracle = make(job, config=WorldConfig(locality_penalty=2.0))
    jv = jview(job)
    oracle.update(ClusterView(0.0, 60.0, CLUSTER, [jv]))
    tm = world.throughput
    one_node = oracle.estimate(jv, "a100", 1, 4).goodput
    assert one_node == pytest.approx(tm.relative_speed("a100") / tm.relative_speed(job.reference_gpu))
    assert oracle.estimate(jv, "t4", 2, 4).goodput == pytest.approx(
        tm.relative_speed("t4") / tm.relative_speed(job.reference_gpu) / 2.0)
    assert oracle.estimate(jv, "t4", 1, 2) is None  # a rigid job runs on its request only


def test_update_forgets_finished_jobs():
    a, b = adaptive("a"), adaptive("b")
    _, _, oracle = make(a, b)
    oracle.update(ClusterView(0.0, 60.0, CLUSTER, [jview(a), jview(b)]))
    oracle.goodput_many(jview(a), "t4", SHAPES)
    oracle.update(ClusterView(60.0, 60.0, CLUSTER, [jview(b)]))
    assert "a" not in oracle._progress and "a" not in oracle._cache


def test_a_run_attaches_the_oracle_to_schedulers_that_need_it(monkeypatch):
    from dlsched.sim import run
    from dlsched.sim.config import RunConfig

    class Needs:
        name = "needs"
        traits = SchedulerTraits(needs_oracle=True)
        oracle = None

        def attach_oracle(self, oracle):
            self.oracle = oracle

        def schedule(self, view):
            from dlsched.core import Decision

            return Decision()

        def describe(self):
            return "needs"

    sched = Needs()
    monkeypatch.setattr(run, "build_scheduler", lambda *a, **k: sched)
    run.prepare(RunConfig(cluster="sia-hetero-64", trace="synthetic:rate=2,hours=1,seed=1", jobs=2))
    assert isinstance(sched.oracle, OracleGoodput)
