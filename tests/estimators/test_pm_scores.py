"""PAL's PM-score profiles, K-Means binning with silhouette K selection, L x V matrix, locality penalties."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import silhouette_score

from dlsched.core import InputError
from dlsched.estimators import kmeans_1d, pm_bins
from dlsched.estimators.kmeans_1d import choose_k, silhouette_1d, silhouette_sorted
from dlsched.estimators.locality import LocalityPenalties, lv_matrix
from dlsched.estimators.pm_bins import BinCache, fit_bins
from dlsched.estimators.pm_profiles import (
    VariabilityProfile,
    load_family,
    load_profile_file,
    pm_scores_from_runs,
    sample_cluster,
    sample_runs,
)
from testkit import DATA, needs_data


def _modes(centres, sizes, spread, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(c, spread, n) for c, n in zip(centres, sizes, strict=True)])


@pytest.mark.parametrize(("centres", "sizes"), [((1.0, 1.3), (60, 40)), ((0.95, 1.0, 1.08), (30, 50, 20))])
def test_silhouette_sweep_finds_planted_bins(centres, sizes):
    x = _modes(centres, sizes, 0.006)
    bins = fit_bins(x)
    assert bins.k == len(centres)
    assert np.allclose(bins.centroids, centres, atol=0.01)
    assert sorted(bins.counts().tolist()) == sorted(sizes)
    assert len(bins.outliers) == 0
    # Every GPU takes its bin's centroid; bin 0 is the best (lowest) score.
    assert set(np.round(bins.values, 9)) == set(np.round(bins.centroids, 9))
    assert bins.levels[0] == bins.values.min()


def test_outliers_are_set_aside_for_the_sweep_and_keep_their_scores():
    x = np.concatenate([_modes((1.0, 1.2), (80, 40), 0.005), [3.1, 2.6]])
    bins = fit_bins(x)
    assert bins.k == 2
    assert sorted(x[bins.outliers].tolist()) == [2.6, 3.1]
    assert bins.values[-1] == 2.6 and bins.values[-2] == 3.1
    assert len(bins.levels) == 4  # two centroids and two outliers of their own
    # Without the outlier rule the outliers are clustered like everything else.
    plain = fit_bins(x, outlier_sigma=0.0)
    assert len(plain.outliers) == 0 and 2.6 not in plain.levels


def test_few_distinct_values_and_fine_grained_mode():
    assert fit_bins([1.0] * 8).levels.tolist() == [1.0]
    assert fit_bins([1.0, 1.0, 1.4, 1.4]).levels.tolist() == [1.0, 1.4]
    raw = fit_bins([1.0, 1.01, 1.02, 1.5, 1.51], k_max=0)  # clustering off: every value is a level
    assert raw.levels.tolist() == [1.0, 1.01, 1.02, 1.5, 1.51]
    with pytest.raises(InputError):
        fit_bins([])


def test_silhouette_matches_scikit_learn():
    rng = np.random.default_rng(1)
    x = np.sort(_modes((1.0, 1.1, 1.5), (30, 20, 5), 0.02, seed=2))
    for k in (2, 3, 4):
        labels, centres = kmeans_1d.kmeans_1d(x, k)
        ref = silhouette_score(x.reshape(-1, 1), labels)
        assert silhouette_1d(x, labels) == pytest.approx(ref, abs=1e-9)
        cuts = np.concatenate([[0], np.searchsorted(x, (centres[:-1] + centres[1:]) / 2, side="right"), [len(x)]])
        assert silhouette_sorted(x, cuts) == pytest.approx(ref, abs=1e-9)
    random_labels = rng.integers(0, 3, len(x))
    assert silhouette_1d(x, random_labels) == pytest.approx(silhouette_score(x.reshape(-1, 1), random_labels))


def test_exact_kmeans_is_no_worse_than_lloyd():
    x = np.sort(_modes((1.0, 1.05, 1.3), (40, 40, 10), 0.03, seed=3))
    pre = np.concatenate([[0.0], np.cumsum(x)])
    table = kmeans_1d.optimal_centroids_1d(x, 6)
    for k in range(2, 7):
        _, dp = kmeans_1d.lloyd_sorted(x, pre, table[k - 1])
        _, lloyd = kmeans_1d.lloyd_sorted(x, pre, np.quantile(x, (np.arange(k) + 0.5) / k))
        assert dp <= lloyd + 1e-12


def test_large_profiles_bin_quickly_and_deterministically():
    x = _modes((1.0, 1.1), (20000, 7000), 0.01, seed=4)
    a, b = fit_bins(x), fit_bins(x.copy())
    assert a.k == 2 and np.array_equal(a.values, b.values)
    k, sweep = choose_k(x)
    assert k == 2 and set(sweep) == set(range(2, 12))


def test_bin_cache_bins_each_content_once(monkeypatch):
    calls = []
    real = pm_bins.fit_bins
    monkeypatch.setattr(pm_bins, "fit_bins", lambda s, **kw: calls.append(1) or real(s, **kw))
    cache = BinCache()
    x = _modes((1.0, 1.2), (10, 10), 0.01)
    first = cache.get(x, k_min=2, k_max=11, outlier_sigma=3.0)
    assert cache.get(x, k_min=2, k_max=11, outlier_sigma=3.0) is first          # same array
    assert cache.get(x.copy(), k_min=2, k_max=11, outlier_sigma=3.0) is first   # same content
    assert cache.get(x, k_min=2, k_max=3, outlier_sigma=3.0) is not first       # other parameters
    assert len(calls) == 2


def test_lv_matrix_traversal_matches_the_paper_example():
    m = lv_matrix([0.89, 0.94, 1.06, 2.55], 1.5)
    products = [round(float(m.penalties[li] * m.values[vi]), 3) for li, vi in m.traversal()]
    assert products == [0.89, 0.94, 1.06, 1.335, 1.41, 1.59, 2.55, 3.825]
    assert [li for li, _ in m.traversal()][:3] == [0, 0, 0]
    racks = lv_matrix([1.0, 1.2], 2.0, racks=True)
    assert racks.penalties == (1.0, 1.5, 2.0) and len(racks.level_names) == 3
    assert "within node" in m.render()


def test_pm_scores_from_runs_is_median_of_normalised_runs():
    s = pm_scores_from_runs([10, 12, 10, 30, 10, 11], ["a", "a", "b", "b", "c", "c"])
    # median run is 10.5: a -> median(10, 12)/10.5, b -> median(10, 30)/10.5
    assert s["a"] == pytest.approx(11 / 10.5) and s["b"] == pytest.approx(20 / 10.5)
    with pytest.raises(InputError):
        pm_scores_from_runs([1.0, -2.0], ["a", "b"])


def test_user_profile_files(tmp_path):
    long = tmp_path / "runs.csv"
    long.write_text("gpu,class,perf\ng0,classA,10\ng0,classA,10\ng1,classA,12\ng2,classA,11\ng0,classD,5\ng1,classD,5\n")
    prof = load_profile_file(long)
    assert set(prof.scores) == {"classA", "classD"} and len(prof.scores["classA"]) == 3
    wide = tmp_path / "wide.csv"
    wide.write_text("GPU_ID,PerfVar_classA,PerfVar_classB\n1,1.1,1.0\n0,0.9,1.0\n")
    prof = load_profile_file(wide)
    assert prof.scores["classA"].tolist() == [0.9, 1.1]  # GPU_ID order
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n")
    with pytest.raises(InputError):
        load_profile_file(bad)


def test_sample_cluster_draws_without_repetition():
    prof = VariabilityProfile("t", {"classA": np.arange(10, dtype=float)})
    small = sample_cluster(prof, 10, seed=3).scores["classA"]
    assert sorted(small.tolist()) == list(range(10))
    big = sample_cluster(prof, 25, seed=3).scores["classA"]
    assert np.bincount(big.astype(int)).max() <= 3  # blocks of the whole pool


def test_locality_penalties_table_and_constant():
    pen = LocalityPenalties({"PointNet": {8: 1.1}})
    assert pen.penalty("PointNet", 8) == 1.1 and pen.penalty("pointnet", 8) == 1.1
    assert pen.penalty("PointNet", 4) == 1.0 and pen.penalty("other", 8) == 1.0
    assert LocalityPenalties.constant_penalty(1.7).penalty("anything", 2) == 1.7
    shipped = LocalityPenalties.from_data("/nonexistent")  # packaged copy of PAL's table
    assert shipped.penalty("resnet50", 16) == pytest.approx(1.16)


@needs_data("pal", "aggregated_data")
def test_measured_families_and_run_sampling():
    prof = load_family("longhorn", DATA)
    a = prof.scores["classA"]
    assert len(a) == 336 and np.median(a) == pytest.approx(1.0, abs=0.01) and a.max() < 1.2
    assert np.array_equal(prof.scores["classB"], prof.scores["classC"])  # both from BERT
    bed = load_family("testbed32", DATA)
    assert len(bed.scores["classA"]) == 32
    runs = sample_runs("longhorn", 1404, seed=0, data_dir=DATA).scores["classA"]
    assert runs.max() > 3.0  # single runs include the stragglers, per-GPU medians do not
    bins = fit_bins(a)
    assert 2 <= bins.k <= 11 and len(bins.levels) >= bins.k


def test_pm_scores_names_the_public_api_of_its_modules():
    """Experiments and scripts import from pm_scores; every name there is the implementing module's object."""
    from dlsched.estimators import pm_scores

    assert pm_scores.fit_bins is fit_bins and pm_scores.sample_runs is sample_runs
    assert all(hasattr(pm_scores, name) for name in pm_scores.__all__)
