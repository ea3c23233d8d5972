"""PAL's variability profiles and binned PM-scores (PAL, SC'24, sections III-B, III-C and IV-C): the index.

A GPU's *PM-score* for an application class is its time per iteration over the median GPU's: 1.0 is the
median GPU, 1.5 means a job of that class runs 50% slower on it. PAL profiles one representative benchmark
per class on every GPU of a cluster, offline, and keeps the result static. The scheduler's side of that
profiling lives in four modules, one per step, and this module names their public API in one place:

* **profiles** (:mod:`~dlsched.estimators.pm_profiles`): per class, every profiled GPU's score, from PAL's
  measured families (read through :mod:`dlsched.catalog`) or a user's profile file; drawing the N GPUs of a
  simulated cluster;
* **1-D K-Means and the silhouette score** (:mod:`~dlsched.estimators.kmeans_1d`): exact and fast on
  one number per GPU;
* **binning** (:mod:`~dlsched.estimators.pm_bins`): per class, K chosen by the silhouette score, outliers
  kept apart; the binned scores are what PM-First and PAL compare;
* **locality** (:mod:`~dlsched.estimators.locality`): the L x V matrix and its traversal order, and the
  per-(model, GPU count) cross-node penalties.

In the simulator the world draws each GPU's true speed and the engine hands the policy the result of offline
profiling (``ClusterView.gpu_scores``); nothing here reads the world.
"""

from __future__ import annotations

from dlsched.estimators.kmeans_1d import K_MAX, K_MIN, choose_k, silhouette_1d, silhouette_sorted
from dlsched.estimators.locality import (
    FRONTERA_PENALTY,
    LocalityPenalties,
    LvMatrix,
    default_rack_penalty,
    lv_matrix,
    traversal_order,
)
from dlsched.estimators.pm_bins import BINS, OUTLIER_SIGMA, BinCache, PmBins, binned_profile, fit_bins
from dlsched.estimators.pm_profiles import (
    CLASSES,
    PROFILE_NAMES,
    TESTBED,
    VariabilityProfile,
    draw_without_repetition,
    load_family,
    load_profile_file,
    load_testbed,
    pm_scores_from_runs,
    resolve_profile,
    sample_cluster,
    sample_runs,
)

__all__ = [
    "BINS", "BinCache", "CLASSES", "FRONTERA_PENALTY", "K_MAX", "K_MIN", "LocalityPenalties", "LvMatrix",
    "OUTLIER_SIGMA", "PROFILE_NAMES", "PmBins", "TESTBED", "VariabilityProfile", "binned_profile", "choose_k",
    "default_rack_penalty", "draw_without_repetition", "fit_bins", "load_family", "load_profile_file",
    "load_testbed", "lv_matrix", "pm_scores_from_runs", "resolve_profile", "sample_cluster", "sample_runs",
    "silhouette_1d", "silhouette_sorted", "traversal_order",
]
