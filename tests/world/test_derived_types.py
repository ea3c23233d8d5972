"""GPU types of the COpter prototype that no profile covers, and the copter-10k / copter-25k presets."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from dlsched.clusters import load_cluster
from dlsched.world.throughput import NODE_SYNC_PARAMS, SYNC_PARAMS, ThroughputModel

MODELS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")


@pytest.fixture(scope="module")
def tm() -> ThroughputModel:
    return ThroughputModel.load()


def test_derived_types_follow_their_published_speeds(tm: ThroughputModel) -> None:
    spec = json.loads(resources.files("dlsched").joinpath("world/params/derived_types.json").read_text())["types"]
    for name, s in spec.items():
        assert tm.relative_speed(name) == pytest.approx(tm.relative_speed(s["from"]) * s["speed"])
        for model in MODELS:
            assert tm.supports(model, name)
            speed = s.get("model_speed", {}).get(model, s["speed"])
            # one GPU (no synchronisation): compute is exactly 1/speed times the base type's
            bsz = min(16, tm.max_local_bsz(model, name))
            mine, _ = tm.step_time(model, name, (1,), bsz)
            base, _ = tm.step_time(model, s["from"], (1,), bsz)
            assert mine == pytest.approx(base / speed, rel=1e-9)
            # synchronisation is the interconnect's: the sync_from type's terms, in-server ones over sync_speed
            p, q = tm.params(model, name), tm.params(model, s["sync_from"])
            scale = {k: s.get("sync_speed", 1.0) for k in NODE_SYNC_PARAMS}
            assert all(p[k] == pytest.approx(q[k] / scale.get(k, 1.0), rel=1e-12, abs=1e-300) for k in SYNC_PARAMS)
            limit = tm.max_local_bsz(model, s["from"]) * s["memory_ratio"]
            assert max(1, int(limit)) == tm.max_local_bsz(model, name)
    assert tm.relative_speed("a10-pcie") < tm.relative_speed("a100-pcie") < tm.relative_speed("a100")


@pytest.mark.parametrize(("preset", "scale"), [("copter-10k", 40), ("copter-25k", 100), ("copter-100k", 400)])
def test_copter_presets_are_the_thesis_block_scaled(preset: str, scale: int) -> None:
    cluster = load_cluster(preset)
    block = {"v100": 48, "t4": 32, "a100": 32, "quad": 32, "rtx": 48, "a10-pcie": 32, "a100-pcie": 32}
    per_type: dict[str, int] = {}
    for node in cluster.nodes:
        per_type[node.gpu_type] = per_type.get(node.gpu_type, 0) + node.num_gpus
    assert per_type == {t: g * scale for t, g in block.items()}
    assert sum(per_type.values()) == 256 * scale
