"""Packing baselines: Lucid packs equal-size jobs its sharing test accepts, relaxed packs unequal ones in
stars, rule-breaking packings run one after another, Slurm never shares a GPU."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, ClusterView, Decision, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.core.packing import holders, packing_problem
from dlsched.policies import build_scheduler
from dlsched.policies.packing import PackingRules
from dlsched.sim.engine import Engine, SimConfig
from dlsched.world.base import World, WorldConfig
from testkit import Recorder, assert_round_invariants, small_cluster

CLUSTER = small_cluster((("a40", 2, 2),))  # 2 nodes of 2 GPUs


def job(job_id: str, model: str, gpus: int, duration: float, submit: float = 0.0,
        batch: int | None = None) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=submit, model=model, num_gpus=gpus, duration_s=duration,
                   adaptivity=Adaptivity.RIGID, reference_gpu="a40", batch_size=batch)


def simulate(cluster, specs, policy, ordering=None, placement=None, **settings):
    rec = Recorder(build_scheduler(policy, ordering=ordering, placement=placement,
                                   settings={k: str(v) for k, v in settings.items()}))
    world = World(cluster, WorldConfig(variability=False), seed=0)
    res = Engine(cluster, specs, rec, world, SimConfig(round_s=60.0)).run()
    return {r.job_id: r for r in res.jobs}, rec.log


def shared_pairs(log) -> set[frozenset[str]]:
    out = set()
    for _, d in log:
        placements = {j: a.placement for j, a in d.allocations.items() if a.placement}
        for jobs in holders(placements).values():
            if len(jobs) > 1:
                out.add(frozenset(jobs))
    return out


def test_lucid_packs_light_equal_size_jobs_fully_overlapped():
    # the cluster is full with two 2-GPU jobs; two more light 2-GPU jobs pack onto them
    specs = [job(f"j{i}", "efficientnet", 2, 3000.0) for i in range(4)]
    got, log = simulate(CLUSTER, specs, "lucid")
    assert len(shared_pairs(log)) == 2
    for _, d in log:
        placements = {j: a.placement for j, a in d.allocations.items() if a.placement}
        assert packing_problem(placements, CLUSTER, equal_only=True) is None
    assert all(r.start_s == 0.0 for r in got.values())  # nobody queued


def test_lucid_does_not_pack_unequal_jobs_but_relaxed_does():
    specs = [job("big", "resnet50", 4, 3000.0), job("small", "efficientnet", 2, 600.0, submit=30.0)]
    conservative, log = simulate(CLUSTER, specs, "lucid")
    assert not shared_pairs(log) and conservative["small"].start_s >= 3000.0  # waits for the big job
    relaxed, log = simulate(CLUSTER, specs, "lucid", relaxed=True)
    assert shared_pairs(log) == {frozenset({"big", "small"})}
    assert relaxed["small"].start_s == 60.0  # packed onto the big job at the first round it is there


def test_lucid_keeps_heavy_pairs_apart():
    # two BERTs: 99.6% utilisation each, far over Lucid's limit: the second one waits
    specs = [job("a", "bert", 4, 600.0), job("b", "bert", 4, 600.0)]
    got, log = simulate(CLUSTER, specs, "lucid")
    assert not shared_pairs(log) and got["b"].start_s >= 600.0


@pytest.mark.parametrize(("a", "b", "by_score", "by_util"), [
    # Lucid's scores 2 + 0 (ResNet-50 saturates the GPU, PointNet barely uses it): packs; utilisations 107%
    (("resnet50", 32), ("pointnet", 32), True, False),
    # 1 + 1 (two mobile networks at batch 64): packs; utilisations 49% + 66% = 116%
    (("mobilenetv2", 64), ("mobilenetv3", 64), True, False),
    # ResNet-18 at batch 64 scores 2 (at 32 it scores 0), EfficientNet at 64 scores 1: 3 > 2; utilisations 99.5%
    (("resnet18", 64), ("efficientnet", 64), False, True),
    (("resnet18", 32), ("efficientnet", 64), True, True),
])
def test_lucids_sharing_score_decides_by_model_and_batch_and_util_is_the_simplified_option(a, b, by_score, by_util):
    specs = [job("a", a[0], 2, 3000.0, batch=a[1]), job("b", b[0], 2, 3000.0, batch=b[1])]
    cluster = small_cluster((("a40", 1, 2),))  # one node of 2 GPUs: the second job packs or waits
    for test, packs in (("score", by_score), ("util", by_util)):
        got, log = simulate(cluster, specs, "lucid", sharing_test=test)
        assert bool(shared_pairs(log)) is packs, test
        assert (got["b"].start_s == 0.0) is packs


def test_an_unknown_sharing_test_is_refused():
    with pytest.raises((InputError, ValueError), match="sharing_test"):
        build_scheduler("lucid", settings={"sharing_test": "gut-feeling"})


def test_a_packing_that_breaks_the_rules_runs_one_job_after_the_other():
    view_jobs = [JobView(spec=job(j, "resnet18", k, 100.0), status=JobStatus.QUEUED, placement=Placement.empty(),
                         batch_size=None, age_s=0.0, wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0,
                         restarts=0, progress_fraction=0.0, start_time_s=None)
                 for j, k in (("a", 4), ("b", 2), ("c", 2))]
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=CLUSTER, jobs=view_jobs)
    d = Decision()
    d.place("a", Placement.of([0, 1, 2, 3]))
    d.place("b", Placement.of([1, 2]))  # 2 GPUs on 2 nodes where one node would do: breaks the topology rule
    d.place("c", Placement.of([2, 3]))
    out = PackingRules().coordinate(view, d)
    assert set(out.allocations) == {"a", "c"}  # b waits and runs later


def test_slurm_is_exclusive_first_come_first_served():
    specs = [job("first", "resnet50", 4, 600.0), job("second", "efficientnet", 1, 60.0, submit=10.0)]
    got, log = simulate(CLUSTER, specs, "slurm")
    assert not shared_pairs(log)
    assert got["second"].start_s >= got["first"].finish_s


def test_the_packing_placement_needs_a_coordination_that_packs():
    with pytest.raises(InputError, match="packs jobs"):
        build_scheduler("slurm", placement="packing")


MODELS = ["resnet18", "mobilenetv2", "efficientnet", "resnet50", "vgg16", "bert", "llama", "deepspeech2"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(MODELS), st.sampled_from([1, 2, 4]), st.floats(0, 1800),
                          st.floats(60, 3600)), min_size=1, max_size=10), st.booleans())
def test_lucid_packs_only_under_the_rules_and_within_memory(jobs, relaxed):
    cluster = small_cluster((("a40", 3, 2),))
    specs = [job(f"j{i}", m, k, d, s) for i, (m, k, s, d) in enumerate(jobs)]
    got, log = simulate(cluster, specs, "lucid", relaxed=relaxed)
    assert_round_invariants(cluster, log, specs, exact_gangs=True, packing=True)
    if not relaxed:
        for _, d in log:
            placements = {j: a.placement for j, a in d.allocations.items() if a.placement}
            assert packing_problem(placements, cluster, equal_only=True) is None
    assert all(r.finish_s is not None for r in got.values())


def test_edf_orders_by_deadline_then_first_come():
    from dlsched.policies.packing import EarliestDeadline

    def jv(job_id: str, submit: float, deadline: float | None) -> JobView:
        s = JobSpec(job_id=job_id, submit_time_s=submit, model="resnet18", num_gpus=1, duration_s=60.0,
                    adaptivity=Adaptivity.RIGID, deadline_s=deadline)
        return JobView(spec=s, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                       wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                       start_time_s=None)

    view = ClusterView(time_s=0.0, round_s=60.0, cluster=CLUSTER, jobs=[])
    jobs = [jv("none-early", 0.0, None), jv("late", 1.0, 900.0), jv("soon", 2.0, 300.0), jv("none-late", 3.0, None)]
    assert [j.job_id for j in EarliestDeadline().order(view, jobs)] == ["soon", "late", "none-early", "none-late"]


@pytest.mark.parametrize(("host", "guest", "stays_packed"), [("resnet50", "lstm", False),
                                                            ("efficientnet", "mobilenetv2", True)])
def test_gandiva_unpacks_a_pair_slower_than_taking_turns(host, guest, stays_packed):
    specs = [job("host", host, 4, 3000.0), job("guest", guest, 4, 3000.0, submit=30.0)]
    got, log = simulate(CLUSTER, specs, "lucid", ordering="edf", placement="gandiva", score_limit=4)
    packed_rounds = [view.time_s for view, d in log  # rounds in which both jobs hold the same GPUs
                     if len(d.allocations) == 2 and len({a.placement for a in d.allocations.values()}) == 1]
    assert packed_rounds and packed_rounds[0] == 60.0  # packed the first round the guest is there
    if stays_packed:
        assert got["guest"].start_s == 60.0 and got["guest"].restarts == 0
    else:
        # measured 0.41 + 0.42 of their speeds alone over the first round the guest ran through (the round it
        # started in restores its checkpoint and is not measured): unpacked, the guest waits for the host
        assert packed_rounds == [60.0, 120.0]
        assert got["guest"].finish_s > got["host"].finish_s
