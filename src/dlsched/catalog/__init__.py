"""The catalog of measured hardware data: one loader and one set of names for what was measured.

The simulator's world (the truth: every simulated GPU's real speed) and the estimators (what profiling
shows a scheduler) both start from the same measurements; reading them here, once, keeps the two from
drifting apart (different keys, different class lists) while they stay separate: the world and the
estimators never import each other, and the catalog imports neither of them, nor the policies or the
simulator. It depends only on :mod:`dlsched.core`, the data-directory setting and data files.

* :mod:`~dlsched.catalog.classes`: PAL's application classes and the benchmark profiling each class;
* :mod:`~dlsched.catalog.gpu_variability`: PAL's per-GPU measurement files, their GPU keys, the loader
  (cached, read-only arrays) and the fitted summary shipped for runs without the data directory;
* :mod:`~dlsched.catalog.sampling`: drawing a simulated cluster's GPUs from those measurements;
* :mod:`~dlsched.catalog.pal_constants`: PAL's per-model iteration times, classes and locality penalties.

GPU types themselves (name, memory) are plain data in :mod:`dlsched.core.gpu`; a measured family names
the type it measured (:attr:`VariabilityFamily.gpu_type`).
"""

from dlsched.catalog.classes import BENCHMARK_CLASSES, CLASSES, DEFAULT_CLASS, class_names
from dlsched.catalog.gpu_variability import (
    FAMILIES,
    FAMILY_NAMES,
    TESTBED,
    Benchmark,
    MeasuredBenchmark,
    VariabilityFamily,
    family,
    fitted_summary,
    has_measured_data,
    measured_benchmark,
    measured_family,
    measured_pm_scores,
    pm_scores_from_runs,
)
from dlsched.catalog.pal_constants import PalConstants
from dlsched.catalog.sampling import draw_runs, draw_without_repetition

__all__ = [
    "BENCHMARK_CLASSES", "Benchmark", "CLASSES", "DEFAULT_CLASS", "FAMILIES", "FAMILY_NAMES", "MeasuredBenchmark",
    "PalConstants", "TESTBED", "VariabilityFamily", "class_names", "draw_runs", "draw_without_repetition",
    "family", "fitted_summary", "has_measured_data", "measured_benchmark", "measured_family",
    "measured_pm_scores", "pm_scores_from_runs",
]
