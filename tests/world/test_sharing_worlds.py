"""Sharing worlds by GPU generation: the old-GPU table is kept as it was, the H200 world plays the measured
pairs of the data file, every pair and curve says where it came from, and a run records that provenance."""

from __future__ import annotations

import json
import statistics

import pytest

from dlsched.catalog.colocation import ColocationTable
from dlsched.core import InputError
from dlsched.traces.gimbal import MODELS
from dlsched.world.base import World, WorldConfig
from dlsched.world.sharing import MpsCurve, WorkerShare
from dlsched.world.sharing_worlds import H200_FILE, H200_MODELS, SHARING_WORLDS, H200PairTable, sharing_world
from testkit import DATA, needs_data, small_cluster

GIMBAL_MODELS = [m for by_class in MODELS.values() for m in by_class]
H200 = needs_data(*H200_FILE.split("/"))


def test_the_old_gpu_world_is_the_packaged_table_with_one_curve_and_says_how_each_pair_was_found():
    world = sharing_world("old-gpus")
    table = ColocationTable.load()
    assert all(world.model.table.pair(a, b) == table.pair(a, b) for a in GIMBAL_MODELS for b in GIMBAL_MODELS)
    prov = world.provenance(GIMBAL_MODELS)
    # the review's count over Gimbal's 12 models: 78 pairs, 13 measured, 29 through a stand-in, 36 by rule
    assert prov["world"] == "old-gpus" and prov["pairs"] == {"measured": 13, "stand-in": 29, "rule": 36}
    assert len(prov["pair_kinds"]) == 78 and prov["pair_kinds"]["resnet50+resnet50"] == "measured"
    assert prov["mps_curves"] == {"measured": 0, "stand-in": 0, "rule": 12}
    assert world.model.curve_of("bert") == world.model.curve_of("resnet18") == MpsCurve()


def test_a_measured_curve_file_is_reported_as_measured(tmp_path):
    path = tmp_path / "curve.json"
    path.write_text(json.dumps({"points": [[50, 0.8], [100, 1.0]]}))
    world = World(small_cluster((("a40", 1, 2),)), WorldConfig(mps_curve=str(path)))
    assert world.sharing_world.provenance(["resnet18"])["mps_curves"]["measured"] == 1


def test_an_unknown_sharing_world_is_refused_naming_the_field():
    with pytest.raises(InputError) as err:
        WorldConfig(sharing_world="h100")
    assert err.value.field == "sharing_world" and "old-gpus, h200" in str(err.value)
    assert SHARING_WORLDS == ("old-gpus", "h200")


def test_the_h200_world_without_its_data_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path))
    with pytest.raises(InputError, match="H200 pair speeds.*h200/gpu_profile.json"):
        World(small_cluster((("a40", 1, 2),)), WorldConfig(sharing_world="h200"))


@H200
def test_the_h200_worlds_measured_pairs_are_the_data_files():
    profile = json.loads((DATA / H200_FILE).read_text())
    table = sharing_world("h200").model.table
    for p in profile["pairs"]:
        got = table.pair(H200_MODELS[p["a"]], H200_MODELS[p["b"]])
        assert (got.speed_a, got.speed_b, got.how) == (p["speed_a"], p["speed_b"], "measured")
        if p["a"] != p["b"]:
            back = table.pair(H200_MODELS[p["b"]], H200_MODELS[p["a"]])
            assert (back.speed_a, back.speed_b) == (p["speed_b"], p["speed_a"])


@H200
def test_the_h200_rule_is_the_mean_of_the_compute_bound_pairs_and_loses_throughput():
    profile = json.loads((DATA / H200_FILE).read_text())
    table = H200PairTable(profile)
    heavy = [p for p in profile["pairs"] if "ncf" not in (p["a"], p["b"])]
    assert len(heavy) == 10  # every pair of ResNet-18, ResNet-50, BERT and GPT-2 small
    assert table.rule_speed == pytest.approx(statistics.fmean(
        [p["speed_a"] for p in heavy] + [p["speed_b"] for p in heavy]))
    assert 0.45 < table.rule_speed < 0.47
    ruled = table.pair("vgg16", "mobilenetv2")
    assert ruled.how == "default" and ruled.speed_a + ruled.speed_b < 0.95  # packing loses on an H200
    assert table.pair("llama", "bert").how == "proxy"  # LLaMA plays as GPT-2 small
    prov = sharing_world("h200").provenance(GIMBAL_MODELS)
    assert prov["pairs"] == {"measured": 6, "stand-in": 4, "rule": 68}
    assert prov["mps_curves"] == {"measured": 0, "stand-in": 0, "rule": 12}


@H200
def test_h200_curves_are_per_model_from_the_measured_step_times():
    model = sharing_world("h200").model
    # NeuMF fills a third of the GPU: limited to half the threads it keeps nearly all its speed; ResNet-50
    # fills it: half the threads cost it about half its speed
    assert model.curve_of("ncf").speed(0.5) > 0.9 > 0.65 > model.curve_of("resnet50").speed(0.5)
    free = model.worker_speed("resnet50", WorkerShare(100, "bert", 100))
    assert free == pytest.approx(model.table.pair("resnet50", "bert").speed_a)


@H200
def test_a_packing_run_records_its_sharing_provenance_and_says_so():
    from dlsched.sim.config import RunConfig
    from dlsched.sim.run import simulate

    run = simulate(RunConfig(policy="lucid", coordination="gimbal", cluster="gimbal-16", jobs=6,
                             trace="gimbal-philly:seed=1", world={"sharing_world": "h200"}))
    sharing = run.config_record()["data"]["sharing"]
    assert sharing["world"] == "h200" and sum(sharing["pairs"].values()) == len(sharing["pair_kinds"])
    assert any(n.startswith("sharing world h200: pairs among the trace's models") for n in run.notices)
    plain = simulate(RunConfig(policy="slurm", cluster="gimbal-16", jobs=6, trace="gimbal-philly:seed=1"))
    assert "sharing" not in plain.data  # a scheduler that never packs plays no pairs
