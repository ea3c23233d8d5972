"""Fitting a simulator world to what runtime jobs report (no Ray, no PyTorch: the reports are made here)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import InputError
from dlsched.runtime.fit import (
    fit_and_simulate,
    fit_profiles,
    fit_step_times,
    fixed_overheads,
    mean_round_s,
    model_name,
    round_overheads,
    trace_rows,
)
from dlsched.sim.config import RunConfig
from dlsched.world.fitted import load_profiles

TRUE = {"mlp": (0.004, 0.0002, 0.01, 0.002), "resnet": (0.02, 0.003, 0.03, 0.004)}
FACTOR = {"a100": 1.0, "rtx": 1.9, "t4": 2.9}


def _step(model: str, gpu: str, k: int, b: int) -> float:
    ac, bc, ar, br = TRUE[model]
    return FACTOR[gpu] * (ac + bc * b + (ar + br * (k - 2) if k > 1 else 0.0))


def _obs(model: str, gpu: str, k: int, b: int, noise: float = 1.0) -> dict:
    return {"time_s": 0.0, "gpu_type": gpu, "num_nodes": 1 if k <= 2 else 2, "num_gpus": k, "local_bsz": b,
            "accum_steps": 1, "step_time_s": _step(model, gpu, k, b) * noise, "sync_time_s": 0.0}


JOBS = [{"job_id": "a", "model": "mlp", "gpus": 1, "samples": 4096, "epochs": 2, "init_batch": 32,
         "max_batch": 256, "submit_s": 0.0},
        {"job_id": "b", "model": "resnet", "gpus": 2, "samples": 2048, "epochs": 3, "init_batch": 32,
         "max_batch": 128, "submit_s": 10.0}]


def _run(noise: float = 1.0, overhead: float = 1.25, jobs: tuple[str, ...] = ("a", "b")) -> dict:
    models = {"a": "mlp", "b": "resnet"}
    obs = {j: [_obs(models[j], g, k, b, noise if (k + b) % 2 else 1.0) for g in FACTOR for k in (1, 2, 4)
               for b in (16, 32, 64)] for j in jobs}
    reports = {j: [{"done": False, "steps": 50, "step_time_s": 0.1, "round_wall_s": 5.0 * overhead, "wall_s": 4.0,
                    "resumed_step": 0},
                   {"done": True, "steps": 3, "step_time_s": 0.1, "round_wall_s": 20.0, "wall_s": 0.3 * overhead,
                    "resumed_step": 50}]
               for j in obs}
    grads = {j: [{"time_s": 0.0, "batch_size": 32, "grad_sqr": 2.0, "grad_var": v} for v in (5.0, 6.0, 7.0)]
             for j in obs}
    return {"throughput_obs": obs, "gradient_obs": grads, "reports": reports,
            "summary": {"avg_jct_s": 100.0, "makespan_s": 200.0}, "round_starts_s": [0.0, 21.0, 44.0]}


def test_the_fit_recovers_step_times_and_type_factors():
    run = _run()
    params, factor, quality = fit_step_times({"mlp": run["throughput_obs"]["a"],
                                              "resnet": run["throughput_obs"]["b"]})
    ref = quality["reference_type"]
    for gpu, f in FACTOR.items():
        assert factor[gpu] == pytest.approx(f / FACTOR[ref], rel=1e-3)
    for model in TRUE:
        p = params[model]
        for k, b in ((1, 16), (2, 64), (4, 32)):
            got = (p["alpha_c"] + p["beta_c"] * b + (p["alpha_r"] + p["beta_r"] * (k - 2) if k > 1 else 0))
            assert got == pytest.approx(_step(model, ref, k, b), rel=1e-3)
        assert quality["models"][model]["median_rel_err"] < 1e-3


@settings(max_examples=15, deadline=None)
@given(noise=st.floats(0.7, 1.4))
def test_a_few_disturbed_rows_move_the_fit_little(noise):
    """Every other row slowed or sped up by up to 40%: the fitted times stay within that disturbance."""
    run = _run(noise)
    params, factor, _ = fit_step_times({"mlp": run["throughput_obs"]["a"]})
    p = params["mlp"]
    for gpu in FACTOR:
        got = factor[gpu] * (p["alpha_c"] + p["beta_c"] * 32)
        truth = _step("mlp", gpu, 1, 32)
        assert min(1.0, noise) * 0.97 <= got / truth <= max(1.0, noise) * 1.03


def test_round_overheads_count_the_last_round_by_the_workers_time():
    run = _run(overhead=1.25)
    for reports in run["reports"].values():
        reports[-1]["wall_s"] = 0.3 * 1.5  # 3 steps of 0.1 s in the worker's 0.45 s; the round went on for 20 s
    want = (50 * 0.1 * 1.25 + 0.45) / (50 * 0.1 + 0.3)
    assert round_overheads([run], {"a": "mlp", "b": "resnet"}) == {"mlp": pytest.approx(want),
                                                                    "resnet": pytest.approx(want)}


def test_profiles_give_each_job_its_work_batches_and_stretched_step_times(tmp_path):
    profiles = fit_profiles(JOBS, [_run()], "stretch")
    m = profiles["models"][model_name("b")]
    assert m["target_samples"] == 2048 * 3 and (m["init_batch"], m["max_batch"]) == (32, 128)
    assert (m["grad_sqr"], m["grad_var"]) == (2.0, 6.0)
    ref = profiles["fit"]["reference_type"]
    t4 = m["step_time"]["t4"]
    want = 1.25 * _step("resnet", "t4", 1, 32)
    assert t4["alpha_c"] + t4["beta_c"] * 32 == pytest.approx(want, rel=1e-3)
    assert ref in m["step_time"]
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(profiles))
    fitted = load_profiles(str(path))
    assert model_name("a") in fitted.sample_models
    step, _ = fitted.throughput.step_time(model_name("b"), "t4", (1,), 32)
    assert step == pytest.approx(want, rel=1e-3)
    # efficiency from Pollux's formula with phi = grad_var / grad_sqr = 3
    assert fitted.efficiency.efficiency(model_name("b"), 64, 0.0) == pytest.approx(4.0 / 5.0, rel=1e-3)


def test_fixed_overheads_are_the_first_and_later_rounds_time_without_steps():
    """First round: held 6.25 s (the round), stepped 5 s; last round: the worker's 0.375 s for 0.3 s of steps."""
    got = fixed_overheads([_run(overhead=1.25)], {"a": "mlp", "b": "resnet"})
    for m in ("mlp", "resnet"):
        assert got[m]["restart_delay_s"] == pytest.approx(1.25)
        assert got[m]["round_overhead_s"] == pytest.approx(0.075)
    profiles = fit_profiles(JOBS, [_run(overhead=1.25)])
    m = profiles["models"][model_name("b")]
    assert (m["restart_delay_s"], m["round_overhead_s"]) == (pytest.approx(1.25), pytest.approx(0.075))
    # fixed costs do not also stretch the step times
    t4 = m["step_time"]["t4"]
    assert t4["alpha_c"] + t4["beta_c"] * 32 == pytest.approx(_step("resnet", "t4", 1, 32), rel=1e-3)


def test_the_simulated_round_is_as_long_as_the_real_runs_rounds_were():
    assert mean_round_s([_run()], 20.0) == pytest.approx(22.0)
    assert mean_round_s([{"round_starts_s": [0.0]}], 20.0) == 20.0
    assert mean_round_s([{"round_starts_s": [0.0, 10.0]}], 20.0) == 20.0  # never shorter than asked


def _one_model_profiles(tmp_path, round_overhead_s: float) -> tuple[str, str, str]:
    """One runtime job whose one-GPU step takes 1 s at batch 10 (10 samples/s on t4), 300 samples of work,
    on a cluster of one t4."""
    from dlsched.traces.schema import write_trace

    job = {"job_id": "j", "model": "mlp", "gpus": 1, "samples": 150, "epochs": 2, "init_batch": 10,
           "max_batch": 10, "submit_s": 0.0}
    model = {"target_samples": 300, "init_batch": 10, "max_batch": 10, "grad_sqr": 1.0, "grad_var": 0.0,
             "round_overhead_s": round_overhead_s,
             "step_time": {"t4": {"alpha_c": 1.0, "beta_c": 0.0, "max_local_bsz": 10}}}
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"models": {model_name("j"): model}}))
    trace = write_trace(trace_rows([job]), tmp_path / "trace.csv")
    cluster = tmp_path / "one-t4.yaml"
    cluster.write_text("name: one-t4\nnodes:\n  - {gpu_type: t4, count: 1, gpus_per_node: 1}\n")
    return str(path), str(trace), str(cluster)


@pytest.mark.parametrize(("overhead", "finish"), [(0.0, 30.0), (5.0, 35.0), (4.0, 34.0)])
def test_a_job_pays_its_round_overhead_every_round_it_keeps_its_gpus(tmp_path, overhead, finish):
    """30 s of steps in rounds of 20 s: the second round starts with the overhead before the last 10 s."""
    from dlsched.sim.run import simulate

    profiles, trace, cluster = _one_model_profiles(tmp_path, overhead)
    res = simulate(RunConfig(cluster=cluster, trace=trace, policy="fifo", round_s=20.0,
                             world={"profiles": profiles, "variability": False}))
    (job,) = res.jobs
    assert job.finish_s - job.start_s == pytest.approx(finish, abs=0.01)


def test_a_round_overhead_as_long_as_the_round_is_refused_before_the_run(tmp_path):
    from dlsched.sim.run import simulate

    profiles, trace, cluster = _one_model_profiles(tmp_path, 20.0)
    with pytest.raises(InputError, match="could never progress") as err:
        simulate(RunConfig(cluster=cluster, trace=trace, policy="fifo", round_s=20.0,
                           world={"profiles": profiles, "variability": False}))
    assert "round_overhead_s" in str(err.value)


def test_target_loss_jobs_cannot_be_simulated():
    jobs = [{**JOBS[0], "epochs": None, "target_loss": 0.3}, JOBS[1]]
    with pytest.raises(InputError, match="target loss"):
        fit_profiles(jobs, [_run()])


def test_simulating_the_fitted_world_finishes_every_job_by_its_samples():
    """A sample-counted job alone on the cluster under FIFO takes its samples over its throughput (plus the
    rounds it waits to be placed), not its statistical progress."""
    jobs = [JOBS[0]]
    real = {"fifo": _run(jobs=("a",))}
    out = fit_and_simulate({"jobs": jobs}, real, ["fifo"], 20.0)
    sim = out["simulated"]["fifo"]
    assert sim["summary"]["completed"] == 1
    m = out["profiles"]["models"][model_name("a")]
    a100 = m["step_time"]["a100"]
    # FIFO runs the job on its request (1 GPU, initial batch 32) on some GPU type
    fastest = (a100["alpha_c"] + a100["beta_c"] * 32) * (4096 * 2 / 32)
    jct = sim["jobs"][0]["finish_s"] - 0.0
    slowest = fastest * max(out["profiles"]["fit"]["type_factor"].values()) / min(out["profiles"]["fit"]["type_factor"].values())
    assert fastest * 0.99 <= jct <= slowest * 1.01 + 20.0
    assert {r["metric"] for r in out["comparison"]} == {"avg_jct_s", "makespan_s"}


@pytest.mark.parametrize(("content", "match"), [
    ("{", "not JSON"),
    ('{"models": {"cifar10": {"target_samples": 1, "init_batch": 1, "max_batch": 2, "grad_sqr": 1, '
     '"grad_var": 1, "step_time": {"t4": {"alpha_c": 1, "beta_c": 0, "max_local_bsz": 4}}}}}', "packaged model"),
    ('{"models": {"x": {"target_samples": 1, "init_batch": 4, "max_batch": 2, "grad_sqr": 1, '
     '"grad_var": 1, "step_time": {"t4": {"alpha_c": 1, "beta_c": 0, "max_local_bsz": 4}}}}}', "below init_batch"),
    ('{"models": {"x": {"target_samples": 1, "init_batch": 1, "max_batch": 2, "grad_sqr": 1, '
     '"grad_var": 1, "step_time": {"h900": {"alpha_c": 1, "beta_c": 0, "max_local_bsz": 4}}}}}', "unknown GPU"),
])
def test_a_bad_profiles_file_is_one_input_error_naming_it(tmp_path, content, match):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(InputError, match=match) as err:
        load_profiles(str(path))
    assert str(path) in str(err.value)


def test_a_missing_profiles_file_stops_the_run_before_it_starts(tmp_path):
    from dlsched.sim.run import simulate

    config = RunConfig(cluster="sia-homo-64", trace="synthetic:rate=1,hours=0.1,seed=1",
                       world={"profiles": str(tmp_path / "missing.json")})
    with pytest.raises(InputError, match="cannot read"):
        simulate(config)


def _slowed(run: dict, by: float) -> dict:
    """The same run on a machine ``by`` times busier: every reported step time scaled."""
    obs = {j: [{**o, "step_time_s": o["step_time_s"] * by} for o in v] for j, v in run["throughput_obs"].items()}
    return {**run, "throughput_obs": obs}


def test_per_run_scope_simulates_each_policy_in_the_world_of_its_own_run():
    """Two runs made under different loads: pooled, both policies share one world; per run, each policy's
    world has its own run's step times (the busier run's twice as long), and the pooled one is in between."""
    real = {"fifo": _run(), "srtf": _slowed(_run(), 2.0)}
    per_run = fit_and_simulate({"jobs": JOBS}, real, ["fifo", "srtf"], 20.0, fit_scope="per-run")
    pooled = fit_and_simulate({"jobs": JOBS}, real, ["fifo", "srtf"], 20.0)
    assert pooled["fit_scope"] == "pooled" and pooled["profiles_per_run"] == {}

    def a100_step(profiles: dict) -> float:
        p = profiles["models"][model_name("a")]["step_time"]["a100"]
        return p["alpha_c"] + p["beta_c"] * 32

    own = per_run["profiles_per_run"]
    assert a100_step(own["srtf"]) == pytest.approx(2.0 * a100_step(own["fifo"]), rel=1e-3)
    assert a100_step(own["fifo"]) < a100_step(pooled["profiles"]) < a100_step(own["srtf"])
    with pytest.raises(InputError, match="fit scope"):
        fit_and_simulate({"jobs": JOBS}, real, ["fifo"], 20.0, fit_scope="everything")
