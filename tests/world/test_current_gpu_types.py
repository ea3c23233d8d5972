"""h100 and h200 in the catalog and the world, with the provenance of every number.

The h200's step times come from one H200's measurements against the a100 fit, so the world must give back
the measured step time where the speed was taken; the h100 is the h200 scaled by data-sheet ratios; the
packaged file must be what ``scripts/fit_gpu_types.py`` writes from the data.
"""

from __future__ import annotations

import importlib.util
import json
import math
from importlib import resources
from pathlib import Path

import pytest

from dlsched.core import KNOWN_GPU_TYPES
from dlsched.datadir import data_dir
from dlsched.world.provenance import KINDS
from dlsched.world.throughput import NODE_SYNC_PARAMS, SYNC_PARAMS, ThroughputModel

ROOT = Path(__file__).resolve().parents[2]
DATA = data_dir()
H200_PROFILE = DATA / "h200" / "gpu_profile.json" if DATA is not None else None
needs_h200 = pytest.mark.skipif(H200_PROFILE is None or not H200_PROFILE.exists(),
                                reason="the H200 measurements ($DLSCHED_DATA/h200/gpu_profile.json) are absent")
#: World model -> its family's key in the H200 profile (the script's table, restated as the contract).
MEASURED = {"cifar10": "cifar10", "imagenet": "imagenet", "bert": "bert", "ncf": "ncf"}
RULED = ("deepspeech2", "yolov3", "gpt_pmp")


@pytest.fixture(scope="module")
def tm() -> ThroughputModel:
    return ThroughputModel.load()


def _spec() -> dict:
    text = resources.files("dlsched").joinpath("world/params/derived_types.json").read_text(encoding="utf-8")
    return json.loads(text)["types"]


def test_h100_and_h200_are_in_the_catalog() -> None:
    h100, h200, a100 = KNOWN_GPU_TYPES["h100"], KNOWN_GPU_TYPES["h200"], KNOWN_GPU_TYPES["a100"]
    assert (h100.memory_gb, h200.memory_gb) == (80.0, 141.0)
    assert h100.interconnect == h200.interconnect == "NVLink 4" and a100.interconnect == "NVLink 3"
    assert a100.rank < h100.rank < h200.rank
    assert h100.like is None and h200.like is None  # packaged types, not declared ones


def test_every_type_says_where_its_numbers_come_from(tm: ThroughputModel) -> None:
    for name in sorted(tm.known_types()):
        prov = tm.provenance(name)
        assert "relative_speed" in prov, name
        assert all(p["kind"] in KINDS and p["how"] for p in prov.values()), name
    assert {m: tm.provenance("a100")[m]["kind"] for m in tm.models()} == dict.fromkeys(tm.models(), "measured")
    assert tm.provenance("a10-pcie")["relative_speed"]["kind"] == "derived"


def test_h200_provenance_separates_measured_from_rule_and_model(tm: ThroughputModel) -> None:
    prov = tm.provenance("h200")
    assert {m for m in tm.models() if prov[m]["kind"] == "measured"} == set(MEASURED)
    assert {m for m in tm.models() if prov[m]["kind"] == "rule"} == set(RULED)
    assert prov["sync"]["kind"] == "modelled" and "NVLink" in prov["sync"]["how"]
    assert prov["relative_speed"]["kind"] == "rule"
    h100 = tm.provenance("h100")
    assert {h100[m]["kind"] for m in tm.models()} == {"derived"}
    assert "not measured" in h100["relative_speed"]["how"]
    assert h100["sync"]["kind"] == "modelled"


def test_h100_is_the_h200_scaled_by_data_sheet_ratios(tm: ThroughputModel) -> None:
    ratio = math.sqrt(3.35 / 4.8)  # same compute, HBM3 3.35 TB/s against HBM3e 4.8 TB/s
    assert tm.relative_speed("h100") == pytest.approx(tm.relative_speed("h200") * ratio, rel=1e-5)
    assert tm.relative_speed("a100") < tm.relative_speed("h100") < tm.relative_speed("h200")
    for model in tm.models():
        bsz = min(8, tm.max_local_bsz(model, "h100"))
        h100, _ = tm.step_time(model, "h100", (tm.stages(model, "h100"),), bsz)
        h200, _ = tm.step_time(model, "h200", (tm.stages(model, "h200"),), bsz)
        if tm.stages(model, "h100") == 1:  # one GPU: compute only
            assert h100 == pytest.approx(h200 / ratio, rel=1e-5), model
        assert tm.max_local_bsz(model, "h100") < tm.max_local_bsz(model, "h200")


def test_nvlink4_sync_is_modelled_from_the_a100s(tm: ThroughputModel) -> None:
    for model in tm.models():
        h200, a100, h100 = tm.params(model, "h200"), tm.params(model, "a100"), tm.params(model, "h100")
        for key in SYNC_PARAMS:
            scale = 1.5 if key in NODE_SYNC_PARAMS else 1.0
            assert h200[key] == pytest.approx(a100[key] / scale, rel=1e-12, abs=1e-300), (model, key)
            assert h100[key] == h200[key]
    # eight GPUs of one server synchronise faster than the A100's, a cross-server job as fast
    _, sync_h200 = tm.step_time("bert", "h200", (8,), 16)
    _, sync_a100 = tm.step_time("bert", "a100", (8,), 16)
    assert 0 < sync_h200 < sync_a100


@needs_h200
def test_the_world_gives_back_the_measured_h200_step_times(tm: ThroughputModel) -> None:
    """At the local batch each speed was taken (the largest measured that fits an A100), the world's
    single-GPU h200 step is the measured one; every measured family is used."""
    assert H200_PROFILE is not None
    measured = json.loads(H200_PROFILE.read_text(encoding="utf-8"))["step_time_s"]
    for model, key in MEASURED.items():
        sizes = [int(k.split("/")[1]) for k in measured if k.split("/")[0] == key]
        b = max(s for s in sizes if s <= tm.max_local_bsz(model, "a100"))
        world, _ = tm.step_time(model, "h200", (1,), b)
        assert world == pytest.approx(measured[f"{key}/{b}"], rel=1e-5), (model, b)
        assert tm.max_local_bsz(model, "h200") >= max(sizes)
    # the type's relative speed: a100's times the geometric mean of bert, cifar10, imagenet
    ratios = [tm.step_time(m, "a100", (1,), 16)[0] / tm.step_time(m, "h200", (1,), 16)[0]
              for m in ("bert", "cifar10", "imagenet")]
    mean = math.exp(sum(map(math.log, ratios)) / 3)
    assert tm.relative_speed("h200") == pytest.approx(tm.relative_speed("a100") * mean, rel=1e-5)
    for model in RULED:
        assert _spec()["h200"]["model_speed"][model] == pytest.approx(mean, rel=1e-5)


@needs_h200
def test_packaged_derived_types_are_what_the_script_writes(tmp_path: Path) -> None:
    """The params file is generated from the data, never edited by hand (rerun the script if this fails)."""
    spec = importlib.util.spec_from_file_location("fit_gpu_types", ROOT / "scripts" / "fit_gpu_types.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "derived_types.json"
    assert module.main(["--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["types"] == _spec()
