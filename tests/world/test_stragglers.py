"""Straggler episodes: the fitted process, its reproducibility, its effect on jobs, and what schedulers see."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from dlsched.core import Adaptivity, InputError, JobSpec
from dlsched.policies import build_scheduler
from dlsched.sim.config import RunConfig
from dlsched.sim.engine import Engine, SimConfig
from dlsched.world.base import World, WorldConfig
from dlsched.world.stragglers import EpisodeProcess, StragglerEpisodes, fitted_params
from testkit import Recorder, duration_job, needs_data, small_cluster

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
DAY = 86400.0


def longhorn(nodes: int = 4):
    return small_cluster((("v100", nodes, 4),), variability="longhorn")


def episodes(seed: int, nodes: int = 4) -> StragglerEpisodes:
    ep = StragglerEpisodes.for_cluster(longhorn(nodes), seed=seed, enabled=True)
    assert ep is not None
    return ep


# -- the fitted numbers ------------------------------------------------------------------------------------
def test_fitted_statistics_in_range():
    """Longhorn: about 1 session in 70 is an episode, lasting 9 to 28 minutes, 1.7x to 3.6x slower."""
    p = EpisodeProcess.for_family("longhorn")
    assert p is not None
    assert 0.005 < p.fraction_in_episode < 0.03
    assert 300 < p.length_low_s < p.length_high_s < 3600
    assert 12 * 3600 < p.mean_gap_s < 48 * 3600
    mu, sd = p.log_factor["classA"]
    assert 2.0 < np.exp(mu) < 3.2 and 0 < sd < 0.5
    assert set(p.log_factor) == {"classA"}  # BERT and PageRank runs show no episode
    for fam in ("frontera", "ls6", "testbed32"):  # no run over 1.5x its GPU's median: no episodes
        assert EpisodeProcess.for_family(fam) is None
    assert EpisodeProcess.for_family(None) is None


@needs_data("pal", "aggregated_data", "sim", "resnet-longhorn-agg.csv")
def test_committed_fit_is_what_the_script_computes(tmp_path):
    spec = importlib.util.spec_from_file_location("fit_stragglers", SCRIPTS / "fit_stragglers.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    out = tmp_path / "s.json"
    assert mod.main(["--out", str(out)]) == 0
    import json
    assert json.loads(out.read_text()) == fitted_params()
    lh = fitted_params()["families"]["longhorn"]
    assert lh["episode_sessions"] == 5 and lh["sessions"] == 351


def test_long_run_share_of_time_in_episodes_matches_the_fit():
    ep = episodes(seed=1, nodes=16)
    horizon = 400 * DAY
    busy = sum(min(e, horizon) - s for n in range(16) for s, e in ep.episodes(n, horizon))
    share = busy / (16 * horizon)
    assert share == pytest.approx(ep.process.fraction_in_episode, rel=0.15)


# -- reproducibility ---------------------------------------------------------------------------------------
def test_episodes_are_reproducible_per_seed_and_independent_of_query_order():
    a, b, c = episodes(7), episodes(7), episodes(8)
    # b is queried in another order (late times first, node 3 first) than a
    b.factors("classA", (12, 13), 30 * DAY)
    b.changes((0, 4), 5 * DAY, 6 * DAY)
    for n in range(4):
        assert a.episodes(n, 30 * DAY) == b.episodes(n, 30 * DAY)
        assert len(a.episodes(n, 30 * DAY)) > 0
    assert [a.episodes(n, 30 * DAY) for n in range(4)] != [c.episodes(n, 30 * DAY) for n in range(4)]


def run(cluster, specs, world_cfg: WorldConfig, seed: int = 0, round_s: float = 360.0):
    world = World(cluster, world_cfg, seed=seed)
    sched = Recorder(build_scheduler("fifo"))
    res = Engine(cluster, specs, sched, world, SimConfig(round_s=round_s, seed=seed)).run()
    return res, world, sched


# -- a job in an episode -----------------------------------------------------------------------------------
def test_job_in_an_episode_runs_slower_by_its_factor_and_recovers_after():
    cluster = small_cluster((("v100", 1, 4),), variability="longhorn")
    seed = 3
    world = World(cluster, WorldConfig(), seed=seed)
    assert world.episodes is not None
    (s, e), nxt = world.episodes.episodes(0, 60 * DAY)[:2]
    gpus = (0, 1, 2, 3)
    factor = world.episode_slowdown("classA", gpus, s)
    assert factor > 1.5
    # inside the episode the gang is slower by its slowest GPU's factor; before and after it is not
    pieces = world.episode_pieces("classA", gpus, s - 100, e + 100)
    assert pieces == [(s - 100, s, 1.0), (s, e, pytest.approx(factor)), (e, e + 100, 1.0)]
    assert world.episode_slowdown("classA", gpus, e) == 1.0
    assert world.episode_slowdown("classB", gpus, s) == 1.0  # BERT-like jobs showed no episodes
    # a whole-node job whose run spans the episode (and ends before the next one): it loses (e - s)(1 - 1/f)
    scale = float(max(world.speeds.scores("classA")[list(gpus)]))
    duration = (e + 0.5 * (nxt[0] - e)) / scale
    off, _, _ = run(cluster, [duration_job("a", 0.0, 4, duration)], WorldConfig(straggler_episodes="off"), seed)
    on, _, _ = run(cluster, [duration_job("a", 0.0, 4, duration)], WorldConfig(straggler_episodes="on"), seed)
    assert off.jobs[0].finish_s == pytest.approx(duration * scale, rel=1e-9)
    assert on.jobs[0].finish_s - off.jobs[0].finish_s == pytest.approx((e - s) * (1 - 1 / factor), rel=1e-6)


def test_episode_shows_in_reported_step_times_only_while_it_lasts():
    cluster = small_cluster((("v100", 1, 4),), variability="longhorn")
    seed = 3
    world = World(cluster, WorldConfig(), seed=seed)
    (s, e), nxt = world.episodes.episodes(0, 60 * DAY)[:2]
    # a PAL iteration job (reports its step time every round) held across the episode, 60 s rounds
    job = JobSpec(job_id="r", submit_time_s=0.0, model="resnet50", num_gpus=4, adaptivity=Adaptivity.RIGID,
                  iterations=int((e + 0.5 * (nxt[0] - e)) / world.pal.iteration_time_s("resnet50", source="test")))
    _, _, rec = run(cluster, [job], WorldConfig(), seed, round_s=60.0)
    steps = {round(o.time_s): o.step_time_s for view, _ in rec.log for jv in view.jobs for o in jv.throughput_obs}
    inside = [v for t, v in steps.items() if s < t <= e]
    outside = [v for t, v in steps.items() if t <= s or t > e + 60]
    assert len(outside) > 100
    base = min(outside)
    assert inside and min(inside) > 1.5 * base
    assert max(outside) == pytest.approx(base)


# -- what a scheduler sees ---------------------------------------------------------------------------------
def test_scheduler_sees_only_the_static_profile():
    cluster = longhorn(2)
    specs = [duration_job(f"j{i}", 600.0 * i, 4, 20 * 3600.0) for i in range(6)]
    on, world, rec_on = run(cluster, specs, WorldConfig(straggler_episodes="on"), seed=5)
    _, _, rec_off = run(cluster, specs, WorldConfig(straggler_episodes="off"), seed=5)
    assert any(world.episodes.episodes(n, on.end_time_s) for n in range(2))  # episodes did happen
    profile = world.speeds.measured_profile()
    for log in (rec_on.log, rec_off.log):
        for view, _ in log:
            assert set(view.gpu_scores) == set(profile)
            for c in profile:
                np.testing.assert_array_equal(view.gpu_scores[c], profile[c])
    # the first decision is made on identical views: nothing about the coming episodes leaks
    assert rec_on.log[0][1] == rec_off.log[0][1]
    names = [f.name for f in dataclasses.fields(rec_on.log[0][0])]
    assert "gpu_scores" in names and not any("episode" in n or "straggler" in n for n in names)


# -- the option --------------------------------------------------------------------------------------------
def test_off_means_no_episodes_and_default_follows_gpu_speeds():
    cluster = longhorn()
    assert World(cluster, WorldConfig(straggler_episodes="off")).episodes is None
    assert World(cluster, WorldConfig(variability=False)).episodes is None
    assert World(cluster, WorldConfig()).episodes is not None  # medians: on by default
    assert WorldConfig().episodes == "on"
    assert WorldConfig(gpu_speeds="single-runs").episodes == "off"
    assert World(small_cluster((("v100", 2, 4),))).episodes is None  # no variability profile
    frontera = small_cluster((("rtx5000", 2, 4),), variability="frontera")
    assert World(frontera, WorldConfig(straggler_episodes="on")).episodes is None  # its runs show none
    res, _, _ = run(cluster, [duration_job("a", 0, 4, 40 * DAY)], WorldConfig(straggler_episodes="off"))
    scale = float(max(World(cluster, WorldConfig(), seed=0).speeds.scores("classA")[:4]))
    assert res.jobs[0].finish_s == pytest.approx(40 * DAY * scale)


def test_option_is_checked_before_a_run():
    with pytest.raises(InputError) as info:
        RunConfig(world={"straggler_episodes": "sometimes"})
    assert info.value.field == "world.straggler_episodes"
    with pytest.raises(InputError) as info:
        RunConfig(world={"gpu_speeds": "single-runs", "straggler_episodes": "on"})
    assert info.value.field == "world.straggler_episodes" and "twice" in str(info.value)
    assert RunConfig(world={"straggler_episodes": "off"}).world_config().episodes == "off"
