"""The run configuration and the one run function: what a run means, whoever starts it."""

from __future__ import annotations

import math

import pytest

from dlsched.core import InputError
from dlsched.sim.config import RunConfig, route_settings
from dlsched.sim.run import StopRun, run_many, simulate
from dlsched.world.base import WorldConfig

TINY = "synthetic:rate=6,hours=1,seed=3"
WALL_KEYS = ("sim_wall_s", "policy_time_median_s", "policy_time_p99_s")


def _steady(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in WALL_KEYS}


@pytest.mark.parametrize(("fields", "field"), [
    ({"round_s": 0.5}, "round_s"), ({"round_s": 2 * 86400.0}, "round_s"), ({"round_s": math.nan}, "round_s"),
    ({"seed": -1}, "seed"), ({"world_seed": -2}, "world_seed"), ({"trace_seed": 1.5}, "trace_seed"),
    ({"jobs": 0}, "jobs"), ({"max_time_s": 0.0}, "max_time_s"), ({"stall_rounds": 0}, "stall_rounds"),
    ({"cluster_scale": 0}, "cluster_scale"), ({"summary_jobs": (5, 5)}, "summary_jobs"),
    ({"world": {"locality_penalty": 0.5}}, "world.locality_penalty"),
    ({"world": {"restart_delay_scale": -1}}, "world.restart_delay_scale"),
    ({"world": {"colour": "blue"}}, "world.colour"), ({"colour": "blue"}, "colour"),
    ({"ftf": {"share": "node"}}, "ftf.share"), ({"ftf": {"combine": "max"}}, "ftf.combine"),
    ({"ftf": {"isolated": "oracle"}}, "ftf.isolated"), ({"ftf": {"colour": "blue"}}, "ftf.colour"),
])
def test_out_of_range_fields_are_input_errors_naming_the_field(fields, field):
    with pytest.raises(InputError) as info:
        RunConfig(**fields)
    assert info.value.field == field
    with pytest.raises(InputError):
        RunConfig.parse(fields)


def test_world_options_are_typed_from_worldconfig():
    cfg = RunConfig(world={"locality_penalty": "1.5", "variability": "off", "profile_steps": "10"})
    world = cfg.world_config()
    assert isinstance(world, WorldConfig)
    assert (world.locality_penalty, world.variability, world.profile_steps) == (1.5, False, 10)
    assert RunConfig(world={"locality_penalty": "none"}).world_config().locality_penalty is None


def test_set_keys_are_routed_to_world_engine_and_policy():
    routed = route_settings({"locality_penalty": "2", "world.variability": "0", "stall_rounds": "5", "p": "-1"})
    assert routed == {"world": {"locality_penalty": "2", "variability": "0"}, "stall_rounds": "5",
                      "settings": {"p": "-1"}}
    routed = route_settings({"ftf.share": "cluster", "ftf.isolated": "started"})
    assert routed["ftf"] == {"share": "cluster", "isolated": "started"}
    cfg = RunConfig(ftf=routed["ftf"])
    assert (cfg.ftf.share, cfg.ftf.combine, cfg.ftf.isolated) == ("cluster", "ratio", "started")


def test_resolved_config_records_what_the_run_used():
    rec = simulate(RunConfig(trace="synthetic:rate=6,hours=1", policy="gavel", jobs=3, seed=2))
    cfg = rec.config
    assert cfg.round_s == 360.0  # gavel's own round length
    assert cfg.world_seed == 2 and cfg.trace_seed == 0
    assert cfg.trace == "synthetic:rate=6,hours=1,seed=1"  # the generator's default seed, spelled out
    assert cfg.world.restart_delay_scale == 1.0
    assert rec.config_record()["scheduler"].startswith("gavel")
    staged = simulate(RunConfig(trace=TINY, policy="tiresias", jobs=3)).config
    assert (staged.ordering, staged.allocation, staged.placement) == ("tiresias-2dlas", "gang", "packed-sticky")
    assert staged.round_s == 60.0 and staged.label == "tiresias"


def test_resolved_config_replays_the_same_summary():
    first = simulate(RunConfig(trace=TINY, policy="random-sticky", seed=4, world={"locality_penalty": 1.5}))
    again = simulate(RunConfig.parse(first.config.model_dump()))
    assert _steady(again.summary) == _steady(first.summary)
    assert again.config == first.config


def test_trace_seed_seeds_generated_traces_without_their_own():
    a = simulate(RunConfig(trace="synthetic:rate=6,hours=1", trace_seed=7, jobs=4))
    b = simulate(RunConfig(trace="synthetic:rate=6,hours=1,seed=7", jobs=4))
    assert _steady(a.summary) == _steady(b.summary) | {"trace": a.summary["trace"]}
    assert a.config.trace == "synthetic:rate=6,hours=1,seed=7"


def test_extra_jobs_run_in_front_of_the_trace():
    extra = {"job_id": "big", "submit_time_s": 0, "model": "cifar10", "num_gpus": 2, "batch_size": 128}
    rec = simulate(RunConfig(trace=TINY, jobs=3, extra_jobs=[extra]))
    assert rec.summary["jobs"] == 4
    assert any(j.job_id == "big" and j.finish_s is not None for j in rec.jobs)
    with pytest.raises(InputError, match="extra_jobs"):
        simulate(RunConfig(trace=TINY, jobs=3, extra_jobs=[{**extra, "num_gpus": 0}]))


def test_summary_covers_the_jobs_window_only():
    full = simulate(RunConfig(trace=TINY))
    part = simulate(RunConfig(trace=TINY, summary_jobs=(1, 3)))
    assert part.summary["jobs"] == 2 and full.summary["jobs"] > 2
    assert len(part.jobs) == len(full.jobs)  # the records keep every job


def test_cluster_scale_multiplies_every_node():
    rec = simulate(RunConfig(trace=TINY, jobs=2, cluster_scale=2))
    assert rec.num_gpus == 128


def test_a_caller_can_stop_a_run_and_watch_decisions():
    seen = []

    def stop_after_three(t, done, total):
        if len(seen) == 3:
            raise StopRun

    rec = simulate(RunConfig(trace=TINY), on_progress=stop_after_three,
                   on_decision=lambda view, decision: seen.append(view.time_s))
    assert not rec.complete and len(rec.rounds) == 3 and rec.jobs == []
    assert seen == [r.time_s for r in rec.rounds]


def test_run_many_keeps_order_across_processes():
    configs = [RunConfig(trace=TINY, policy=p, jobs=4) for p in ("fifo", "las", "srtf")]
    runs = run_many(configs, workers=2)
    assert [r.label for r in runs] == ["fifo", "las", "srtf"]
    bad = [configs[0], RunConfig(trace=TINY, policy="nope")]
    out = run_many(bad, workers=1, return_exceptions=True)
    assert out[0].label == "fifo" and isinstance(out[1], InputError)
    with pytest.raises(InputError, match="unknown policy"):
        run_many(bad, workers=1)
