"""The fitted step-time model as a simulator relies on it: sane shapes, memory limits, goodput search."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from dlsched.core.errors import InputError
from dlsched.datadir import data_dir, default_dir, require_data
from dlsched.world.efficiency import EfficiencyModel
from dlsched.world.throughput import BatchChoice, ThroughputModel

MAIN = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
TYPES = ("t4", "rtx", "quad", "v100", "a100")


@pytest.fixture(scope="module")
def tm() -> ThroughputModel:
    return ThroughputModel.load()


@pytest.fixture(scope="module")
def em() -> EfficiencyModel:
    return EfficiencyModel.load()


def test_catalogue(tm):
    assert tm.models() == set(MAIN) | {"gpt_pmp"}
    assert tm.known_types() == {"t4", "rtx", "rtx5000", "quad", "v100", "a100", "a40", "a10-pcie", "a100-pcie",
                               "h100", "h200"}
    for model in MAIN:
        for gtype in TYPES:
            assert tm.supports(model, gtype)
    assert tm.supports("gpt_pmp", "rtx") and tm.supports("gpt_pmp", "a100")
    assert not tm.supports("gpt_pmp", "t4")
    assert not tm.supports("cifar10", "rtx5000")  # has a relative speed, but no per-model profile


def test_relative_speed(tm):
    assert tm.relative_speed("v100") == 1.0
    assert tm.relative_speed("rtx5000") == pytest.approx(0.9 * tm.relative_speed("quad"), rel=1e-4)
    assert tm.relative_speed("a100") > tm.relative_speed("v100") > tm.relative_speed("t4")
    with pytest.raises(InputError, match="mi300x"):
        tm.relative_speed("mi300x")


def test_restart_delays_in_thesis_range(tm):
    for model in ("bert", "cifar10", "deepspeech2", "imagenet", "yolov3", "gpt_pmp"):
        assert 25.0 <= tm.restart_delay_s(model) <= 250.0
    assert tm.restart_delay_s("imagenet") == max(tm.restart_delay_s(m) for m in MAIN)


def test_single_gpu_has_no_sync(tm):
    for model in MAIN:
        for gtype in TYPES:
            step, sync = tm.step_time(model, gtype, (1,), 8)
            assert sync == 0.0 and step > 0


def test_more_gpus_across_nodes_cost_sync_time(tm):
    """At a fixed local batch, spreading over more nodes never speeds a step and does cost sync."""
    for model in MAIN:
        for gtype in TYPES:
            b = min(16, tm.max_local_bsz(model, gtype))
            one, _ = tm.step_time(model, gtype, (1,), b)
            two_nodes, sync2 = tm.step_time(model, gtype, (2, 2), b)
            four_nodes, sync4 = tm.step_time(model, gtype, (2, 2, 2, 2), b)
            assert two_nodes >= one and sync2 > 0, (model, gtype)
            assert four_nodes >= two_nodes - 1e-12 and sync4 >= sync2 - 1e-12, (model, gtype)
    # and on t4, profiled up to 16 nodes, strictly so
    assert tm.step_time("imagenet", "t4", (4,) * 8, 64)[0] > tm.step_time("imagenet", "t4", (4,) * 2, 64)[0]


def test_placement_order_does_not_matter(tm):
    assert tm.step_time("bert", "rtx", (3, 8, 1), 8) == tm.step_time("bert", "rtx", (8, 1, 3), 8)


def test_accumulation_above_memory_limit(tm, em):
    for model in MAIN:
        for gtype in TYPES:
            limit = tm.max_local_bsz(model, gtype)
            fits = tm.batch_choice(model, gtype, (1,), limit, 0.0, em)
            assert fits.accum_steps == 1 and fits.local_bsz == limit
            over = tm.batch_choice(model, gtype, (1,), 3 * limit, 0.0, em)
            assert over.accum_steps == 3 and over.local_bsz <= limit
            assert over.step_time_s == pytest.approx(3 * fits.step_time_s, rel=1e-9)
            on_two = tm.batch_choice(model, gtype, (2,), 3 * limit, 0.0, em)
            assert on_two.accum_steps == 2 and on_two.local_bsz <= limit


def test_batch_choice_fields(tm, em):
    c = tm.batch_choice("cifar10", "rtx", (4, 4), 1024, 0.0, em)
    assert isinstance(c, BatchChoice)
    assert c.batch_size == 1024 and c.local_bsz == 128 and c.accum_steps == 1
    assert c.throughput_sps == pytest.approx(1024 / c.step_time_s)
    assert c.goodput == pytest.approx(c.throughput_sps * c.efficiency)
    assert 0 < c.efficiency <= 1


def test_unsupported_gives_none(tm, em):
    assert tm.batch_choice("gpt_pmp", "t4", (4,), 48, 0.0, em) is None
    assert tm.best_batch("gpt_pmp", "t4", (4,), 0.0, em, 384) is None
    # a pipeline of 8 stages cannot run on 4 GPUs
    assert tm.best_batch("gpt_pmp", "rtx", (4,), 0.0, em, 384) is None
    with pytest.raises(InputError):
        tm.step_time("gpt_pmp", "t4", (1,), 1)


def test_pipeline_matches_sia_rule(tm):
    """gpt_pmp on one rtx node: Sia's 3*((stages-1)+48)*forward + sync, from the profile row (8, b=1)."""
    step, _ = tm.step_time("gpt_pmp", "rtx", (8,), 1, 48)
    assert step == pytest.approx(3 * (7 + 48) * 0.099 + 0.3275, rel=1e-3)


@pytest.mark.parametrize("model", MAIN + ("gpt_pmp",))
def test_best_batch_bounds_and_beats_init(tm, em, model):
    init, top = em.init_batch_size(model), em.max_batch_size(model)
    types = ("rtx", "a100") if model == "gpt_pmp" else TYPES
    shapes = [(8,), (8, 8)] if model == "gpt_pmp" else [(1,), (2,), (4,), (4, 4), (2, 2, 2)]
    for gtype in types:
        for shape in shapes:
            for frac in (0.0, 0.5, 0.95):
                progress = frac * em.target_progress(model)
                best = tm.best_batch(model, gtype, shape, progress, em, top)
                assert best is not None
                assert best.batch_size <= top
                base = tm.batch_choice(model, gtype, shape, max(init, 1), progress, em)
                assert best.goodput >= base.goodput * (1 - 1e-9), (model, gtype, shape, frac)


def test_best_batch_prefers_bigger_batches_on_more_gpus(tm, em):
    one = tm.best_batch("imagenet", "a100", (1,), 1e7, em, 12800)
    many = tm.best_batch("imagenet", "a100", (8, 8), 1e7, em, 12800)
    assert many.batch_size > one.batch_size and many.goodput > one.goodput


def test_best_batch_is_cached(tm, em):
    """The same question is answered from the cache (its speed is measured in benchmarks/unit_speed.py)."""
    first = tm.best_batch("cifar10", "t4", (4, 4), 1000.0, em, 4096)
    assert tm.best_batch("cifar10", "t4", (4, 4), 1000.0, em, 4096) is first


def test_load_without_data_directory(tmp_path):
    """The packaged JSON is all the runtime needs: no data directory, still a working world model."""
    code = ("from dlsched.world.throughput import ThroughputModel; from dlsched.world.efficiency import "
            "EfficiencyModel; from dlsched.datadir import data_dir; assert data_dir() is None; "
            "tm = ThroughputModel.load(); em = EfficiencyModel.load(); "
            "c = tm.best_batch('bert', 'a100', (8,), 0.0, em, 384); assert c.goodput > 0; print('ok')")
    env = {"DLSCHED_DATA": str(tmp_path / "missing"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_datadir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path / "nope"))
    assert data_dir() is None
    with pytest.raises(InputError) as err:
        require_data("sia/profiles", "Sia profiles")
    assert "DLSCHED_DATA" in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "sia").mkdir()
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path))
    assert data_dir() == tmp_path.resolve()
    with pytest.raises(InputError, match="Sia profiles"):
        require_data("sia/profiles", "Sia profiles")
    assert require_data("sia", "Sia data") == tmp_path.resolve() / "sia"
    monkeypatch.delenv("DLSCHED_DATA")
    monkeypatch.chdir(tmp_path)
    assert data_dir() is None or data_dir() == default_dir().resolve()  # the user data directory, not ../


def test_step_time_is_finite_everywhere(tm):
    for model in MAIN:
        for gtype in TYPES:
            for shape in [(1,), (8,), (8,) * 16]:
                for b in (1, 7, tm.max_local_bsz(model, gtype)):
                    step, sync = tm.step_time(model, gtype, shape, b)
                    assert math.isfinite(step) and step > 0 and 0 <= sync <= step
    assert np.isinf(tm.step_time("bert", "rtx", (), 8)[0])
