"""What a Hops job reports (its servers, time components, data loading) and what the estimator makes of it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.clusters import load_cluster
from dlsched.core import Adaptivity, JobSpec, Placement
from dlsched.estimators.hops_throughput import HopsThroughput, detect_pattern
from dlsched.estimators.throughput_store import ThroughputStore
from dlsched.world.base import World
from dlsched.world.hops import MODELS


def hops_job(model: str) -> JobSpec:
    return JobSpec("j", 0.0, model, 4, duration_s=3600.0, reference_gpu="1080ti",
                   adaptivity=Adaptivity.STRONG_SCALING, gpu_counts=(1, 2, 4, 8), per_gpu_batch=True)


@pytest.fixture(scope="module")
def world64():
    return World(load_cluster("hops-64"))


def test_a_profile_reports_its_server_components_and_the_pattern_it_follows(world64):
    c = world64.cluster
    node = c.nodes_of_type["rtx3090"][0]
    # data-bound enough for the patterns to differ (for DistilBERT, whose text loads in under a millisecond,
    # the two patterns predict the same time within 0.1% and either may be detected)
    for model in ("resnet50", "vit"):
        phys = world64.physics(hops_job(model))
        _, (obs,) = world64.profile(phys, Placement.of(list(c.gpus_of_node(node))[:1]), 0.0)
        assert obs.servers == ((node, 1),)
        comps = dict(obs.components)
        assert set(comps) == {"T_f", "T_b", "T_u", "T_c", "params"} and comps["T_c"] == 0.0
        assert comps["params"] == pytest.approx(MODELS[model].params_m * 1e6)
        assert len(obs.data_load_s) == 1
        assert detect_pattern(comps, obs) == MODELS[model].pattern


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from(sorted(m for m, spec in MODELS.items() if spec.pattern == 1)),
       gpu_type=st.sampled_from(["1080ti", "titanxp", "rtx3090"]), k=st.sampled_from([2, 3, 4]),
       spread=st.booleans())
def test_the_formula_from_one_profile_predicts_unseen_shapes_of_pattern_1_jobs(world64, tmp_path_factory, model,
                                                                                 gpu_type, k, spread):
    """Pattern 1 is equation 1 as the world plays it: one one-GPU profile predicts every shape on servers
    of the profiled host (eq. 2 with the world's bandwidths, the slowest server gating)."""
    c = world64.cluster
    nodes = [n for n in c.nodes_of_type[gpu_type] if c.nodes[n].host == c.nodes[c.nodes_of_type[gpu_type][0]].host]
    phys = world64.physics(hops_job(model))
    est = HopsThroughput(ThroughputStore(str(tmp_path_factory.mktemp("s") / "s.sqlite")))
    _, (profile,) = world64.profile(phys, Placement.of(list(c.gpus_of_node(nodes[0]))[:1]), 0.0)
    est.store.record("j", profile, detect_pattern)
    servers = ((nodes[0], k), (nodes[1], k)) if spread and len(nodes) > 1 else ((nodes[0], k),)
    gpus = [g for n, m in servers for g in list(c.gpus_of_node(n))[:m]]
    truth = world64.rate(phys, 0.0, Placement.of(gpus)).throughput_sps
    tput, layers = est.explain("j", gpu_type, servers)
    assert set(layers) == {"formula"}
    assert tput == pytest.approx(truth, rel=1e-9)
