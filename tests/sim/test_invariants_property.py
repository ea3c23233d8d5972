"""Property-based tests: invariants that must hold for any cluster, trace and baseline policy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, JobSpec
from dlsched.policies import build_scheduler
from dlsched.sim.engine import Engine, SimConfig
from dlsched.world.base import World, WorldConfig
from testkit import Recorder, assert_round_invariants, small_cluster

POLICIES = ["fifo", "sjf", "srtf", "las", "tiresias", "fifo-packed", "random", "random-sticky"]
ADAPTIVE_MODELS = ["cifar10", "ncf", "bert", "deepspeech2"]


@st.composite
def clusters(draw):
    types = draw(st.lists(st.sampled_from(["t4", "rtx", "v100", "a100"]), min_size=1, max_size=3, unique=True))
    groups = tuple((t, draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4, 8]))) for t in types)
    return small_cluster(groups)


@st.composite
def traces(draw, cluster):
    max_pool = cluster.max_gpus_single_type()
    n = draw(st.integers(1, 14))
    specs = []
    for i in range(n):
        submit = draw(st.floats(0, 4000, allow_nan=False))
        gpus = draw(st.integers(1, max_pool))
        if draw(st.booleans()):
            specs.append(JobSpec(job_id=f"j{i}", submit_time_s=submit, model="philly", num_gpus=gpus,
                                 duration_s=draw(st.floats(30, 5000)), adaptivity=Adaptivity.RIGID))
        else:
            model = draw(st.sampled_from(ADAPTIVE_MODELS))
            specs.append(JobSpec(job_id=f"j{i}", submit_time_s=submit, model=model, num_gpus=gpus,
                                 adaptivity=Adaptivity.ADAPTIVE))
    return specs




def simulate(cluster, specs, policy, seed):
    rec = Recorder(build_scheduler(policy, seed=seed))
    world = World(cluster, WorldConfig(locality_penalty=1.3), seed=seed)
    res = Engine(cluster, specs, rec, world, SimConfig(round_s=120.0, max_time_s=4 * 86400)).run()
    return res, rec.log


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(POLICIES), seed=st.integers(0, 3))
def test_invariants_hold_every_round(data, policy, seed):
    cluster = data.draw(clusters())
    specs = data.draw(traces(cluster))
    res, log = simulate(cluster, specs, policy, seed)
    by_id = {s.job_id: s for s in specs}
    assert_round_invariants(cluster, log, specs, exact_gangs=True)  # a rigid policy gives exactly the request
    # every submitted job is accounted for, exactly once
    assert sorted(r.job_id for r in res.jobs) == sorted(by_id)
    for r in res.jobs:
        if r.finish_s is not None:
            assert r.finish_s >= r.submit_s and r.start_s is not None and r.start_s >= r.submit_s
    # GPU-seconds consumed equal the sum over jobs of time x GPUs held
    seg_total = sum((s.end_s - s.start_s) * s.num_gpus for s in res.segments)
    assert seg_total == pytest.approx(sum(r.gpu_s for r in res.jobs), rel=1e-9, abs=1e-6)
    # and never exceed what the cluster had
    assert sum(r.gpu_s for r in res.jobs) <= cluster.num_gpus * res.end_time_s + 1e-6


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(POLICIES), seed=st.integers(0, 3))
def test_same_seed_same_result(data, policy, seed):
    cluster = data.draw(clusters())
    specs = data.draw(traces(cluster))
    a, _ = simulate(cluster, specs, policy, seed)
    b, _ = simulate(cluster, specs, policy, seed)
    key = [(r.job_id, r.start_s, r.finish_s, r.gpu_s, r.restarts) for r in a.jobs]
    assert key == [(r.job_id, r.start_s, r.finish_s, r.gpu_s, r.restarts) for r in b.jobs]


def test_all_jobs_finish_when_cluster_is_big_enough():
    cluster = small_cluster((("v100", 4, 4),))
    specs = [JobSpec(job_id=f"j{i}", submit_time_s=float(i * 50), model="philly", num_gpus=1 + i % 4,
                     duration_s=300.0 + 17 * i) for i in range(30)]
    res, _ = simulate(cluster, specs, "fifo", 0)
    assert all(r.finish_s is not None for r in res.jobs)
    assert np.isfinite([r.jct_s for r in res.jobs]).all()
