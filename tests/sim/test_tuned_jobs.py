"""TunedJobs: each adaptive job gets a (batch size, GPU count) at 50-80% of ideal speedup over one GPU."""

from __future__ import annotations

import numpy as np
import pytest

from dlsched.clusters import load_cluster
from dlsched.core import Adaptivity, InputError, JobSpec
from dlsched.sim.config import RunConfig
from dlsched.sim.run_jobs import load_jobs
from dlsched.sim.tuned_jobs import (
    Combination,
    batch_candidates,
    choose,
    combinations,
    default_max_gpus,
    reference_type,
    split_suffix,
    tuned_jobs,
)
from dlsched.world.base import World
from testkit import duration_job, small_cluster

MODELS = ("cifar10", "deepspeech2", "bert")


@pytest.fixture(scope="module")
def hetero():
    cluster = load_cluster("sia-hetero-64")
    return cluster, World(cluster)


def adaptive_jobs(n=12):
    return [JobSpec(job_id=f"j{i}", submit_time_s=float(60 * i), model=MODELS[i % 3], num_gpus=1 + i % 8,
                    adaptivity=Adaptivity.ADAPTIVE) for i in range(n)]


def test_suffix_is_split_off():
    assert split_suffix("sia-philly:1@tuned") == ("sia-philly:1", True)
    assert split_suffix("sia-philly:1@rigid@TUNED") == ("sia-philly:1@rigid", True)
    assert split_suffix("sia-philly:1@rigid") == ("sia-philly:1@rigid", False)


def test_batch_candidates_double_up_to_the_maximum():
    assert batch_candidates(128, 4096) == [128, 256, 512, 1024, 2048, 4096]
    assert batch_candidates(12, 384) == [12, 24, 48, 96, 192, 384]
    assert batch_candidates(20, 50) == [20, 40, 50]


def test_gpu_limit_is_16_on_heterogeneous_and_64_on_homogeneous_clusters(hetero):
    assert default_max_gpus(hetero[0]) == 16
    assert default_max_gpus(load_cluster("sia-homo-64")) == 64
    assert default_max_gpus(small_cluster((("t4", 2, 4), ("a100", 1, 2)))) == 8  # the largest single-type pool


def test_reference_type_is_the_least_powerful(hetero):
    cluster, world = hetero
    assert reference_type(cluster, "cifar10", world) == "t4"


def test_every_tuned_job_is_inside_the_band(hetero):
    cluster, world = hetero
    specs = adaptive_jobs()
    out = tuned_jobs(specs, cluster, seed=3, world=world)
    table = {m: {(c.batch_size, c.num_gpus): c for c in combinations(world, m, "t4", 16)} for m in MODELS}
    for before, after in zip(specs, out, strict=True):
        assert after.job_id == before.job_id and after.submit_time_s == before.submit_time_s
        assert after.adaptivity is before.adaptivity
        assert 1 <= after.num_gpus <= 16
        c = table[after.model][(after.batch_size, after.num_gpus)]
        assert 0.5 <= c.efficiency <= 0.8


def test_efficiency_is_measured_against_one_gpu_at_its_best_batch(hetero):
    _, world = hetero
    combos = combinations(world, "cifar10", "t4", 4)
    one = [c for c in combos if c.num_gpus == 1]
    assert max(c.efficiency for c in one) == pytest.approx(1.0)
    for c in combos:
        assert c.efficiency == pytest.approx(min(o.runtime_s for o in one) / (c.num_gpus * c.runtime_s))


def test_choices_are_seeded_and_stable_under_truncation(hetero):
    cluster, world = hetero
    specs = adaptive_jobs(12)
    a = tuned_jobs(specs, cluster, seed=5, world=world)
    assert a == tuned_jobs(specs, cluster, seed=5, world=world)
    assert tuned_jobs(specs[:6], cluster, seed=5, world=world) == a[:6]
    others = [tuned_jobs(specs, cluster, seed=s, world=world) for s in range(6, 9)]
    assert any(o != a for o in others)


def test_jobs_without_an_adaptive_model_are_left_alone(hetero):
    cluster, world = hetero
    rigid = duration_job("d0", 0.0, 3, 600.0)
    assert tuned_jobs([rigid], cluster, world=world) == [rigid]


def test_closest_combination_when_none_is_in_the_band():
    opts = [Combination(128, 1, 10.0, 1.0), Combination(128, 8, 5.0, 0.25), Combination(256, 4, 4.0, 0.45)]
    rng = np.random.default_rng(0)
    assert choose(opts, rng, 0.5, 0.8).num_gpus == 4
    with pytest.raises(InputError):
        tuned_jobs([], small_cluster(), low=0.9, high=0.5)


def test_trace_suffix_reaches_tunedjobs_through_load_jobs(hetero):
    cluster, _ = hetero
    spec = "synthetic:rate=20,hours=1,seed=2@tuned"
    specs, name = load_jobs(RunConfig(trace=spec, jobs=5), cluster)
    assert name.endswith("@tuned") and len(specs) == 5
    plain, _ = load_jobs(RunConfig(trace="synthetic:rate=20,hours=1,seed=2", jobs=5))
    assert [s.job_id for s in specs] == [s.job_id for s in plain]
    assert all(s.num_gpus <= 16 for s in specs)
    with pytest.raises(InputError):
        load_jobs(RunConfig(trace=spec, jobs=5))
