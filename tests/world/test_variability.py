"""Per-GPU variability: drawing a cluster's true GPU speeds (medians or runs), the fitted fallback, slowest().

The measured scores themselves are the catalog's (tests/catalog/test_gpu_variability.py).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from dlsched.catalog import CLASSES, fitted_summary, measured_family, measured_pm_scores
from dlsched.core import KNOWN_GPU_TYPES, InputError, make_cluster
from dlsched.datadir import data_dir
from dlsched.world.base import World, WorldConfig
from dlsched.world.variability import GpuSpeeds

DATA = data_dir()
needs_data = pytest.mark.skipif(
    DATA is None or not (DATA / "pal" / "aggregated_data").is_dir(),
    reason="measured data directory (pal/aggregated_data) not found; set DLSCHED_DATA",
)


def cluster(num_nodes: int, per_node: int = 4, variability: str | None = "longhorn"):
    """``num_nodes`` V100 nodes of ``per_node`` GPUs drawn from ``variability``."""
    return make_cluster("t", [("v100", num_nodes, per_node)], KNOWN_GPU_TYPES, variability=variability)


def speeds(num_nodes: int, family: str | None = "longhorn", seed: int = 0, enabled: bool = True) -> GpuSpeeds:
    return GpuSpeeds.for_cluster(cluster(num_nodes, variability=family), seed=seed, data_dir=None,
                                 enabled=enabled)


@pytest.fixture
def no_data(monkeypatch, tmp_path):
    """Point the data directory at a place that does not exist, forcing the fitted sampler."""
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path / "absent"))


def test_unknown_family_is_input_error():
    with pytest.raises(InputError) as info:
        speeds(2, family="summit")
    assert info.value.field == "variability"
    assert "longhorn" in str(info.value)


# -- drawing a cluster from measured data -----------------------------------------------------------------
@needs_data
def test_draw_without_repetition_and_deterministic():
    a = speeds(16, seed=3)  # 64 GPUs
    assert a.origin == "measured"
    measured = measured_pm_scores("longhorn", DATA)
    for c in ("classA", "classB", "classD"):
        drawn = a.scores(c)
        assert len(drawn) == 64
        pool = Counter(measured[c].tolist())
        got = Counter(drawn.tolist())
        assert all(got[v] <= pool[v] for v in got), f"{c}: a measured GPU was drawn twice"
    # Spread stays within the measured range.
    assert 0.947 - 1e-9 <= a.scores("classA").min() and a.scores("classA").max() <= 1.1232 + 1e-9
    b = speeds(16, seed=3)
    for c in CLASSES:
        np.testing.assert_array_equal(a.scores(c), b.scores(c))
    assert not np.array_equal(a.scores("classA"), speeds(16, seed=4).scores("classA"))


@needs_data
def test_gpu_identity_kept_across_classes():
    """Frontera measured every BERT GPU with ResNet too: a drawn GPU's class B score is its own."""
    files = measured_family("frontera", DATA)
    resnet, bert = files["resnet"].series(), files["bert"].series()
    by_score = {v: k for k, v in resnet.items()}
    assert len(by_score) == len(resnet)  # scores identify GPUs
    s = speeds(16, family="frontera", seed=11)
    checked = 0
    for a_score, b_score in zip(s.scores("classA"), s.scores("classB"), strict=True):
        gpu = by_score[a_score]
        if gpu in bert.index:
            assert b_score == bert[gpu]
            checked += 1
    assert checked > 40


@needs_data
def test_whole_pool_and_blocks():
    measured = measured_pm_scores("longhorn", DATA)["classA"]
    whole = speeds(84, seed=1).scores("classA")  # 336 GPUs: exactly the measured set, shuffled
    np.testing.assert_array_equal(np.sort(whole), np.sort(measured))
    big = speeds(100, seed=1).scores("classA")  # 400 GPUs: one full block plus 64 more
    counts = Counter(big.tolist())
    assert set(counts) == set(measured.tolist())
    assert max(counts.values()) <= 2 * max(Counter(measured.tolist()).values())
    assert sum(counts.values()) == 400


@needs_data
def test_testbed_cluster_keeps_gpu_order():
    s = GpuSpeeds.for_cluster(cluster(8, variability="testbed32"), seed=5, data_dir=str(DATA), enabled=True)
    np.testing.assert_array_equal(s.scores("classA"), measured_pm_scores("testbed32", DATA)["classA"])
    assert s.slowest("classA", (0,)) == pytest.approx(1.014469743078943)


# -- the gpu_speeds option: per-GPU medians or single runs ---------------------------------------------------
def world(num_nodes: int, gpu_speeds: str, seed: int = 0, family: str = "longhorn") -> World:
    return World(cluster(num_nodes, variability=family), WorldConfig(gpu_speeds=gpu_speeds), seed=seed)


@needs_data
def test_runs_give_a_wider_spread_than_medians():
    """Single runs keep the stragglers that a GPU's median hides: the slowest GPU is far slower."""
    medians, runs = world(64, "medians", seed=7).speeds, world(64, "single-runs", seed=7).speeds
    assert (medians.origin, runs.origin) == ("measured", "runs")
    assert medians.scores("classA").max() < 1.2 < 2.0 < runs.scores("classA").max()
    assert np.std(runs.scores("classA")) > 2 * np.std(medians.scores("classA"))
    # The same seed draws the same cluster.
    again = world(64, "single-runs", seed=7).speeds
    for c in CLASSES:
        np.testing.assert_array_equal(runs.scores(c), again.scores(c))
    assert not np.array_equal(runs.scores("classA"), world(64, "single-runs", seed=8).speeds.scores("classA"))


@needs_data
def test_runs_draw_single_runs_without_repetition():
    files = measured_family("longhorn", DATA)
    s = world(16, "single-runs", seed=3).speeds
    for c in ("classA", "classB", "classD"):
        bench = next(m for m in files.values() if c in m.classes)
        pool = Counter(bench.runs.tolist())
        got = Counter(s.scores(c).tolist())
        assert all(got[v] <= pool[v] for v in got), f"{c}: a run was drawn twice"
    assert not np.array_equal(s.scores("classB"), s.scores("classC"))  # drawn independently, as PAL does


@needs_data
def test_runs_match_what_experiments_drew_before_the_option():
    """Seeded like :func:`sample_runs`, so PAL experiments keep their clusters when they switch to the option."""
    from dlsched.estimators.pm_profiles import sample_runs

    s = world(8, "single-runs", seed=5, family="frontera").speeds
    before = sample_runs("frontera", 32, seed=5, data_dir=DATA)
    for c in CLASSES:
        np.testing.assert_array_equal(s.scores(c), before.scores[c])


def test_runs_without_data_is_input_error(no_data):
    with pytest.raises(InputError) as info:
        world(2, "single-runs")
    assert info.value.field == "gpu_speeds" and "DLSCHED_DATA" in str(info.value)
    assert not world(2, "single-runs", family=None).speeds.enabled  # nothing to draw: no data needed


def test_bad_gpu_speeds_is_input_error_naming_the_field():
    with pytest.raises(InputError) as info:
        WorldConfig(gpu_speeds="mean")
    assert info.value.field == "gpu_speeds" and "medians" in str(info.value) and "single-runs" in str(info.value)
    assert WorldConfig().gpu_speeds == "medians"


# -- fitted fallback ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["longhorn", "frontera", "ls6", "testbed32"])
def test_fallback_reproduces_quantiles(no_data, family):
    stats = fitted_summary()
    fam = stats["families"][family]
    pop = fam["num_gpus"]
    cl = make_cluster("t", [("v100", pop, 1)], KNOWN_GPU_TYPES, variability=family)
    s = GpuSpeeds.for_cluster(cl, seed=2, data_dir=None, enabled=True)
    assert s.origin == "fitted"
    levels = np.asarray(stats["quantile_levels"])
    for src in fam["sources"].values():
        q = np.asarray(src["quantiles"])
        spread = q[-1] - q[0]
        for c in src["classes"]:
            drawn = s.scores(c)
            # In probability space (robust where the measured distribution has gaps, e.g. ls6's stragglers
            # beyond the 97th percentile): the fraction of drawn GPUs at or below each shipped quantile.
            ecdf = np.searchsorted(np.sort(drawn), q + 1e-12, side="right") / len(drawn)
            assert np.abs(ecdf - levels).max() <= 0.01 + 1.5 / pop
            # In value space, between the 5th and 95th percentile (for the 32-GPU testbed one GPU is already
            # 3% of the mass, so there only the probability-space check is meaningful).
            if pop >= 100:
                inner = slice(5, 96)
                np.testing.assert_allclose(np.quantile(drawn, levels)[inner], q[inner], atol=0.03 * spread)
            assert drawn.min() == pytest.approx(q[0], abs=1e-9)
            assert drawn.max() == pytest.approx(q[-1], abs=1e-9)
    np.testing.assert_array_equal(s.scores("classB"), s.scores("classC"))
    for c in fam["flat_classes"]:
        np.testing.assert_array_equal(s.scores(c), 1.0)


def test_fallback_longhorn_spread_and_determinism(no_data):
    a = speeds(16, seed=9)
    assert a.origin == "fitted"
    assert a.scores("classA").min() >= 0.9472 - 1e-6 and a.scores("classA").max() <= 1.1232 + 1e-6
    np.testing.assert_array_equal(a.scores("classA"), speeds(16, seed=9).scores("classA"))
    assert not np.array_equal(a.scores("classA"), speeds(16, seed=10).scores("classA"))
    # Without repetition: 64 distinct virtual GPUs.
    assert len(np.unique(a.scores("classA"))) == 64
    big = speeds(200, seed=9)  # 800 GPUs from a population of 336: blocks
    assert big.num_gpus == 800 and np.isfinite(big.scores("classD")).all()


def test_fallback_cross_class_correlation_is_weak(no_data):
    """Classes pair through the measured (weak) rank correlation, not one shared rank."""
    from scipy.stats import spearmanr

    s = speeds(84, family="longhorn", seed=4)
    rho = spearmanr(s.scores("classA"), s.scores("classD")).statistic
    assert abs(rho) < 0.3


# -- queries -------------------------------------------------------------------------------------------------
def test_slowest_picks_max():
    s = GpuSpeeds({"classA": np.array([1.0, 1.2, 0.9, 1.05]), "classD": np.array([1.0, 0.99, 1.01, 1.0])}, 4,
                  family="x", origin="test")
    assert s.slowest("classA", (0, 2)) == 1.0
    assert s.slowest("classA", (0, 1, 2, 3)) == pytest.approx(1.2)
    assert s.slowest("classA", (2,)) == pytest.approx(0.9)
    assert s.slowest("classD", (1, 2)) == pytest.approx(1.01)
    assert s.slowest("classB", (0, 1)) == 1.0  # a class not given is flat
    assert s.slowest("classA", ()) == 1.0
    prof = s.measured_profile()
    assert prof is not None and set(prof) == set(CLASSES)
    prof["classA"][1] = 5.0  # a copy: the scheduler cannot change the truth
    assert s.slowest("classA", (1,)) == pytest.approx(1.2)


@pytest.mark.parametrize("family,enabled", [(None, True), ("longhorn", False)])
def test_no_variability_is_exactly_one(family, enabled):
    s = speeds(4, family=family, enabled=enabled)
    assert not s.enabled and s.measured_profile() is None
    for c in CLASSES:
        assert s.slowest(c, tuple(range(16))) == 1.0
        assert type(s.slowest(c, (3,))) is float
        np.testing.assert_array_equal(s.scores(c), np.ones(16))


def test_classes_and_model_map():
    s = speeds(1, family=None)
    assert s.classes() == ("classA", "classB", "classC", "classD")
    assert s.class_of("resnet50") == "classA"
    assert s.class_of("imagenet") == "classA"
    assert s.class_of("bert") == "classB"
    assert s.class_of("yolov3") == "classC"
    assert s.class_of("ncf") == "classD"
    assert s.class_of("mystery") == "classA"
    assert s.model_classes()["PointNet"] == "classD"


def test_explicit_missing_data_dir_falls_back_with_warning(tmp_path):
    with pytest.warns(UserWarning, match="not found"):
        s = GpuSpeeds.for_cluster(cluster(2), seed=0, data_dir=str(tmp_path / "nope"), enabled=True)
    assert s.origin == "fitted" and s.num_gpus == 8
