"""Sia's goodput estimator: bootstrapping (eq. 3.1), learning from the engine, batch sizes, modes, speed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dlsched.core import (
    Adaptivity,
    ClusterView,
    Decision,
    GradientObservation,
    JobSpec,
    JobStatus,
    JobView,
    Placement,
    ThroughputObservation,
)
from dlsched.estimators.base import GoodputEstimator
from dlsched.estimators.goodput import LearnedGoodputEstimator, statistical_efficiency
from dlsched.estimators.throughput_model import ThroughputParams, compute_time, step_time
from dlsched.policies.stages import SchedulerTraits
from dlsched.sim.engine import Engine, SimConfig
from dlsched.world.base import World
from testkit import small_cluster

CLUSTER = small_cluster((("t4", 2, 4), ("a100", 1, 4)))
A = ThroughputParams(alpha_c=0.02, beta_c=0.0005, alpha_r=0.01, beta_r=0.002, alpha_n=0.05, beta_n=0.004, gamma=1.0)
#: Type B computes exactly 2.5x faster than A at every batch size (so eq. 3.1 has one unambiguous ratio).
B = ThroughputParams(alpha_c=0.008, beta_c=0.0002, alpha_r=0.004, beta_r=0.001, alpha_n=0.02, beta_n=0.001,
                     gamma=1.0)
SHAPES = np.array([[1, 1], [1, 2], [1, 4], [2, 8], [1, 3], [2, 1]])


def spec(job_id="j", adaptivity=Adaptivity.ADAPTIVE, batch_size=None, num_gpus=1, max_gpus=64, gpu_unit=1,
         model="cifar10", gpu_types=()) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=0.0, model=model, num_gpus=num_gpus, batch_size=batch_size,
                   adaptivity=adaptivity, max_gpus=max_gpus, gpu_unit=gpu_unit, gpu_types=gpu_types)


def jview(s: JobSpec, obs=(), grad=(), limits=(128, 4096)) -> JobView:
    return JobView(spec=s, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                   wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                   start_time_s=None, throughput_obs=list(obs), gradient_obs=list(grad), batch_limits=limits)


def cview(*jobs: JobView, t: float = 0.0) -> ClusterView:
    return ClusterView(time_s=t, round_s=60.0, cluster=CLUSTER, jobs=list(jobs))


def obs(p: ThroughputParams, gtype: str, n: int, k: int, b: int, s: int = 1, t: float = 1.0) -> ThroughputObservation:
    step = float(step_time(p, n, k, b, s))
    return ThroughputObservation(time_s=t, gpu_type=gtype, num_nodes=n, num_gpus=k, local_bsz=b, accum_steps=s,
                                 step_time_s=step, sync_time_s=step - s * float(compute_time(p, b)))


def profile(p: ThroughputParams, gtype: str, top: int = 512) -> list[ThroughputObservation]:
    return [obs(p, gtype, 1, 1, int(b)) for b in np.unique(np.round(np.geomspace(16, top, 5)))]


# -- statistical efficiency ------------------------------------------------------------------------------
def test_efficiency_is_pollux_formula():
    b0, sqr, var = 128, 0.5, 3.0
    for bsz in (128, 256, 1000, 4096):
        scale = bsz / b0
        gain = (var + sqr) / (var / scale + sqr)
        assert float(statistical_efficiency(bsz, b0, sqr, var)) == pytest.approx(gain / scale)
    assert float(statistical_efficiency(128, 128, sqr, var)) == pytest.approx(1.0)
    assert float(statistical_efficiency(512, 128, 0.0, 0.0)) == pytest.approx(0.25)  # Pollux: gain 1


def test_estimate_uses_latest_gradient_report_and_prior_before():
    est = LearnedGoodputEstimator()
    s = spec(adaptivity=Adaptivity.STRONG_SCALING, batch_size=256)
    jv = jview(s, obs=profile(A, "t4"))
    est.update(cview(jv))
    e = est.estimate(jv, "t4", 1, 1)
    assert e.efficiency == pytest.approx((1 + 1) / (1 + 2))  # prior var/sqr = 1 at scale 2
    grads = [GradientObservation(2.0, 256, 1.0, 9.0), GradientObservation(3.0, 256, 2.0, 3.0)]
    jv2 = jview(s, grad=grads)
    est.update(cview(jv2, t=60.0))
    e = est.estimate(jv2, "t4", 1, 1)
    assert e.efficiency == pytest.approx(float(statistical_efficiency(256, 128, 2.0, 3.0)))
    assert e.goodput == pytest.approx(e.throughput_sps * e.efficiency)


# -- bootstrapping ---------------------------------------------------------------------------------------
def test_profile_only_assumes_perfect_scaling():
    est = LearnedGoodputEstimator()
    jv = jview(spec(), obs=profile(A, "t4"))
    est.update(cview(jv))
    one = est.predict_step_time(jv, "t4", 1, 1, 64)
    assert est.predict_step_time(jv, "t4", 1, 4, 64) == pytest.approx(one)
    assert est.predict_step_time(jv, "t4", 2, 8, 64) == pytest.approx(one)
    assert est.max_local_bsz(jv, "t4") == 512


def test_eq_3_1_scales_known_multi_gpu_model_by_single_gpu_ratio():
    est = LearnedGoodputEstimator()
    s = spec(adaptivity=Adaptivity.STRONG_SCALING, batch_size=512)
    multi = [obs(A, "t4", n, k, b) for n, k in [(1, 2), (1, 4), (2, 8)] for b in (32, 128)]
    jv = jview(s, obs=profile(A, "t4") + profile(B, "a100") + multi)
    est.update(cview(jv))
    ta = est.evaluate_many(jv, "t4", SHAPES[:4])
    tb = est.evaluate_many(jv, "a100", SHAPES[:4])
    # est-xput_B(N) = xput_B(1) / xput_A(1) * xput_A(N)
    ratio = tb.throughput_sps[0] / ta.throughput_sps[0]
    assert ratio == pytest.approx(2.5, rel=1e-3)
    np.testing.assert_allclose(tb.throughput_sps, ratio * ta.throughput_sps, rtol=1e-4)
    assert not est.params(jv, "a100").has_sync  # B's own model has not seen communication yet
    # once B runs multi-GPU, its own refit model replaces the bootstrap and matches what it saw
    seen = obs(B, "a100", 1, 4, 128, t=2.0)
    jv2 = jview(s, obs=[seen, obs(B, "a100", 1, 2, 64, t=2.0)])
    est.update(cview(jv2, t=60.0))
    assert est.params(jv2, "a100").has_sync
    assert est.predict_step_time(jv2, "a100", 1, 4, 128) == pytest.approx(seen.step_time_s, rel=0.02)


class Scripted:
    """A scheduler that profiles one job, then runs it on the GPUs a script names, updating an estimator."""

    name = "scripted"
    traits = SchedulerTraits()

    def __init__(self, estimator, script):
        self.estimator, self.script, self.round, self.views = estimator, script, 0, []

    def schedule(self, view: ClusterView) -> Decision:
        self.estimator.update(view)
        self.views.append(view)
        d = Decision()
        act = self.script(self.round, view)
        self.round += 1
        if act is not None:
            kind, job_id, gpus = act
            if kind == "profile":
                d.profiles[job_id] = Placement.of(gpus)
            else:
                d.place(job_id, Placement.of(gpus))
        return d


def test_bootstrap_learns_the_world_from_profiling_and_running():
    cluster = small_cluster((("t4", 2, 4), ("a100", 1, 4)))
    world = World(cluster, seed=0)
    est = LearnedGoodputEstimator()
    job = spec(max_gpus=8)

    def script(r, view):
        if r == 0:
            return ("profile", "j", [0, 8])  # one t4 and one a100
        if view.jobs[0].profiling:
            return None
        return ("place", "j", [0, 1, 2, 3])  # then 4 t4 GPUs on one node

    sched = Scripted(est, script)
    Engine(cluster, [job], sched, world, SimConfig(round_s=60.0, max_time_s=480.0)).run()
    first_placed = next(i for i, v in enumerate(sched.views) if not v.jobs[0].profiling and i > 0)
    jv = sched.views[-1].jobs[0]
    assert est.known_types(jv) == ("a100", "t4")
    tm = world.throughput
    # the profile alone: one-GPU step times on both types within a few percent of the truth
    for gtype in ("t4", "a100"):
        truth, _ = tm.step_time("cifar10", gtype, (1,), 256)
        assert float(est.predict_step_time(jv, gtype, 1, 1, 256)) == pytest.approx(truth, rel=0.06)
    assert first_placed >= 1
    # after running on (1 node, 4 GPUs), the estimate there converges to the world's step time
    seen = [o for v in sched.views for o in v.jobs[0].throughput_obs if o.num_gpus == 4]
    assert seen, "the job should have reported its 4-GPU step times"
    last = seen[-1]
    truth, _ = tm.step_time("cifar10", "t4", (4,), last.local_bsz, last.accum_steps)
    assert last.step_time_s == pytest.approx(truth)
    assert float(est.predict_step_time(jv, "t4", 1, 4, last.local_bsz, last.accum_steps)) == pytest.approx(
        truth, rel=0.03)
    # and the believed throughput at the estimator's own batch matches the world's at that batch
    e = est.estimate(jv, "t4", 1, 4)
    phys_progress = 0.0
    choice = tm.batch_choice("cifar10", "t4", (4,), e.batch_size, phys_progress, world.efficiency)
    assert e.throughput_sps == pytest.approx(choice.throughput_sps, rel=0.05)
    # a100 never ran multi-GPU: eq. 3.1 borrows t4's scaling
    xa = est.evaluate_many(jv, "t4", np.array([[1, 1], [1, 4]])).throughput_sps
    xb = est.evaluate_many(jv, "a100", np.array([[1, 1], [1, 4]])).throughput_sps
    assert xb[1] / xb[0] < 4.0  # no longer perfect scaling
    assert xb[1] / xb[0] == pytest.approx(xa[1] / xa[0], rel=0.25)


def test_a_per_gpu_batch_job_of_the_hops_world_is_learned_with_its_growing_batch():
    # Hops's jobs keep their batch per GPU: the estimator must see their global batch grow with the count
    # (not split one batch over more GPUs), and learn their scaling from the runs it observes
    from dlsched.clusters import load_cluster

    cluster = load_cluster("hops-64")
    world = World(cluster, seed=0)
    est = LearnedGoodputEstimator()
    job = JobSpec("h", 0.0, "resnet50", 4, duration_s=36000.0, reference_gpu="1080ti",
                  adaptivity=Adaptivity.STRONG_SCALING, gpu_counts=(1, 2, 4, 8), per_gpu_batch=True)
    node = cluster.nodes_of_type["titanxp"][0]
    gpus = list(cluster.gpus_of_node(node))

    def script(r, view):
        if r == 0:
            return ("profile", "h", gpus[:1])
        if view.jobs[0].profiling:
            return None
        return ("place", "h", gpus[:8])

    sched = Scripted(est, script)
    Engine(cluster, [job], sched, world, SimConfig(round_s=60.0, max_time_s=600.0)).run()
    jv = sched.views[-1].jobs[0]
    assert jv.batch_limits == (128, 128 * 8)
    shapes = np.array([[1, 1], [1, 8]])
    t = est.evaluate_many(jv, "titanxp", shapes)
    assert list(t.batch_size) == [128, 128 * 8] and list(t.local_bsz) == [128, 128]
    assert list(t.efficiency) == [1.0, 1.0]  # samples count the same whatever the global batch
    truth = [world.rate(world.physics(job), 0.0, Placement.of(gpus[:k])).throughput_sps for k in (1, 8)]
    assert t.throughput_sps == pytest.approx(truth, rel=0.05)
    assert t.goodput[1] > 4 * t.goodput[0]  # eight GPUs are worth more than one: it is worth growing


# -- batch sizes and shapes --------------------------------------------------------------------------------
def test_strong_scaling_and_rigid_jobs_keep_their_batch_size():
    est = LearnedGoodputEstimator()
    strong = jview(spec("s", adaptivity=Adaptivity.STRONG_SCALING, batch_size=512), obs=profile(A, "t4"))
    rigid = jview(spec("r", adaptivity=Adaptivity.RIGID, batch_size=384, num_gpus=4), obs=profile(A, "t4"))
    est.update(cview(strong, rigid))
    t = est.evaluate_many(strong, "t4", SHAPES)
    ok = t.goodput > 0
    assert list(ok) == [True, True, True, True, True, False]  # (2 nodes, 1 GPU) is not a shape
    assert set(t.batch_size[ok]) == {512}
    r = est.evaluate_many(rigid, "t4", SHAPES)
    assert list(r.goodput > 0) == [False, False, True, False, False, False]  # only its 4 GPUs
    assert r.batch_size[2] == 384


def test_adaptive_job_picks_a_larger_batch_when_noise_is_high():
    est = LearnedGoodputEstimator()
    s = spec()
    jv = jview(s, obs=profile(A, "t4"), grad=[GradientObservation(1.0, 128, 1.0, 1e-6)])
    est.update(cview(jv))
    low_noise = est.estimate(jv, "t4", 1, 4)
    assert low_noise.batch_size <= 160  # efficiency falls fast: stay near B0 = 128
    jv2 = jview(s, grad=[GradientObservation(2.0, 128, 1.0, 1e4)])
    est.update(cview(jv2, t=60.0))
    high_noise = est.estimate(jv2, "t4", 1, 4)
    assert high_noise.batch_size > 4 * low_noise.batch_size
    assert 128 <= high_noise.batch_size <= 4096
    assert high_noise.efficiency > 0.9


def test_memory_limit_forces_gradient_accumulation():
    est = LearnedGoodputEstimator()
    s = spec(adaptivity=Adaptivity.STRONG_SCALING, batch_size=2048)
    jv = jview(s, obs=profile(A, "t4", top=256))
    est.update(cview(jv))
    t = est.evaluate_many(jv, "t4", np.array([[1, 1], [1, 4], [2, 8]]))
    assert list(t.accum_steps) == [8, 2, 1]
    assert list(t.local_bsz) == [256, 256, 256]


def test_hybrid_parallel_jobs_scale_in_units_of_pipelines():
    est = LearnedGoodputEstimator()
    s = spec(gpu_unit=2, num_gpus=2, max_gpus=16)
    pipe = [obs(A, "t4", 1, 2, b) for b in (1, 2)]
    jv = jview(s, obs=pipe, limits=(12, 384))
    est.update(cview(jv))
    t = est.evaluate_many(jv, "t4", np.array([[1, 1], [1, 2], [1, 3], [1, 4], [2, 8]]))
    assert list(t.goodput > 0) == [False, True, False, True, True]
    assert est.max_local_bsz(jv, "t4") == 2
    # 4 GPUs are 2 pipelines: the global batch splits in two, micro-batches of at most 2 samples
    assert t.batch_size[3] >= 2 and t.local_bsz[3] <= 2
    assert t.accum_steps[3] == pytest.approx(np.ceil(t.batch_size[3] / 2 / t.local_bsz[3]))


def test_goodput_many_agrees_with_estimate():
    est = LearnedGoodputEstimator()
    jv = jview(spec(max_gpus=8), obs=profile(A, "t4") + [obs(A, "t4", 1, 4, 64)],
               grad=[GradientObservation(1.0, 128, 1.0, 20.0)])
    est.update(cview(jv))
    shapes = np.array([[1, 1], [1, 2], [1, 4], [2, 8], [3, 12], [1, 16]])
    many = est.goodput_many(jv, "t4", shapes)
    for (n, k), g in zip(shapes, many, strict=True):
        e = est.estimate(jv, "t4", int(n), int(k))
        if g == 0:
            assert e is None
        else:
            assert e.goodput == pytest.approx(g)
    assert many[-1] == 0.0  # 16 GPUs exceed max_gpus
    many[:] = -1  # callers get a copy
    assert est.goodput_many(jv, "t4", shapes)[0] > 0


def test_modified_views_of_a_job_do_not_share_cache_entries():
    est = LearnedGoodputEstimator()
    s = spec(adaptivity=Adaptivity.ADAPTIVE, batch_size=256, num_gpus=2)
    jv = jview(s, obs=profile(A, "t4"), grad=[GradientObservation(1.0, 128, 1.0, 1e4)])
    est.update(cview(jv))
    adaptive = est.evaluate_many(jv, "t4", SHAPES)
    assert adaptive.goodput[0] > 0 and adaptive.batch_size[2] > 256
    rigid = dataclasses.replace(jv, spec=dataclasses.replace(s, adaptivity=Adaptivity.RIGID))
    r = est.evaluate_many(rigid, "t4", SHAPES)
    assert list(r.goodput > 0) == [False, True, False, False, False, False]
    assert r.batch_size[1] == 256
    only_a100 = dataclasses.replace(jv, spec=dataclasses.replace(s, gpu_types=("a100",)))
    assert est.goodput_many(only_a100, "t4", SHAPES).max() == 0.0
    assert est.goodput_many(jv, "t4", SHAPES)[0] == adaptive.goodput[0]


def test_disallowed_type_is_zero():
    est = LearnedGoodputEstimator()
    jv = jview(spec(gpu_types=("t4",)), obs=profile(A, "t4"))
    est.update(cview(jv))
    assert est.goodput_many(jv, "a100", SHAPES).max() == 0.0
    assert est.estimate(jv, "a100", 1, 1) is None


# -- modes -------------------------------------------------------------------------------------------------
def test_bootstrap_knows_nothing_before_profiling_none_mode_explores():
    boot = LearnedGoodputEstimator("bootstrap")
    none = LearnedGoodputEstimator("none")
    jv = jview(spec())
    for est in (boot, none):
        est.update(cview(jv))
    assert boot.estimate(jv, "t4", 1, 1) is None
    assert boot.goodput_many(jv, "t4", SHAPES).max() == 0.0
    g = none.goodput_many(jv, "t4", SHAPES[:4])
    np.testing.assert_allclose(g / g[0], [1, 2, 4, 8])  # generic prior: perfect linear scaling
    np.testing.assert_allclose(none.goodput_many(jv, "a100", SHAPES[:4]), g)
    # after running on t4, a100 (never tried) is assumed as fast as t4: optimistic, so it gets explored
    jv2 = jview(spec(), obs=[obs(A, "t4", 1, 1, 128), obs(A, "t4", 1, 1, 64)])
    none.update(cview(jv2, t=60.0))
    np.testing.assert_allclose(none.goodput_many(jv2, "a100", SHAPES[:4]), none.goodput_many(jv2, "t4", SHAPES[:4]))
    # a zero step time means the job cannot run there
    dead = ThroughputObservation(2.0, "a100", 1, 1, 0, 1, 0.0, 0.0)
    none.update(cview(jview(spec(), obs=[dead]), t=120.0))
    assert none.goodput_many(jv2, "a100", SHAPES).max() == 0.0


def test_oracle_mode_is_not_this_class():
    with pytest.raises(ValueError, match="OracleGoodput"):
        LearnedGoodputEstimator("oracle")


def test_pollux_mode_pools_all_types_in_one_model():
    est = LearnedGoodputEstimator("none", hetero_aware=False)
    jv = jview(spec(), obs=profile(A, "t4") + profile(B, "a100"))
    est.update(cview(jv))
    assert est.params(jv, "t4") is est.params(jv, "a100")
    np.testing.assert_allclose(est.goodput_many(jv, "t4", SHAPES), est.goodput_many(jv, "a100", SHAPES))
    hetero = LearnedGoodputEstimator()
    hetero.update(cview(jv))
    assert hetero.goodput_many(jv, "a100", SHAPES)[0] > 2 * hetero.goodput_many(jv, "t4", SHAPES)[0]


def test_protocol_and_opaque_jobs():
    est: GoodputEstimator = LearnedGoodputEstimator()
    rigid = JobSpec(job_id="d", submit_time_s=0.0, model="philly", num_gpus=2, duration_s=100.0)
    prof = [ThroughputObservation(1.0, "t4", 1, 1, 0, 1, 0.5, 0.0),
            ThroughputObservation(1.0, "a100", 1, 1, 0, 1, 0.25, 0.0)]
    jv = jview(rigid, obs=prof, limits=None)
    est.update(cview(jv))
    assert list(est.goodput_many(jv, "t4", SHAPES)) == [0.0, 2.0, 0.0, 0.0, 0.0, 0.0]
    assert est.estimate(jv, "a100", 1, 2).goodput == pytest.approx(4.0)
    # running duration jobs report no step time: nothing changes
    est.update(cview(jview(rigid, obs=[ThroughputObservation(2.0, "t4", 1, 2, 0, 1, 0.0, 0.0)], limits=None)))
    assert est.estimate(jv, "t4", 1, 2).goodput == pytest.approx(2.0)


# -- bookkeeping -------------------------------------------------------------------------------------------
def test_update_forgets_finished_jobs_and_ingests_each_view_once():
    est = LearnedGoodputEstimator()
    a = jview(spec("a"), obs=profile(A, "t4"))
    b = jview(spec("b"), obs=profile(B, "t4"))
    v = cview(a, b)
    est.update(v)
    fits = est.fits
    est.update(v)  # the same view again: nothing new
    assert est.fits == fits
    est.update(cview(jview(spec("b")), t=60.0))
    assert est.known_types(a) == ()
    assert est.known_types(b) == ("t4",)


def test_cache_refreshes_on_new_information_only():
    est = LearnedGoodputEstimator()
    s = spec()
    jv = jview(s, obs=profile(A, "t4") + [obs(A, "t4", 1, 4, 64)])
    est.update(cview(jv))
    first = est.goodput_many(jv, "t4", SHAPES)
    fits = est.fits
    # a repeat of a configuration the model already predicts: no refit, same answer
    est.update(cview(jview(s, obs=[obs(A, "t4", 1, 4, 64, t=2.0)]), t=60.0))
    assert est.fits == fits
    np.testing.assert_array_equal(est.goodput_many(jv, "t4", SHAPES), first)
    # a point the model form cannot match refits once, not every round it is seen again
    odd = ThroughputObservation(3.0, "t4", 1, 2, 64, 1, 5.0, 0.0)
    est.update(cview(jview(s, obs=[odd]), t=70.0))
    fits = est.fits
    for r in range(3):
        est.update(cview(jview(s, obs=[odd]), t=80.0 + r))
    assert est.fits == fits
    first = est.goodput_many(jv, "t4", SHAPES)
    # new gradient statistics change efficiency, hence goodput
    est.update(cview(jview(s, grad=[GradientObservation(3.0, 128, 1.0, 50.0)]), t=120.0))
    assert est.goodput_many(jv, "t4", SHAPES)[2] > first[2]


def test_goodput_many_for_a_thousand_jobs_answers_the_same_when_cached():
    """A thousand jobs' goodput over 20 shapes, twice: the cached answers are the first ones (how fast either
    is, is measured in benchmarks/unit_speed.py)."""
    est = LearnedGoodputEstimator()
    jobs = []
    for i in range(1000):
        p = ThroughputParams(0.01 + 0.001 * (i % 7), 0.0003 * (1 + i % 5))
        jobs.append(jview(spec(f"j{i}", max_gpus=128), obs=profile(p, "t4") + profile(B, "a100"),
                          grad=[GradientObservation(1.0, 128, 1.0, 1.0 + i % 11)]))
    est.update(cview(*jobs))
    shapes = np.array([[1, 1], [1, 2], [1, 4]] + [[n, 4 * n] for n in range(2, 19)])
    assert len(shapes) == 20
    cold = [np.array(est.goodput_many(jv, "t4", shapes), dtype=float) for jv in jobs]
    warm = [np.array(est.goodput_many(jv, "t4", shapes), dtype=float) for jv in jobs]
    assert all(np.array_equal(c, w, equal_nan=True) for c, w in zip(cold, warm, strict=True))
    assert all(c.shape[0] == len(shapes) for c in cold)


def test_zero_gradient_report_keeps_the_last_informative_statistics():
    # late in training the measured statistics underflow to (0, 0): 0/0 says nothing about the noise scale
    s = spec()
    noisy = [GradientObservation(1.0, 128, 1.0, 1e4)]
    zero = [GradientObservation(2.0, 512, 0.0, 0.0)]
    kept, literal = LearnedGoodputEstimator(), LearnedGoodputEstimator(zero_grad="no-gain")
    for est in (kept, literal):
        est.update(cview(jview(s, obs=profile(A, "t4"), grad=noisy)))
    before = kept.estimate(jview(s), "t4", 1, 4)
    assert before.efficiency > 0.9 and before.batch_size > 512  # high noise: a large batch is nearly free
    for est in (kept, literal):
        est.update(cview(jview(s, grad=zero), t=60.0))
    after = kept.estimate(jview(s), "t4", 1, 4)
    assert after.goodput == pytest.approx(before.goodput) and after.batch_size == before.batch_size
    # taken literally, no batch above B0 gains anything: the 4-GPU goodput collapses towards one GPU's
    collapsed = literal.estimate(jview(s), "t4", 1, 4)
    assert collapsed.goodput < 0.5 * before.goodput
    # an informative report after the zero one is used again
    kept.update(cview(jview(s, grad=[GradientObservation(3.0, 128, 1.0, 1e-6)]), t=120.0))
    assert kept.estimate(jview(s), "t4", 1, 4).batch_size <= 160
    with pytest.raises(ValueError, match="zero_grad"):
        LearnedGoodputEstimator(zero_grad="sometimes")


def test_jobs_asking_the_same_question_share_one_answer_equal_to_their_own():
    """Jobs of one model with the same observations and request get the throughput part computed for the
    first (a 25,600-GPU run has thousands of them); each answer equals what an estimator that shares
    nothing computes, and jobs that differ (another request, other observations) are not confused."""
    seen = [profile(A, "t4") + profile(B, "a100"), profile(A, "t4"), profile(B, "a100")]
    jobs = [jview(spec(f"j{i}", max_gpus=[64, 4][i % 2]), obs=seen[i % 3]) for i in range(12)]
    shared = LearnedGoodputEstimator()
    shared.update(cview(*jobs))
    answers = {(j.job_id, g): shared.evaluate_many(j, g, SHAPES) for j in jobs for g in ("t4", "a100")}
    assert shared.part_hits > 0
    for j in jobs:
        alone = LearnedGoodputEstimator()
        alone.update(cview(j))
        for g in ("t4", "a100"):
            want, got = alone.evaluate_many(j, g, SHAPES), answers[(j.job_id, g)]
            for field in dataclasses.fields(want):
                assert np.array_equal(getattr(got, field.name), getattr(want, field.name)), (j.job_id, g, field)
