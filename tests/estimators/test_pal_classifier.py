"""PAL's application classifier: K-Means over (DRAM utilisation, peak FU utilisation)."""

from __future__ import annotations

import pytest

from dlsched.core import InputError
from dlsched.estimators.classifier import (
    DEFAULT_PROFILES,
    PAL_MODEL_CLASSES,
    AppClassifier,
    class_rank,
    default_classifier,
    model_class,
)


def test_default_classifier_reproduces_pal_class_map():
    clf = default_classifier()
    assert clf.assignments == {m: PAL_MODEL_CLASSES[m] for m in DEFAULT_PROFILES}
    assert clf.names == ("classA", "classB", "classC", "classD")


def test_classes_are_ordered_from_compute_to_memory_bound_and_new_apps_join_the_nearest():
    profiles = {"gemm": (10, 90), "conv": (15, 85), "mix": (45, 50), "mix2": (50, 48), "stream": (90, 5)}
    clf = AppClassifier.fit(profiles, k=3)
    assert clf.class_of("gemm") == "classA" and clf.class_of("stream") == "classC"
    assert clf.classify(12, 88) == "classA" and clf.classify(85, 10) == "classC"
    assert clf.class_of("unknown") == "classA"
    with pytest.raises(InputError):
        AppClassifier.fit(profiles, k=9)


def test_class_rank_and_model_lookup():
    assert [class_rank(c) for c in ("classA", "classB", "classD")] == [0, 1, 3]
    assert class_rank("other") > class_rank("classD")
    assert model_class("bert") == "classB" and model_class("nope") == "classA"
