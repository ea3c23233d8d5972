"""Hops's throughput estimator (section 3.5) and its multi-layer SQLite store (section 3.3)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import ThroughputObservation
from dlsched.estimators.hops_throughput import (
    DataLoadMixture,
    HopsThroughput,
    comm_time,
    detect_pattern,
    expected_iteration,
    fit_mixture,
    iteration_time,
)
from dlsched.estimators.throughput_store import ThroughputStore, check_location, store_path

COMPONENTS = (("T_f", 0.1), ("T_b", 0.2), ("T_u", 0.05), ("T_c", 0.0), ("params", 25e6))


def obs(servers, step_s, *, batch=32, components=(), loads=(), t=0.0) -> ThroughputObservation:
    return ThroughputObservation(time_s=t, gpu_type="rtx3090", num_nodes=len(servers),
                                 num_gpus=sum(k for _, k in servers), local_bsz=batch, accum_steps=1,
                                 step_time_s=step_s, sync_time_s=0.0, servers=tuple(servers),
                                 components=components, data_load_s=loads)


# -- equations 1, 2 and 4 against hand-computed values ----------------------------------------------------------
def test_equation_1_both_patterns():
    # comm = max(T_b + 0.2 T_c, T_c) = max(0.2 + 0.1, 0.5) = 0.5
    assert iteration_time(0.3, 0.1, 0.2, 0.05, 0.5, pattern=1) == pytest.approx(0.65)  # max(0.3, 0.55) + 0.1
    assert iteration_time(0.3, 0.1, 0.2, 0.05, 0.5, pattern=2) == pytest.approx(0.9)  # 0.3 + 0.5 + 0.1
    # data loading longer than the GPU work: hidden no more in pattern 1, added in full in pattern 2
    assert iteration_time(1.0, 0.1, 0.2, 0.05, 0.5, pattern=1) == pytest.approx(1.1)
    assert iteration_time(1.0, 0.1, 0.2, 0.05, 0.5, pattern=2) == pytest.approx(1.6)
    # backward propagation hides most of a short communication: T_b + 0.2 T_c wins
    assert iteration_time(0.0, 0.1, 0.2, 0.0, 0.1, pattern=2) == pytest.approx(0.1 + 0.22)


def test_equation_2_ring_inside_a_server_network_across():
    # 25M parameters = 0.1 GB of 4-byte gradients
    assert comm_time(25e6, 1, 1, 6.0, 2.5) == 0.0
    assert comm_time(25e6, 4, 1, 6.0, 2.5) == pytest.approx(0.1 / 6.0 * 3 / 4)
    assert comm_time(25e6, 8, 1, 6.0, 2.5) == pytest.approx(0.1 / 6.0 * 7 / 8)
    assert comm_time(25e6, 4, 2, 6.0, 2.5) == pytest.approx(0.1 / 2.5)
    assert comm_time(25e6, 16, 4, 6.0, 2.5) == pytest.approx(0.1 / 2.5)  # bandwidth only, not the ring size


def test_equation_4_expectation_over_hit_and_miss():
    mix = DataLoadMixture(p_cache=0.7, mu_cache=0.1, sigma_cache=0.0, mu_load=0.5, sigma_load=0.0)
    # hit: max(0.1, 0.2 + 0.05) + 0.1 = 0.35; miss: max(0.5, 0.25) + 0.1 = 0.6
    assert expected_iteration(mix, 0.1, 0.2, 0.05, 0.0, pattern=1) == pytest.approx(0.7 * 0.35 + 0.3 * 0.6)
    # pattern 2: hit 0.1 + 0.2 + 0.1 = 0.4, miss 0.5 + 0.2 + 0.1 = 0.8
    assert expected_iteration(mix, 0.1, 0.2, 0.05, 0.0, pattern=2) == pytest.approx(0.7 * 0.4 + 0.3 * 0.8)


# -- equation 3's mixture --------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(p=st.floats(0.2, 0.8), mu_c=st.floats(0.01, 1.0), gap=st.floats(0.5, 5.0), seed=st.integers(0, 2**16))
def test_mixture_recovers_hit_rate_and_means(p, mu_c, gap, seed):
    rng = np.random.default_rng(seed)
    mu_l, sd = mu_c * (1 + gap), 0.02 * mu_c
    hits = rng.random(2000) < p
    x = np.where(hits, rng.normal(mu_c, sd, 2000), rng.normal(mu_l, sd, 2000))
    mix = fit_mixture(x)
    assert mix is not None
    assert mix.p_cache == pytest.approx(hits.mean(), abs=0.01)
    assert mix.mu_cache == pytest.approx(mu_c, rel=0.02)
    assert mix.mu_load == pytest.approx(mu_l, rel=0.02)


def test_mixture_of_steady_loading_is_one_component():
    mix = fit_mixture([0.2] * 30)
    assert mix is not None and mix.p_cache == 1.0 and mix.mu_cache == pytest.approx(0.2)
    assert fit_mixture([]) is None


def test_pattern_detected_from_the_profiled_iteration():
    comps = dict(COMPONENTS)
    # T_d = 0.3: pattern 1 gives max(0.3, 0.25) + 0.1 = 0.4, pattern 2 gives 0.3 + 0.2 + 0.1 = 0.6
    assert detect_pattern(comps, obs([(0, 1)], 0.41, loads=(0.3,))) == 1
    assert detect_pattern(comps, obs([(0, 1)], 0.59, loads=(0.3,))) == 2


# -- the layers, top-down ---------------------------------------------------------------------------------------
def test_predictions_move_from_formula_to_type_to_server_layer(tmp_path):
    est = HopsThroughput(ThroughputStore(str(tmp_path / "s.sqlite")))
    target = ((1, 2),)  # 2 GPUs on server 1
    assert est.explain("j", "rtx3090", target) == (0.0, ("formula",))  # not profiled: no estimate
    # profiling on server 0, one GPU: components and data loading recorded
    est.store.record("j", obs([(0, 1)], 0.35, components=COMPONENTS, loads=(0.1,)), detect_pattern)
    tput, layers = est.explain("j", "rtx3090", target)
    t_c = 0.1 / 6.0 / 2  # eq. 2 on 2 GPUs of one server
    assert layers == ("formula",)
    assert tput == pytest.approx(2 * 32 / (max(0.1, max(0.2 + 0.2 * t_c, t_c) + 0.05) + 0.1))
    # the job runs on 2 GPUs of server 0: the type layer answers for server 1
    est.store.record("j", obs([(0, 2)], 0.5))
    assert est.explain("j", "rtx3090", target) == (pytest.approx(2 * 32 / 0.5), ("type",))
    # then on server 1 itself, slower (its host): the server layer answers there, the type layer elsewhere
    est.store.record("j", obs([(1, 2)], 0.8))
    assert est.explain("j", "rtx3090", target) == (pytest.approx(2 * 32 / 0.8), ("server",))
    mean = np.mean([32 / 0.5, 32 / 0.8])  # the type layer's mean over both servers
    assert est.explain("j", "rtx3090", ((2, 2),)) == (pytest.approx(2 * mean), ("type",))
    # a distributed configuration is gated by its slowest server; none was seen spread yet: the formula
    spread = ((0, 2), (1, 2))
    tput, layers = est.explain("j", "rtx3090", spread)
    assert layers == ("formula", "formula")
    assert tput == pytest.approx(4 * 32 / (max(0.1, max(0.2 + 0.2 * 0.04, 0.04) + 0.05) + 0.1))


@pytest.mark.parametrize("growth", [0.0, 0.5])
def test_the_mixture_is_refit_once_its_samples_grew_by_refit_growth(tmp_path, growth):
    """A long job reports thousands of loading times; the fit follows them in steps of ``refit_growth``."""
    est = HopsThroughput(ThroughputStore(str(tmp_path / "s.sqlite")), refit_growth=growth)
    est.store.record("j", obs([(0, 1)], 0.35, components=COMPONENTS, loads=(0.1,) * 3 + (0.3,) * 7),
                     detect_pattern)
    first = est.mixture("j", "rtx3090")
    assert first is not None and first.p_cache == pytest.approx(0.3)
    est.store.record("j", obs([(0, 1)], 0.35, loads=(0.1,) * 4))  # 14 samples: 40% more
    second = est.mixture("j", "rtx3090")
    if growth == 0.0:  # refit at every report
        assert second.p_cache == pytest.approx(0.5)
    else:  # below 50% more: the first fit stands, until the samples reach 15
        assert second is first
        est.store.record("j", obs([(0, 1)], 0.35, loads=(0.1,)))
        assert est.mixture("j", "rtx3090").p_cache == pytest.approx(8 / 15)


def test_the_formula_is_corrected_by_the_jobs_own_records_of_the_same_shape(tmp_path):
    """A job that reached 70% of the formula on 2 GPUs of a server is expected to reach 70% of it on 4 there
    and on other types it was profiled on; configurations spread over servers keep their own ratio."""
    est = HopsThroughput(ThroughputStore(str(tmp_path / "s.sqlite")))
    plain = HopsThroughput(est.store, correction="off")
    est.store.record("j", obs([(0, 1)], 0.35, components=COMPONENTS, loads=(0.1,)), detect_pattern)
    other = ThroughputObservation(time_s=0.0, gpu_type="a100", num_nodes=1, num_gpus=1, local_bsz=32,
                                  accum_steps=1, step_time_s=0.2, sync_time_s=0.0, servers=((9, 1),),
                                  components=COMPONENTS, data_load_s=(0.05,))
    est.store.record("j", other, detect_pattern)
    four = ((1, 4),)
    spread = ((0, 2), (1, 2))
    assert est.explain("j", "rtx3090", four) == plain.explain("j", "rtx3090", four)  # nothing to correct by yet
    two = plain.formula("j", "rtx3090", 2, 1)
    est.store.record("j", obs([(0, 2)], 32 / (0.7 * two)))  # 2 GPUs on server 0: 70% of the formula
    for e in (est, plain):  # the record itself answers for its own shape, corrected or not
        assert e.per_gpu("j", "rtx3090", 0, 2, 1) == (pytest.approx(0.7 * two), "server")
    got, layers = est.explain("j", "rtx3090", four)
    assert layers == ("formula",)
    assert got == pytest.approx(0.7 * plain.explain("j", "rtx3090", four)[0])
    assert est.explain("j", "a100", ((9, 4),))[0] == pytest.approx(0.7 * plain.explain("j", "a100", ((9, 4),))[0])
    assert est.explain("j", "rtx3090", spread) == plain.explain("j", "rtx3090", spread)  # no spread record
    with pytest.raises(ValueError, match="correction"):
        HopsThroughput(est.store, correction="scale")


def test_distributed_configuration_gated_by_the_slowest_server(tmp_path):
    est = HopsThroughput(ThroughputStore(str(tmp_path / "s.sqlite")))
    est.store.record("j", obs([(0, 1)], 0.35, components=COMPONENTS, loads=(0.1,)), detect_pattern)
    est.store.record("j", obs([(0, 2), (1, 2)], 0.5))  # spread over servers 0 and 1
    est.store.record("j", obs([(2, 2), (3, 2)], 1.0))  # spread over servers 2 and 3
    assert est.config_throughput("j", "rtx3090", ((0, 2), (1, 2))) == pytest.approx(4 * 32 / 0.5)
    # servers 0 and 2 together: the slower one's per-GPU throughput times all GPUs
    assert est.config_throughput("j", "rtx3090", ((0, 4), (2, 4))) == pytest.approx(8 * 32 / 1.0)


def test_every_observation_is_recorded(tmp_path):
    store = ThroughputStore(str(tmp_path / "s.sqlite"))
    for i in range(5):
        store.record("j", obs([(0, 2)], 0.5 + i * 0.1, loads=(0.1, 0.12), t=float(i)))
    assert store.count_observations() == 5
    assert store.type_throughput("j", "rtx3090", "aggregated", 2) == pytest.approx(
        np.mean([32 / (0.5 + i * 0.1) for i in range(5)]))
    assert len(store.data_loads("j", "rtx3090")) == 10


_READ_BACK = """
import json, sys
from dlsched.estimators.hops_throughput import HopsThroughput
from dlsched.estimators.throughput_store import ThroughputStore
est = HopsThroughput(ThroughputStore(sys.argv[1]))
tput, layers = est.explain("j", "rtx3090", ((1, 2),))
print(json.dumps({"tput": tput, "layers": layers, "n": est.store.count_observations()}))
"""


@pytest.mark.parametrize("url", [False, True])
def test_records_survive_a_new_process(tmp_path, url):
    path = tmp_path / "hops.sqlite"
    location = f"sqlite:///{path}" if url else str(path)
    store = ThroughputStore(location)
    store.record("j", obs([(0, 1)], 0.35, components=COMPONENTS, loads=(0.1,)), detect_pattern)
    store.record("j", obs([(1, 2)], 0.8))
    store.close()
    out = subprocess.run([sys.executable, "-c", _READ_BACK, location], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got == {"tput": pytest.approx(2 * 32 / 0.8), "layers": ["server"], "n": 2}


def test_store_locations():
    assert store_path("sqlite:///tmp/x.sqlite") == "tmp/x.sqlite"
    assert store_path("sqlite:////tmp/x.sqlite") == "/tmp/x.sqlite"
    store = ThroughputStore()  # a run's own file, in a temporary directory that goes with the store
    store.record("j", obs([(0, 1)], 0.5))
    assert os.path.exists(store.path) and store.count_observations() == 1
    folder = os.path.dirname(store.path)
    store.close()
    del store
    gc.collect()
    assert not os.path.exists(folder)
    with pytest.raises(ValueError, match="sqlite:///"):
        check_location("postgresql://db/x")


def test_a_job_without_components_scales_what_it_reported_linearly(tmp_path):
    est = HopsThroughput(ThroughputStore(str(tmp_path / "s.sqlite")))
    plain = ThroughputObservation(time_s=0.0, gpu_type="v100", num_nodes=1, num_gpus=1, local_bsz=0, accum_steps=1,
                                  step_time_s=0.25, sync_time_s=0.0)  # another workload's profile: no batch
    assert est.config_throughput("r", "v100", ((0, 4),)) == 0.0  # nothing reported: no estimate
    est.store.record("r", plain)
    assert est.explain("r", "v100", ((0, 4),)) == (pytest.approx(4 * 4.0), ("formula",))
    assert est.explain("r", "v100", ((0, 1),)) == (pytest.approx(4.0), ("type",))


@settings(max_examples=40, deadline=None)
@given(runs=st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4)), min_size=1, max_size=3,
                                        unique_by=lambda p: p[0]), st.floats(0.1, 2.0)), max_size=8),
       config=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4)), min_size=1, max_size=3,
                       unique_by=lambda p: p[0]),
       server_layer=st.booleans())
def test_the_planners_fast_lookup_answers_as_the_layers_do(runs, config, server_layer):
    est = HopsThroughput(ThroughputStore("sqlite:///"), server_layer=server_layer)
    est.store.record("j", obs([(0, 1)], 0.35, components=COMPONENTS, loads=(0.1,)), detect_pattern)
    for servers, step in runs:
        est.store.record("j", obs(sorted(servers), step))
    servers = tuple(sorted(config))
    assert est.config_throughput("j", "rtx3090", servers) == pytest.approx(est.explain("j", "rtx3090", servers)[0])
