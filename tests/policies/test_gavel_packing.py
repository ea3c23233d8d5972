"""Gavel's packing policy for makespan: it packs a pair when sharing beats taking turns, places a pair on
the same GPUs, and keeps the packing rules and invariants every round."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, ClusterView, JobSpec, JobStatus, JobView, Placement
from dlsched.core.packing import holders
from dlsched.policies import build_scheduler
from dlsched.policies.gavel.packing import GavelPackingAllocation
from dlsched.sim.engine import Engine, SimConfig
from dlsched.world.base import World, WorldConfig
from testkit import Recorder, assert_round_invariants, small_cluster

ONE_GPU = small_cluster((("a40", 1, 1),))


def spec(job_id: str, model: str, gpus: int, duration: float, submit: float = 0.0) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=submit, model=model, num_gpus=gpus, duration_s=duration,
                   adaptivity=Adaptivity.RIGID, reference_gpu="a40")


def view_of(cluster, specs: list[JobSpec]) -> ClusterView:
    jobs = [JobView(spec=s, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                    wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                    start_time_s=None, estimated_duration_s=s.duration_s) for s in specs]
    return ClusterView(time_s=0.0, round_s=360.0, cluster=cluster, jobs=jobs)


def test_the_lp_packs_a_pair_that_shares_well_and_alternates_one_that_does_not():
    alloc = GavelPackingAllocation()
    good = view_of(ONE_GPU, [spec("a", "efficientnet", 1, 3600.0), spec("b", "mobilenetv2", 1, 3600.0)])
    x = alloc.shares(good, good.jobs)
    assert x.get(("a", "b"), 0.0) > 0.9  # 0.91 + 0.92 of their speeds at once beats taking turns
    # the makespan optimum evens out the two jobs' progress: the slower one in the pair gets a little alone
    rate_a = 0.9095 * x[("a", "b")] + x.get(("a",), 0.0)
    rate_b = 0.924 * x[("a", "b")] + x.get(("b",), 0.0)
    assert rate_a == pytest.approx(rate_b, rel=1e-6)
    bad = view_of(ONE_GPU, [spec("a", "resnet50", 1, 3600.0), spec("b", "lstm", 1, 3600.0)])
    x = alloc.shares(bad, bad.jobs)
    assert x.get(("a", "b"), 0.0) == pytest.approx(0.0, abs=1e-6)  # 0.41 + 0.42: taking turns is faster
    assert x[("a",)] == pytest.approx(0.5, abs=1e-6) and x[("b",)] == pytest.approx(0.5, abs=1e-6)


def run(cluster, specs, **kw):
    rec = Recorder(build_scheduler("gavel-packing", **kw))
    world = World(cluster, WorldConfig(variability=False), seed=0)
    res = Engine(cluster, specs, rec, world, SimConfig(round_s=360.0)).run()
    return {r.job_id: r for r in res.jobs}, rec.log


def test_a_packed_pair_runs_on_the_same_gpus_and_the_rules_hold():
    cluster = small_cluster((("a40", 2, 2),))
    specs = [spec("a", "efficientnet", 2, 3600.0), spec("b", "mobilenetv2", 2, 3600.0),
             spec("c", "resnet18", 2, 1800.0), spec("d", "efficientnet", 2, 1800.0), spec("e", "resnet18", 2, 900.0)]
    got, log = run(cluster, specs)
    assert_round_invariants(cluster, log, specs, exact_gangs=True, packing=True)
    shared = [js for _, d in log for js in holders({j: a.placement for j, a in d.allocations.items()}).values()
              if len(js) > 1]
    assert shared  # five 2-GPU jobs on 4 GPUs: Gavel packs some of them
    assert all(r.finish_s is not None for r in got.values())


def test_an_unequal_pair_is_valued_at_its_balanced_speed_when_samples_are_stolen():
    # a 4-GPU job hosting a 1-GPU job on one of its GPUs: only one of its four workers is slowed
    cluster = small_cluster((("a40", 1, 4),))
    view = view_of(cluster, [spec("big", "lstm", 4, 3600.0), spec("small", "lstm", 1, 3600.0)])
    big, small = view.jobs
    straggling_lp = GavelPackingAllocation(relaxed=True)
    balanced_lp = GavelPackingAllocation(relaxed=True, unequal_speed="balanced")
    straggling, balanced = straggling_lp._pair(big, small), balanced_lp._pair(big, small)
    assert straggling[0] < 0.7  # the pair's measured speed: the big job waits for its shared worker
    assert balanced[0] == pytest.approx((straggling[0] + 3.0) / 4.0)  # the mean of its workers' speeds
    assert balanced[1] == pytest.approx(straggling[1])  # every worker of the small job is shared either way

    def slowest_progress(alloc: GavelPackingAllocation, x: dict) -> float:
        rate = {"big": 0.0, "small": 0.0}
        for combo, share in x.items():
            speeds = (1.0,) if len(combo) == 1 else alloc._pair(big, small)
            for j, v in zip(combo, speeds, strict=True):
                rate[j] += share * v
        return min(rate.values())

    # at its straggling speed the pair is worth nothing (alone, 4 + 1 GPUs share 4: each job 80% of the
    # time); at its balanced speed the LP packs them half of the time and both progress faster
    x = straggling_lp.shares(view, view.jobs)
    assert x.get(("big", "small"), 0.0) == pytest.approx(0.0, abs=1e-6)
    assert slowest_progress(straggling_lp, x) == pytest.approx(0.8, abs=1e-6)
    x = balanced_lp.shares(view, view.jobs)
    assert x.get(("big", "small"), 0.0) > 0.3
    assert slowest_progress(balanced_lp, x) > 0.81


def test_equal_pairs_are_valued_the_same_either_way():
    view = view_of(ONE_GPU, [spec("a", "efficientnet", 1, 3600.0), spec("b", "mobilenetv2", 1, 3600.0)])
    a, b = view.jobs
    assert (GavelPackingAllocation(unequal_speed="balanced")._pair(a, b)
            == pytest.approx(GavelPackingAllocation()._pair(a, b)))


def test_under_gimbal_gavel_values_unequal_pairs_as_gimbal_will_run_them():
    def allocation(**kw):
        return build_scheduler("gavel-packing", **kw).allocation

    assert allocation().unequal_speed == "straggling"  # plain Gavel sees its stragglers
    assert allocation(coordination="gimbal").unequal_speed == "balanced"
    assert allocation(coordination="gimbal").relaxed
    assert allocation(coordination="gimbal", settings={"sample_stealing": "false"}).unequal_speed == "straggling"
    assert allocation(coordination="gimbal", settings={"unequal_speed": "straggling"}).unequal_speed == "straggling"


def test_an_unknown_unequal_speed_is_refused():
    from dlsched.core import InputError

    with pytest.raises(InputError, match="unequal_speed"):
        build_scheduler("gavel-packing", settings={"unequal_speed": "fast"})


def progress(alloc: GavelPackingAllocation, view: ClusterView, x: dict) -> dict[str, float]:
    """Each job's progress rate (fraction of its remaining run alone per second of the LP's plan)."""
    by = {j.job_id: j for j in view.jobs}
    rate = dict.fromkeys(by, 0.0)
    for combo, share in x.items():
        speeds = (1.0,) if len(combo) == 1 else alloc._pair(by[combo[0]], by[combo[1]])
        for j, v in zip(combo, speeds, strict=True):
            rate[j] += share * v / by[j].spec.duration_s
    return rate


def test_the_throughput_tiebreak_runs_jobs_alone_on_gpus_that_would_stay_idle():
    # two GPUs, a long and a short job that pack well: the long job bounds the makespan whatever the short one
    # does, so packing them is as makespan-optimal as running both alone, but does less work per second
    cluster = small_cluster((("a40", 1, 2),))
    view = view_of(cluster, [spec("long", "efficientnet", 1, 3600.0), spec("short", "mobilenetv2", 1, 600.0)])
    alloc = GavelPackingAllocation(tiebreak="throughput")
    x = alloc.shares(view, view.jobs)
    assert x.get(("long", "short"), 0.0) == pytest.approx(0.0, abs=1e-6)
    assert x[("long",)] == pytest.approx(1.0) and x[("short",)] == pytest.approx(1.0)


def test_the_throughput_tiebreak_keeps_the_makespan_optimum():
    # one GPU, two jobs: the makespan optimum packs them (0.91 + 0.92 beats taking turns); the tiebreak
    # may pick another optimal plan but never a slower slowest job
    view = view_of(ONE_GPU, [spec("a", "efficientnet", 1, 3600.0), spec("b", "mobilenetv2", 1, 1800.0)])
    plain, tb = GavelPackingAllocation(tiebreak="none"), GavelPackingAllocation(tiebreak="throughput")
    slowest = min(progress(plain, view, plain.shares(view, view.jobs)).values())
    assert min(progress(tb, view, tb.shares(view, view.jobs)).values()) == pytest.approx(slowest, rel=1e-6)
    with pytest.raises(ValueError, match="tiebreak"):
        GavelPackingAllocation(tiebreak="fastest")


MODELS = ("efficientnet", "mobilenetv2", "resnet50", "resnet18", "lstm", "vgg11")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(MODELS), st.sampled_from((1, 2, 4)), st.integers(1, 20)),
                min_size=2, max_size=5),
       st.booleans(), st.sampled_from(("straggling", "balanced")))
def test_the_tiebreak_never_slows_the_slowest_job_nor_overfills_the_cluster(jobs, relaxed, unequal):
    cluster = small_cluster((("a40", 2, 2),))
    view = view_of(cluster, [spec(f"j{i}", m, g, 600.0 * d) for i, (m, g, d) in enumerate(jobs)])
    plain = GavelPackingAllocation(relaxed=relaxed, unequal_speed=unequal, tiebreak="none")
    tb = GavelPackingAllocation(relaxed=relaxed, unequal_speed=unequal, tiebreak="throughput")
    x = tb.shares(view, view.jobs)
    by = {j.job_id: j for j in view.jobs}
    assert sum(v * max(by[j].spec.num_gpus for j in c) for c, v in x.items()) <= cluster.num_gpus + 1e-6
    for j in by:
        assert sum(v for c, v in x.items() if j in c) <= 1.0 + 1e-6
    slowest = min(progress(plain, view, plain.shares(view, view.jobs)).values())
    assert min(progress(tb, view, x).values()) >= slowest * (1 - 1e-6)
