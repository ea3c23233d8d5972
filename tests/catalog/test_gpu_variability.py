"""The catalog of PAL's per-GPU measurements: one class list, one loader, one set of GPU keys, read once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlsched
from dlsched.catalog import (
    BENCHMARK_CLASSES,
    CLASSES,
    FAMILIES,
    class_names,
    family,
    fitted_summary,
    has_measured_data,
    measured_benchmark,
    measured_family,
    measured_pm_scores,
)
from dlsched.core import KNOWN_GPU_TYPES, InputError
from dlsched.datadir import data_dir

DATA = data_dir()
needs_data = pytest.mark.skipif(
    DATA is None or not (DATA / "pal" / "aggregated_data").is_dir(),
    reason="measured data directory (pal/aggregated_data) not found; set DLSCHED_DATA",
)
SRC = Path(dlsched.__file__).resolve().parent


# -- one class list ----------------------------------------------------------------------------------------
def test_class_names_follow_one_rule():
    assert CLASSES == ("classA", "classB", "classC", "classD")
    assert class_names(6)[:4] == CLASSES and class_names(6)[-1] == "classF"
    assert {c for classes in BENCHMARK_CLASSES.values() for c in classes} == set(CLASSES)


def test_world_estimators_and_classifier_use_the_catalog_classes():
    from dlsched.estimators import pm_profiles
    from dlsched.estimators.classifier import CLASS_NAMES, DEFAULT_CLASS
    from dlsched.world import variability

    assert variability.CLASSES is CLASSES and pm_profiles.CLASSES is CLASSES
    assert CLASS_NAMES[: len(CLASSES)] == CLASSES and DEFAULT_CLASS == CLASSES[0]


def test_class_list_is_written_in_one_place():
    """No module besides the catalog spells the class list or the benchmark -> class map out."""
    listing = re.compile(r"""["']classA["']\s*,\s*["']classB["']\s*,""")
    bench_map = re.compile(r"""["']bert["']\s*:\s*\(\s*["']classB""")
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                 if p.parent.name != "catalog"
                 and (listing.search(p.read_text()) or bench_map.search(p.read_text()))]
    assert offenders == []


def test_catalog_imports_neither_world_nor_estimators_nor_policies_nor_sim():
    code = ("import sys, dlsched.catalog; print(sorted(m for m in sys.modules if m.startswith(("
            "'dlsched.world', 'dlsched.estimators', 'dlsched.policies', 'dlsched.sim'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- families ----------------------------------------------------------------------------------------------
def test_families_name_known_gpu_types_and_unknown_family_is_input_error():
    assert {f.gpu_type for f in FAMILIES.values()} <= set(KNOWN_GPU_TYPES)
    assert FAMILIES["ls6"].profiled_classes() == ("classA",)
    with pytest.raises(InputError) as info:
        family("summit", field="profile")
    assert info.value.field == "profile" and "longhorn" in str(info.value)
    assert not has_measured_data("longhorn", None)


@needs_data
def test_benchmark_classes_match_pals_profiles_file():
    profiles = json.loads((DATA / "pal" / "profiles.json").read_text())
    files = {b.file: b.classes for b in FAMILIES["longhorn"].benchmarks}
    for cls, path in profiles.items():
        assert cls in files[path.removeprefix("aggregated_data/")]


# -- measured values ---------------------------------------------------------------------------------------
@needs_data
def test_longhorn_measured_spread():
    s = measured_pm_scores("longhorn", DATA)
    a, b, d = s["classA"], s["classB"], s["classD"]
    assert len(a) == 336 and len(b) == 136 and len(d) == 172
    assert a.min() == pytest.approx(0.947, abs=1e-3) and a.max() == pytest.approx(1.123, abs=1e-3)
    assert b.min() == pytest.approx(0.986, abs=1e-3) and b.max() == pytest.approx(1.039, abs=1e-3)
    assert d.min() == pytest.approx(0.971, abs=1e-3) and d.max() == pytest.approx(1.004, abs=1e-3)
    np.testing.assert_array_equal(s["classB"], s["classC"])  # both from the BERT file
    for v in s.values():  # normalised to the median run: the median GPU sits near 1
        assert np.median(v) == pytest.approx(1.0, abs=0.005)


@needs_data
def test_frontera_and_ls6_measured():
    f = measured_pm_scores("frontera", DATA)
    assert (len(f["classA"]), len(f["classB"]), len(f["classD"])) == (296, 276, 248)
    assert f["classA"].max() == pytest.approx(1.1447, abs=1e-3)
    assert f["classD"].max() - f["classD"].min() < 0.003  # PageRank is flat
    ls6 = measured_pm_scores("ls6", DATA)
    assert len(ls6["classA"]) == 219 and ls6["classA"].max() > 2.0  # A100 stragglers
    for c in ("classB", "classC", "classD"):
        np.testing.assert_array_equal(ls6[c], np.ones(219))


@needs_data
def test_testbed_file_in_gpu_order():
    t = measured_pm_scores("testbed32", DATA)
    assert t["classA"][0] == pytest.approx(1.014469743078943, rel=1e-12)
    assert t["classB"][0] == pytest.approx(1.0581973029842755, rel=1e-12)
    assert all(len(v) == 32 for v in t.values())
    np.testing.assert_array_equal(t["classB"], t["classC"])
    assert measured_benchmark("testbed32", "resnet", DATA).runs is None  # precomputed scores only


@needs_data
def test_one_gpu_key_joins_the_files_of_a_family():
    """Longhorn's PageRank file names GPUs by NVIDIA UUID; the catalog keys it like the other two files."""
    files = measured_family("longhorn", DATA)
    resnet, pagerank = set(files["resnet"].gpus), set(files["pagerank"].gpus)
    assert len(pagerank) == 172 and len(resnet & pagerank) == 128
    assert all(re.fullmatch(r"c\d+-\d+-\d+", g) for g in pagerank)


@needs_data
def test_world_and_estimators_see_the_same_measurements():
    from dlsched.estimators.pm_profiles import load_family

    for name in FAMILIES:
        catalog = measured_pm_scores(name, DATA)
        profile = load_family(name, DATA)
        for c in CLASSES:
            np.testing.assert_array_equal(profile.scores[c], catalog[c])


@needs_data
def test_files_are_read_once_and_read_only():
    first = measured_benchmark("longhorn", "resnet", DATA)
    assert measured_benchmark("longhorn", "resnet", str(DATA)) is first
    assert measured_family("longhorn", DATA)["resnet"] is first
    with pytest.raises(ValueError):
        first.scores[0] = 2.0
    # The per-class arrays handed out are copies: editing one cannot change the catalog.
    scores = measured_pm_scores("longhorn", DATA)["classA"]
    scores[0] = 99.0
    assert measured_benchmark("longhorn", "resnet", DATA).scores[0] != 99.0
    assert measured_benchmark("longhorn", "resnet", DATA).runs.max() > 3.0  # single runs: stragglers


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        measured_benchmark("ls6", "resnet", tmp_path)
    with pytest.raises(InputError, match="no benchmark"):
        measured_benchmark("ls6", "bert", tmp_path)


def test_fitted_summary_is_read_once():
    assert fitted_summary() is fitted_summary()
    assert set(fitted_summary()["families"]) == set(FAMILIES)


@needs_data
def test_fitted_summary_matches_data():
    """The committed summary is what scripts/fit_variability.py derives from the data (refit if this fails)."""
    stats = fitted_summary()
    levels = np.asarray(stats["quantile_levels"])
    for name in FAMILIES:
        measured = measured_pm_scores(name, DATA)
        for src in stats["families"][name]["sources"].values():
            scores = measured[src["classes"][0]]
            assert src["num_gpus"] == len(scores)
            np.testing.assert_allclose(src["quantiles"], np.quantile(scores, levels), atol=2e-6)
