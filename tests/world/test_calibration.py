"""World calibration profiles: per-model slowdowns and restart delays as Sia's simulator applied them, the
cluster presets' defaults, and a run saying which profile it played."""

from __future__ import annotations

import pytest

from dlsched.core import KNOWN_GPU_TYPES, Adaptivity, InputError, JobSpec, Placement, make_cluster
from dlsched.sim.about import describe_runs, header_line, row_fields
from dlsched.sim.config import RunConfig, route_settings
from dlsched.sim.run import prepare, simulate
from dlsched.world.base import World, WorldConfig
from dlsched.world.calibration import calibration, profile_names

TINY = "synthetic:rate=6,hours=1,seed=3"
#: The artifact's SLOWDOWNS (sia-simulator/simulator_config.py) and rescale_time (applications.py).
ARTIFACT_SLOWDOWN = {"cifar10": 1.8, "ncf": 1.5, "bert": 1.2, "deepspeech2": 1.2, "imagenet": 1.2, "yolov3": 1.2,
                     "gpt_pmp": 1.0}
ARTIFACT_RESTART_S = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0, "imagenet": 250.0,
                      "ncf": 15.0, "gpt_pmp": 30.0}


def worlds(types: tuple[str, ...] = ("t4", "rtx", "a100")) -> tuple[World, World]:
    cluster = make_cluster("c", [(t, 2, 8) for t in types], {t: KNOWN_GPU_TYPES[t] for t in types})
    off = WorldConfig(variability=False)
    on = WorldConfig(variability=False, calibration="sia-artifact")
    return World(cluster, off), World(cluster, on)


def adaptive(model: str, batch_size: int | None = None) -> JobSpec:
    return JobSpec(job_id=f"j-{model}", submit_time_s=0.0, model=model, num_gpus=2, batch_size=batch_size,
                   adaptivity=Adaptivity.ADAPTIVE if batch_size is None else Adaptivity.RIGID)


def test_the_artifact_profile_holds_the_artifacts_factors_and_delays():
    prof = calibration("sia-artifact")
    assert {m: prof.slowdown(m) for m in ARTIFACT_SLOWDOWN} == ARTIFACT_SLOWDOWN
    assert {m: prof.restart_delay_s(m, -1.0) for m in ARTIFACT_RESTART_S} == ARTIFACT_RESTART_S
    assert calibration("none").slowdown("cifar10") == 1.0
    assert set(profile_names()) == {"none", "sia-artifact"}


@pytest.mark.parametrize("model", sorted(ARTIFACT_SLOWDOWN))
@pytest.mark.parametrize("batch", [None, 512])
def test_slowdown_stretches_the_whole_iteration_on_every_type(model, batch):
    """The artifact multiplies goodput by 1/slowdown whatever GPU type the job runs on: step and sync time
    both grow by the factor, goodput and throughput shrink by it, and the chosen batch does not move."""
    off, on = worlds()
    s = ARTIFACT_SLOWDOWN[model]
    spec = adaptive(model, batch)
    p_off, p_on = off.physics(spec), on.physics(spec)
    checked = 0
    for gtype in ("t4", "rtx", "a100"):
        if not off.throughput.supports(model, gtype):
            continue
        counts = (8,) if model == "gpt_pmp" else (2,)
        a = p_off.base_rate(0.3 * p_off.total_work, gtype, counts, batch)
        b = p_on.base_rate(0.3 * p_on.total_work, gtype, counts, batch)
        if a.work_per_s == 0:
            continue
        checked += 1
        assert b.batch_size == a.batch_size and b.local_bsz == a.local_bsz and b.accum_steps == a.accum_steps
        assert b.step_time_s == pytest.approx(a.step_time_s * s, rel=1e-12)
        assert b.sync_time_s == pytest.approx(a.sync_time_s * s, rel=1e-12)
        assert b.work_per_s == pytest.approx(a.work_per_s / s, rel=1e-12)
        assert b.throughput_sps == pytest.approx(a.throughput_sps / s, rel=1e-12)
        # the world's rate on exact GPUs (what the engine plays) carries the same factor
        gpus = [g for g in range(on.cluster.num_gpus) if on.cluster.gpu_type_of[g] == gtype][:counts[0]]
        ra = off.rate(p_off, 0.0, Placement.of(gpus), batch)
        rb = on.rate(p_on, 0.0, Placement.of(gpus), batch)
        assert rb.work_per_s == pytest.approx(ra.work_per_s / s, rel=1e-12)
    assert checked >= 1


def test_restart_delays_and_profiling_follow_the_profile():
    off, on = worlds(("rtx",))
    assert off.physics(adaptive("gpt_pmp")).restart_delay_s == 250.0  # the world's own table
    assert on.physics(adaptive("gpt_pmp")).restart_delay_s == 30.0  # the artifact's default rescale_time
    for model, delay in ARTIFACT_RESTART_S.items():
        assert on.physics(adaptive(model)).restart_delay_s == delay
    scaled = World(on.cluster, WorldConfig(variability=False, calibration="sia-artifact", restart_delay_scale=2.0))
    assert scaled.physics(adaptive("ncf")).restart_delay_s == 30.0
    # profiling measures the calibrated step times a real job would report
    spec = adaptive("cifar10")
    place = Placement.of(range(4))
    _, obs_off = off.profile(off.physics(spec), place, 0.0)
    _, obs_on = on.profile(on.physics(spec), place, 0.0)
    assert [o.local_bsz for o in obs_on] == [o.local_bsz for o in obs_off] and obs_on
    for a, b in zip(obs_off, obs_on, strict=True):
        assert b.step_time_s == pytest.approx(1.8 * a.step_time_s, rel=1e-12)


def test_unknown_profile_is_refused_naming_the_field():
    with pytest.raises(InputError) as info:
        RunConfig(world={"calibration": "fast"})
    assert info.value.field == "world.calibration"
    assert "none" in str(info.value) and "sia-artifact" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InputError) as info:
        WorldConfig(calibration="fast")
    assert info.value.field == "calibration"


def test_the_word_none_names_the_profile_not_an_unset_option():
    cfg = RunConfig(**route_settings({"world.calibration": "none"}))
    assert cfg.world_config().calibration == "none"
    assert "calibration" in cfg.world.model_fields_set


@pytest.mark.parametrize(("cluster", "world", "expected"), [
    ("sia-homo-64", {}, "sia-artifact"), ("sia-hetero-64", {}, "sia-artifact"),
    ("sia-physical-44", {}, "sia-artifact"), ("pal-64", {}, "none"),
    ("sia-homo-64", {"calibration": "none"}, "none"), ("pal-64", {"calibration": "sia-artifact"}, "sia-artifact"),
])
def test_sia_presets_default_to_the_artifact_profile_and_the_run_wins(cluster, world, expected):
    run = prepare(RunConfig(cluster=cluster, trace=TINY, jobs=2, world=world))
    assert run.config.world_config().calibration == expected
    assert run.engine.world.calibration.name == expected
    # the resolved configuration names it, so replaying it plays the same world on any cluster
    assert RunConfig.parse(run.config.model_dump(mode="json")).world_config().calibration == expected


def test_a_cluster_file_may_name_world_defaults_and_bad_ones_name_the_file(tmp_path):
    good = tmp_path / "c.yaml"
    good.write_text("name: c\nworld:\n  calibration: sia-artifact\nnodes:\n  - {gpu_type: t4, count: 2, "
                    "gpus_per_node: 4}\n")
    assert prepare(RunConfig(cluster=str(good), trace=TINY, jobs=2)).engine.world.calibration.name == "sia-artifact"
    unknown = tmp_path / "u.yaml"
    unknown.write_text(good.read_text().replace("calibration:", "colour:"))
    with pytest.raises(InputError) as info:
        prepare(RunConfig(cluster=str(unknown), trace=TINY, jobs=2))
    assert info.value.source == str(unknown) and "colour" in str(info.value)
    bad = tmp_path / "b.yaml"
    bad.write_text(good.read_text().replace("sia-artifact", "fast"))
    with pytest.raises(InputError) as info:
        prepare(RunConfig(cluster=str(bad), trace=TINY, jobs=2))
    assert info.value.source == str(bad) and info.value.field == "world.calibration"


def test_a_run_records_its_profile_and_the_calibrated_world_is_slower():
    base = {"cluster": "sia-homo-64", "trace": TINY, "jobs": 3, "policy": "fifo"}
    cal = simulate(RunConfig(**base))
    raw = simulate(RunConfig(**base, world={"calibration": "none"}))
    assert cal.summary["calibration"] == "sia-artifact" and raw.summary["calibration"] == "none"
    assert cal.config_record()["world"]["calibration"] == "sia-artifact"
    assert "world calibration sia-artifact" in header_line(describe_runs([cal]))
    assert "world calibration none, sia-artifact" in header_line(describe_runs([raw, cal]))
    assert row_fields([cal])["calibration"] == "sia-artifact"
    assert cal.summary["avg_jct_s"] > raw.summary["avg_jct_s"]
