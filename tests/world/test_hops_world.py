"""The Hops world: GPU types, server hosts that gate data loading, equation 1's patterns and placement sensitivity."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.clusters import load_cluster
from dlsched.core import Adaptivity, InputError, JobSpec, Placement
from dlsched.world.base import World
from dlsched.world.hops import GPUS, MODELS, HopsJobPhysics
from dlsched.world.hops_draws import IterationShape, ServerLoad, expected_iteration
from dlsched.world.hops_params import SIGMA_HIT, SIGMA_MISS


def hops_job(model: str, counts=(1, 2, 4, 8), duration=3600.0) -> JobSpec:
    return JobSpec("j", 0.0, model, counts[(len(counts) - 1) // 2], duration_s=duration, reference_gpu="1080ti",
                   adaptivity=Adaptivity.STRONG_SCALING, gpu_counts=counts, per_gpu_batch=True)


@pytest.fixture(scope="module")
def world64():
    return World(load_cluster("hops-64"))


def gpus_of(cluster, node, k):
    return list(cluster.gpus_of_node(node))[:k]


def test_presets_are_the_papers_clusters():
    c64, c512 = load_cluster("hops-64"), load_cluster("hops-512")
    assert (c64.num_gpus, len(c64.nodes), c512.num_gpus, len(c512.nodes)) == (64, 10, 512, 64)
    assert c64.gpus_per_type == {"1080ti": 16, "titanxp": 32, "rtx3090": 16}
    assert {n.host for n in c64.nodes if n.gpu_type == "rtx3090"} == {"sugon-w780g", "tigerway-yk8100-8g"}
    assert {n.host for n in c512.nodes if n.gpu_type == "rtx3090"} == {
        "sugon-w780g", "tigerway-yk8100-8g", "tigerway-yk8100-10g"}


def test_faster_gpus_train_faster(world64):
    c = world64.cluster
    phys = world64.physics(hops_job("resnet50"))
    one = {t: world64.rate(phys, 0.0, Placement.of(gpus_of(c, c.nodes_of_type[t][0], 1))).work_per_s
           for t in GPUS}
    assert one["1080ti"] < one["titanxp"] < one["rtx3090"]


def test_a_better_host_speeds_up_data_bound_jobs_only(world64):
    c = world64.cluster
    sugon, tiger = (n.node_id for n in c.nodes if n.gpu_type == "rtx3090" and n.host == "sugon-w780g"), \
        (n.node_id for n in c.nodes if n.gpu_type == "rtx3090" and n.host == "tigerway-yk8100-8g")
    s, t = next(sugon), next(tiger)
    data_bound = world64.physics(hops_job("mobilenet_v2"))  # ImageNet loading outweighs a small network
    compute_bound = world64.physics(hops_job("gpt2-medium"))
    rate = lambda p, gpus: world64.rate(p, 0.0, Placement.of(gpus)).work_per_s  # noqa: E731
    assert rate(data_bound, gpus_of(c, t, 2)) > 1.2 * rate(data_bound, gpus_of(c, s, 2))
    assert rate(compute_bound, gpus_of(c, t, 2)) == pytest.approx(rate(compute_bound, gpus_of(c, s, 2)), rel=1e-3)
    # a job over both servers runs at the slower one's pace
    both = gpus_of(c, s, 2) + gpus_of(c, t, 2)
    assert rate(data_bound, both) <= 2 * rate(data_bound, gpus_of(c, s, 2))


def test_placement_sensitivity_follows_gradient_size_over_compute(world64):
    c = world64.cluster
    node_a, node_b = c.nodes_of_type["rtx3090"][:2]

    def rho(model):
        p = world64.physics(hops_job(model))
        one = world64.rate(p, 0.0, Placement.of(gpus_of(c, node_a, 1))).work_per_s
        two = world64.rate(p, 0.0, Placement.of(gpus_of(c, node_a, 1) + gpus_of(c, node_b, 1))).work_per_s
        return one / (two / 2)

    assert rho("vgg11") > 1.4  # 133 M parameters against little compute: sensitive
    assert rho("resnet50") < 1.4 and rho("densenet161") < 1.4
    assert rho("vgg11") > rho("resnet50")


def test_a_job_reports_its_batch_and_the_time_it_waits_on_synchronisation(world64):
    # what a real job's timers and framework give a scheduler: its per-GPU batch, the global batch growing
    # with the count, and the part of an iteration spent waiting on the all-reduce (none on one GPU)
    c = world64.cluster
    phys = world64.physics(hops_job("vgg11", counts=(1, 2, 4, 8, 16)))
    assert phys.batch_limits() == (32, 32 * 16)
    node_a, node_b = c.nodes_of_type["1080ti"][:2]
    one = world64.rate(phys, 0.0, Placement.of(gpus_of(c, node_a, 1)))
    across = world64.rate(phys, 0.0, Placement.of(gpus_of(c, node_a, 2) + gpus_of(c, node_b, 2)))
    assert (one.local_bsz, one.batch_size, one.sync_time_s) == (32, 32, 0.0)
    assert (across.local_bsz, across.batch_size) == (32, 128)
    assert across.step_time_s == pytest.approx(128 / across.throughput_sps)
    # vgg11's 133 M parameters over the network: most of the slower step is waiting on synchronisation
    assert 0.5 * (across.step_time_s - one.step_time_s) < across.sync_time_s < across.step_time_s


def test_equation_1_patterns_and_the_slowest_server():
    # pattern 1 hides loading behind the GPU work, pattern 2 adds it; a second, slower server gates the job
    fast, slow = ServerLoad(0.05, 0.2, 0.9), ServerLoad(0.1, 0.4, 0.3)
    one = IterationShape(0.3, 0.0, 1, (fast,))
    two = IterationShape(0.3, 0.0, 2, (fast,))
    assert 0.3 <= expected_iteration(one) < expected_iteration(two)
    assert expected_iteration(two) == pytest.approx(0.3 + 0.9 * 0.05 + 0.1 * 0.2, rel=0.05)
    assert expected_iteration(IterationShape(0.3, 0.0, 2, (fast, slow))) > expected_iteration(
        IterationShape(0.3, 0.0, 2, (slow,)))
    assert expected_iteration(one) == expected_iteration(IterationShape(0.3, 0.0, 1, (fast,)))  # the truth is fixed


def test_duration_is_the_run_time_on_the_request(world64):
    spec = hops_job("vit", counts=(2, 4, 8), duration=7200.0)
    phys = world64.physics(spec)
    assert isinstance(phys, HopsJobPhysics)
    c = world64.cluster
    ref = Placement.of(gpus_of(c, c.nodes_of_type["1080ti"][0], spec.num_gpus))
    assert phys.total_work / world64.rate(phys, 0.0, ref).work_per_s == pytest.approx(7200.0)


def test_latency_ratio_age_is_equation_9_over_the_clusters_gpu_types(world64):
    # hops-64: a quarter of the GPUs are 1080Ti, half TitanXp, a quarter RTX 3090 (P(type) of eq. 9)
    rigid = world64.physics(JobSpec("r", 0.0, "resnet50", 4, duration_s=3600.0, reference_gpu="1080ti",
                                    gpu_counts=(4,), per_gpu_batch=True))
    runs = {t: rigid.isolated_runtime_s(t, 4) for t in GPUS}
    assert rigid.expected_runtime_s() == pytest.approx(
        0.25 * runs["1080ti"] + 0.5 * runs["titanxp"] + 0.25 * runs["rtx3090"])
    assert rigid.expected_runtime_s() > rigid.ideal_runtime_s()  # not the best type's run time
    # a job that accepts 2, 4 or 8 GPUs is expected to run at its mean requirement, 14/3, by per-GPU throughput
    elastic = world64.physics(hops_job("resnet50", counts=(2, 4, 8)))
    per_gpu = {t: elastic.isolated_runtime_s(t, 4) * 4 for t in GPUS}
    assert elastic.expected_runtime_s() == pytest.approx(
        (0.25 * per_gpu["1080ti"] + 0.5 * per_gpu["titanxp"] + 0.25 * per_gpu["rtx3090"]) / (14 / 3))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.sampled_from(sorted(MODELS)), counts=st.sets(st.sampled_from((1, 2, 4, 8, 16)), min_size=1))
def test_latency_ratio_age_lies_between_the_fastest_and_slowest_type(world64, model, counts):
    spec = hops_job(model, counts=tuple(sorted(counts)))
    phys = world64.physics(spec)
    r_avg = sum(counts) / len(counts)
    k = spec.num_gpus
    at_mean = [phys.isolated_runtime_s(t, k) * k / r_avg for t in GPUS]
    assert min(at_mean) * (1 - 1e-9) <= phys.expected_runtime_s() <= max(at_mean) * (1 + 1e-9)


def test_unknown_host_is_refused(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("name: x\nnodes:\n  - {gpu_type: rtx3090, count: 1, gpus_per_node: 4, host: dell}\n")
    with pytest.raises(InputError, match="unknown host 'dell'"):
        load_cluster(str(p))


def test_hops_jobs_on_a_cluster_without_hops_gpus_are_refused_up_front():
    from dlsched.clusters import load_cluster as load

    with pytest.raises(InputError, match="runs on 1080ti, titanxp, rtx3090 only"):
        World(load("sia-hetero-64")).physics(hops_job("vgg11"))


def test_data_loading_is_a_mix_of_cache_hits_and_misses_on_a_host_that_cannot_cache_the_dataset(world64):
    # ImageNet (140 GB) on a Sugon server (192 GB of memory): some loads hit the page cache, the rest read
    # from storage, and the two show as two groups of times in what the job reports
    c = world64.cluster
    sugon = next(n for n in c.nodes if n.gpu_type == "rtx3090" and n.host == "sugon-w780g")
    phys = world64.physics(hops_job("resnet50"))
    p_hit = phys.hops.p_hit("sugon-w780g")
    assert 0.1 < p_hit < 0.9
    load = phys.hops.server_load("rtx3090", "sugon-w780g")
    placement = Placement.of(list(c.gpus_of_node(sugon.node_id))[:1])
    samples = []
    for _ in range(100):
        samples += world64.observation_details(phys, placement, world64.rate(phys, 0.0, placement))["data_load_s"]
    # two lognormal components (medians hit_s and miss_s): the share of loads below a cut between them is
    # the hit chance times a hit's chance to be below it plus the same for a miss
    cut = (load.hit_s * load.miss_s) ** 0.5
    below = sum(x < cut for x in samples) / len(samples)
    phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    expected = p_hit * phi(math.log(cut / load.hit_s) / SIGMA_HIT) + (1 - p_hit) * phi(
        math.log(cut / load.miss_s) / SIGMA_MISS)
    assert below == pytest.approx(expected, abs=0.05)
    # both components show: many loads near a hit's median and many near a miss's, few in between
    near = lambda m: sum(abs(math.log(x / m)) < 0.1 for x in samples) / len(samples)  # noqa: E731
    assert near(load.hit_s) > 0.2 and near(load.miss_s) > 0.1 and near(cut) < min(near(load.hit_s), near(load.miss_s))
    # a host with twice the memory caches more of it, and CIFAR-10 fits any page cache
    assert phys.hops.p_hit("tigerway-yk8100-8g") > p_hit
    assert world64.physics(hops_job("resnet18-cifar10")).hops.p_hit("sugon-w780g") > 0.9


def test_restarts_cost_the_checkpoint_restore_delay_of_the_worlds_table_by_default():
    world = World(load_cluster("hops-64"))
    phys = world.physics(hops_job("resnet50"))
    assert phys.restart_delay_s == world.throughput.restart_delay_s("resnet50") == 30.0
    from dlsched.world.config import WorldConfig

    off = World(load_cluster("hops-64"), WorldConfig(restart_delay_scale=0.0)).physics(hops_job("resnet50"))
    assert off.restart_delay_s == 0.0
