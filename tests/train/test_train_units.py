"""The pieces of dlsched.train that need no process group: environment, splits, sampler, statistics, files."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from dlsched.core import InputError
from dlsched.train import checkpoints as ckpt
from dlsched.train.control import ControlReader
from dlsched.train.data import ElasticSampler
from dlsched.train.env import read_env
from dlsched.train.gns import GradientNoiseScale, adascale_gain, estimate_from_pair, estimate_from_steps
from dlsched.train.session import split_counts


def test_env_defaults_are_standalone() -> None:
    env = read_env({})
    assert (env.rank, env.world_size, env.managed, env.resume_step, env.report_s, env.checkpoint_s) == (
        0, 1, False, 0, 2.0, 30.0)


@pytest.mark.parametrize(("env", "field"), [
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE"),
    ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK"),
    ({"WORLD_SIZE": "2", "RANK": "0"}, "MASTER_ADDR"),
    ({"DLSCHED_RESUME_STEP": "-1"}, "DLSCHED_RESUME_STEP"),
    ({"DLSCHED_SLOWDOWN": "0.5"}, "DLSCHED_SLOWDOWN"),
    ({"DLSCHED_JOB_DIR": "relative/dir"}, "DLSCHED_JOB_DIR"),
    ({"DLSCHED_BATCH_SHARES": "0.5,0.5"}, "DLSCHED_BATCH_SHARES"),
    ({"DLSCHED_CHECKPOINT_S": "0"}, "DLSCHED_CHECKPOINT_S"),
])
def test_bad_env_names_the_variable(env: dict[str, str], field: str) -> None:
    with pytest.raises(InputError) as err:
        read_env(env)
    assert err.value.field == field


def test_shares_are_normalised_and_empty_means_equal() -> None:
    env = read_env({"WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "9", "DLSCHED_BATCH_SHARES": "3,1",
                    "DLSCHED_BATCH_SIZE": "", "DLSCHED_LR": ""})
    assert env.batch_shares == (0.75, 0.25) and env.batch_size is None and env.lr is None


@given(st.integers(1, 500), st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6))
def test_split_counts_sum_and_give_every_rank_a_sample(total: int, raw: list[float]) -> None:
    shares = tuple(r / sum(raw) for r in raw)
    counts = split_counts(total, shares)
    assert sum(counts) == total
    if total >= len(shares):
        assert min(counts) >= 1


@given(st.integers(2, 97), st.lists(st.integers(1, 40), min_size=1, max_size=30), st.integers(1, 5))
def test_sampler_visits_each_sample_once_per_epoch_whatever_the_batches(size: int, batches: list[int],
                                                                       world: int) -> None:
    if size < world:
        return
    sampler = ElasticSampler(size, seed=7)
    shares = tuple(1.0 / world for _ in range(world))
    seen: list[int] = []
    i = 0
    while sampler.epoch == 0:
        take, counts = sampler.plan(max(world, batches[i % len(batches)]), shares)
        assert min(counts) >= 1
        for r in range(world):
            seen.extend(sampler.indices(counts, r).tolist())
        sampler.advance(take)
        i += 1
    assert sorted(seen) == list(range(size))


def test_sampler_state_resumes_in_the_same_permutation() -> None:
    a = ElasticSampler(50, seed=1)
    a.advance(20)
    b = ElasticSampler(50, seed=1)
    b.load_state_dict(a.state_dict())
    assert b.indices([5], 0).tolist() == a.indices([5], 0).tolist()
    with pytest.raises(InputError):
        ElasticSampler(40, seed=1).load_state_dict(a.state_dict())


def test_pair_estimates_are_unbiased_on_a_known_distribution() -> None:
    """Samples g ~ G + noise with known |G|^2 and S: averaged estimates recover both."""
    gen = torch.Generator().manual_seed(0)
    dim, big_g, sigma = 20, torch.full((20,), 0.3), 1.5
    true_sqr, true_noise = float(big_g.square().sum()), sigma ** 2 * dim
    pair = GradientNoiseScale(init_batch=8, smoothing=0.999)
    steps = GradientNoiseScale(init_batch=8, smoothing=0.999)
    prev = None
    for _ in range(3000):
        locals_ = [big_g + sigma * torch.randn(4, dim, generator=gen).mean(0) for _ in range(2)]
        glob = sum(locals_) / 2
        est = estimate_from_pair(sum(float(v.square().sum()) for v in locals_) / 2, 1 / 4, float(glob.square().sum()), 8)
        assert est is not None
        pair.update(*est)
        if prev is not None:
            one = estimate_from_steps(float(prev.square().sum()), float(locals_[0].square().sum()),
                                      float(prev @ locals_[0]), 4, 4)
            assert one is not None
            steps.update(*one)
        prev = locals_[0]
    for g in (pair, steps):
        assert g.noise == pytest.approx(true_noise, rel=0.05)
        assert g.grad_sqr == pytest.approx(true_sqr, rel=0.15)
        assert g.grad_var == pytest.approx(g.noise / 8)


def test_adascale_gain_limits() -> None:
    assert adascale_gain(64, 64, 1.0, 1.0) == 1.0
    assert adascale_gain(256, 64, None, None) == 1.0
    assert adascale_gain(256, 64, 1e-9, 1.0) == pytest.approx(4.0, rel=1e-6)
    assert adascale_gain(256, 64, 1.0, 1e-9) == pytest.approx(1.0, rel=1e-6)


def test_checkpoints_keep_the_last_two_written(tmp_path: Path) -> None:
    for step in (3, 7, 12):
        ckpt.save(tmp_path, step, {"step": step})
    assert ckpt.saved_steps(tmp_path) == [7, 12]
    assert ckpt.load(ckpt.checkpoint_file(tmp_path, 12)) == {"step": 12}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_control_is_read_once_per_change_and_stale_incarnations_are_ignored(tmp_path: Path) -> None:
    reader = ControlReader(tmp_path, incarnation=1)
    assert reader.poll() is None
    path = tmp_path / "control.json"
    path.write_text(json.dumps({"incarnation": 0, "batch_size": None, "stop": True}))
    assert reader.poll() is None
    path.write_text(json.dumps({"incarnation": 1, "batch_size": 96, "stop": False}))
    os.utime(path, ns=(random.randint(1, 10**9), 10**18))
    got = reader.poll()
    assert got is not None and got.batch_size == 96 and not got.stop
    assert reader.poll() is None


_CRASH = """
import os, signal, sys
from pathlib import Path
from dlsched.train import checkpoints as ckpt
directory = Path(sys.argv[1])
ckpt.save(directory, 5, {"step": 5})
def crash(src, dst):  # the process dies after writing step 6's temporary file, before its rename
    os.kill(os.getpid(), signal.SIGKILL)
os.replace = crash
ckpt.save(directory, 6, {"step": 6})
"""


def test_a_crash_between_writing_and_renaming_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = Path(__file__).resolve().parents[2] / "src"
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path)], env={**os.environ, "PYTHONPATH": str(src)},
                          timeout=120)
    assert proc.returncode == -9  # really killed at that point
    assert ckpt.saved_steps(tmp_path) == [5]
    assert ckpt.load(ckpt.checkpoint_file(tmp_path, 5)) == {"step": 5}
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > 0  # step 6 was written, never renamed
    ckpt.save(tmp_path, 7, {"step": 7})  # the next writer clears the dead one's temporary file
    assert ckpt.saved_steps(tmp_path) == [5, 7]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_rerun_in_a_used_folder_keeps_its_newest_checkpoints(tmp_path: Path) -> None:
    for step in (100, 200):  # an earlier run that got further
        ckpt.save(tmp_path, step, {"step": step})
        os.utime(ckpt.checkpoint_file(tmp_path, step), ns=(10**18 + step, 10**18 + step))
    ckpt.save(tmp_path, 10, {"step": 10})
    assert ckpt.saved_steps(tmp_path) == [10, 200]  # the new one stays, with the newest of the old run
    ckpt.save(tmp_path, 20, {"step": 20})
    assert ckpt.saved_steps(tmp_path) == [10, 20]
    assert ckpt.load(ckpt.checkpoint_file(tmp_path, 20)) == {"step": 20}


def test_smoothing_is_per_unit_of_scale() -> None:
    a, b = GradientNoiseScale(init_batch=8), GradientNoiseScale(init_batch=8)
    assert a.smoothing == 0.999  # AdaptDL's
    a.update(1.0, 2.0, scale=4.0)
    for _ in range(4):
        b.update(1.0, 2.0, scale=1.0)
    assert a.weight == pytest.approx(b.weight)  # one step of 4 B0 ages the history as four of B0
