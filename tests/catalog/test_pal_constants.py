"""PAL's per-model constants: iteration times, classes, locality penalties, and clear errors."""

from __future__ import annotations

import json

import pytest

from dlsched.catalog import PalConstants
from dlsched.core.errors import InputError
from dlsched.datadir import data_dir

PAL_MODELS = {"BERT", "DCGAN", "GPT2", "PointNet", "resnet50", "vgg19"}


@pytest.fixture(scope="module")
def pal() -> PalConstants:
    return PalConstants.load()


def test_load_is_cached(pal):
    assert PalConstants.load() is pal


def test_iteration_times(pal):
    assert pal.models() == PAL_MODELS
    assert pal.iteration_time_s("resnet50", source="t") == pytest.approx(0.17540429367763434)
    assert pal.iteration_time_s("BERT", source="t") == pytest.approx(0.179)
    assert pal.iteration_time_s("GPT2", source="t") == pytest.approx(3.5714)
    # Traces spell models differently; case-insensitive matches resolve to the same model.
    assert pal.iteration_time_s("pointnet", source="t") == pal.iteration_time_s("PointNet", source="t")
    assert pal.round_duration_s == 360


def test_unknown_model_is_input_error_naming_field_and_source(pal):
    with pytest.raises(InputError) as info:
        pal.iteration_time_s("Bert-Large", source="trace.csv:7")
    err = info.value
    assert err.field == "model"
    assert err.source == "trace.csv:7"
    text = str(err)
    assert "trace.csv:7" in text and "field 'model'" in text and "Bert-Large" in text
    assert "resnet50" in text and "vgg19" in text  # lists the known models


def test_perf_classes(pal):
    assert pal.perf_class("resnet50") == "classA"
    assert pal.perf_class("BERT") == "classB"
    assert pal.perf_class("GPT2") == "classB"
    assert pal.perf_class("DCGAN") == "classB"
    assert pal.perf_class("vgg19") == "classC"
    assert pal.perf_class("PointNet") == "classD"
    # Sia/Pollux models.
    for model, cls in {"imagenet": "classA", "cifar10": "classA", "bert": "classB", "gpt_pmp": "classB",
                       "deepspeech2": "classC", "yolov3": "classC", "ncf": "classD"}.items():
        assert pal.perf_class(model) == cls
    # Unknown models are class A (most sensitive), as in PAL.
    assert pal.perf_class("never-heard-of-it") == "classA"
    assert pal.model_classes()["ncf"] == "classD"


def test_locality_penalty(pal):
    assert pal.locality_penalty("PointNet", 16, None) == pytest.approx(1.25)
    assert pal.locality_penalty("PointNet", 8, None) == pytest.approx(1.10)
    assert pal.locality_penalty("resnet50", 16, None) == pytest.approx(1.16)
    assert pal.locality_penalty("DCGAN", 12, None) == 1.0
    assert pal.locality_penalty("resnet50", 8, None) == 1.0  # pair not listed
    assert pal.locality_penalty("GPT2", 24, None) == 1.0  # model not listed
    assert pal.locality_penalty("unknown", 4, None) == 1.0
    # An override applies to every model and size.
    assert pal.locality_penalty("GPT2", 24, 1.7) == 1.7
    assert pal.locality_penalty("PointNet", 16, 1.0) == 1.0


def test_packaged_constants_match_measured_source(pal):
    root = data_dir()
    if root is None or not (root / "pal" / "pal_simulation_constants.json").is_file():
        pytest.skip("data directory with pal/pal_simulation_constants.json not found (set DLSCHED_DATA)")
    raw = json.loads((root / "pal" / "pal_simulation_constants.json").read_text())
    for model, t in raw["per_iteration_time_s_by_model"].items():
        assert pal.iteration_time_s(model, source="x") == pytest.approx(t, rel=1e-12)
    for model, cls in raw["perf_class_by_model"].items():
        if not model.startswith("_"):
            assert pal.perf_class(model) == cls
    for key, value in raw["locality_penalty_when_spread_across_nodes"].items():
        if not key.startswith("_"):
            model, k = key.split("|")
            assert pal.locality_penalty(model, int(k), None) == pytest.approx(value)


def test_measured_file_transcribes_to_the_packaged_constants(pal):
    """Reading the data directory's file gives what the package ships (refit if this fails); read once."""
    root = data_dir()
    if root is None or not (root / "pal" / "pal_simulation_constants.json").is_file():
        pytest.skip("data directory with pal/pal_simulation_constants.json not found (set DLSCHED_DATA)")
    measured = PalConstants.from_data_dir(root)
    assert PalConstants.from_data_dir(str(root)) is measured
    assert measured.model_classes() == pal.model_classes()
    assert measured.locality_table() == pal.locality_table()
    assert {m: measured.iteration_time_s(m, source="x") for m in measured.models()} == {
        m: pal.iteration_time_s(m, source="x") for m in pal.models()}


def test_missing_measured_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        PalConstants.from_data_dir(tmp_path)
