"""Metrics on hand-made records: every expected number below is worked out by hand in the comments."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dlsched.sim.metrics import (
    JOB_COLUMNS,
    ROUND_COLUMNS,
    SUMMARY_KEYS,
    ContentionProfile,
    FtfDefinition,
    average_contention,
    average_summaries,
    fair_share_gpus,
    finish_time_fairness,
    isolated_start_s,
    jobs_frame,
    rounds_frame,
    summarize,
    time_sliced_runtime_s,
)
from dlsched.sim.records import JobRecord, RoundRecord


def job(job_id: str, submit: float, start: float | None, finish: float | None, *, gpu_s: float,
        restarts: int = 0, ftf: float | None = None, lr: float | None = None,
        deadline: float | None = None, by_type: dict[str, float] | None = None) -> JobRecord:
    return JobRecord(
        job_id=job_id, model="resnet", user="u", adaptivity="rigid", requested_gpus=2, submit_s=submit,
        start_s=start, finish_s=finish, wait_s=(start if start is not None else 1000.0) - submit, gpu_s=gpu_s,
        restarts=restarts, restart_gpu_s=10.0 * restarts, deadline_s=deadline, ideal_runtime_s=100.0,
        ftf=ftf, latency_ratio=lr, gpu_s_by_type=by_type or {},
    )


def rnd(i: int, t: float, alloc: int, active: int, fragments: int, policy: float,
        by_type: dict[str, int] | None = None) -> RoundRecord:
    return RoundRecord(round=i, time_s=t, allocated_gpus=alloc, idle_gpus=4 - alloc, fragments=fragments,
                       queue_len=max(active - 1, 0), running_jobs=1, active_jobs=active, policy_s=policy,
                       restarts=0, gpus_by_type=by_type or {})


# A: jct 110, wait 10;  B: jct 200, wait 0;  C: jct 350, wait 50.  GPU-seconds 400 + 200 + 600 = 1200.
JOBS = [
    job("A", 0.0, 10.0, 110.0, gpu_s=400.0, restarts=1, ftf=0.8, lr=1.1, by_type={"a100": 400.0}),
    job("B", 20.0, 20.0, 220.0, gpu_s=200.0, restarts=0, ftf=1.5, lr=2.0, by_type={"t4": 200.0}),
    job("C", 50.0, 100.0, 400.0, gpu_s=600.0, restarts=2, ftf=1.0, lr=1.0,
        by_type={"a100": 100.0, "t4": 500.0}),
]
ROUNDS = [
    rnd(0, 0.0, 4, 1, 0, 0.1, {"a100": 4}),
    rnd(1, 100.0, 4, 3, 2, 0.2, {"a100": 2, "t4": 2}),
    rnd(2, 200.0, 2, 2, 1, 0.3, {"t4": 2}),
    rnd(3, 300.0, 1, 1, 1, 0.4, {"t4": 1}),
]


def test_summary_keys_order_and_hand_computed_values() -> None:
    s = summarize(JOBS, ROUNDS, num_gpus=4, sim_wall_s=1.5)
    assert tuple(s) == SUMMARY_KEYS
    assert s["jobs"] == 3 and s["completed"] == 3
    assert s["avg_jct_s"] == pytest.approx(220.0)            # (110 + 200 + 350) / 3
    assert s["p50_jct_s"] == pytest.approx(200.0)
    assert s["p99_jct_s"] == pytest.approx(347.0)            # 200 + 0.98 * (350 - 200)
    assert s["makespan_s"] == pytest.approx(400.0)           # last finish 400 - first submit 0
    assert s["avg_wait_s"] == pytest.approx(20.0)            # (10 + 0 + 50) / 3
    assert s["gpu_hours_per_job"] == pytest.approx(1200 / 3600 / 3)
    assert s["utilization"] == pytest.approx(0.75)           # 1200 / (4 GPUs * 400 s)
    assert s["restarts_per_job"] == pytest.approx(1.0)
    assert s["ftf_max"] == pytest.approx(1.5)
    assert s["ftf_unfair_frac"] == pytest.approx(1 / 3)      # only B; rho == 1 is fair
    assert s["latency_ratio_max"] == pytest.approx(2.0)
    assert s["latency_ratio_avg"] == pytest.approx(4.1 / 3)
    assert s["latency_ratio_best_max"] is None               # no job carries the best-type reading
    assert s["fragments_per_round"] == pytest.approx(1.0)    # (0 + 2 + 1 + 1) / 4
    assert s["deadline_met_frac"] is None                    # no deadlines: null, not 1.0
    assert s["policy_time_median_s"] == pytest.approx(0.25)
    assert s["policy_time_p99_s"] == pytest.approx(0.397)    # 0.3 + 0.97 * 0.1
    assert s["sim_wall_s"] == 1.5


def test_summary_is_plain_json() -> None:
    s = summarize(JOBS, ROUNDS, num_gpus=4, sim_wall_s=np.float64(2.0))
    for k, v in s.items():
        assert v is None or type(v) in (int, float), (k, type(v))
    assert json.loads(json.dumps(s)) == s


def test_deadline_fraction_with_deadlines() -> None:
    jobs = [
        job("A", 0.0, 10.0, 110.0, gpu_s=1.0, deadline=110.0),   # met exactly at the deadline
        job("B", 20.0, 20.0, 220.0, gpu_s=1.0, deadline=200.0),  # missed
        job("C", 50.0, 100.0, 400.0, gpu_s=1.0),                 # no deadline: not counted
        job("D", 60.0, None, None, gpu_s=0.0, deadline=1e9),    # never finished: missed
    ]
    assert summarize(jobs, ROUNDS, num_gpus=4, sim_wall_s=0.0)["deadline_met_frac"] == pytest.approx(1 / 3)


def test_partial_run_uses_rounds_for_utilization() -> None:
    jobs = [*JOBS, job("D", 60.0, 300.0, None, gpu_s=5000.0, ftf=9.0)]
    s = summarize(jobs, ROUNDS, num_gpus=4, sim_wall_s=0.0)
    assert s["jobs"] == 4 and s["completed"] == 3
    assert s["makespan_s"] == pytest.approx(400.0)
    # Rounds at 0/100/200/300 hold 4/4/2/1 GPUs for 100 s each (last one: median gap) -> 1100 GPU-s.
    assert s["utilization"] == pytest.approx(1100 / 1600)
    assert s["ftf_max"] == pytest.approx(1.5)                # unfinished D's ftf is ignored
    assert s["avg_wait_s"] == pytest.approx((10 + 0 + 50 + 240) / 4)


def test_no_completed_jobs_gives_nulls() -> None:
    s = summarize([job("D", 0.0, None, None, gpu_s=0.0)], [], num_gpus=4, sim_wall_s=0.0)
    for k in ("avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "utilization", "ftf_max",
              "ftf_unfair_frac", "fragments_per_round", "policy_time_median_s", "policy_time_p99_s"):
        assert s[k] is None, k
    assert s["completed"] == 0 and s["jobs"] == 1
    empty = summarize([], [], num_gpus=4, sim_wall_s=0.0)
    assert tuple(empty) == SUMMARY_KEYS and empty["jobs"] == 0


def test_ftf_single_type_is_shared_over_isolated() -> None:
    assert finish_time_fairness(300.0, {"a100": 200.0}, {"a100": 8}) == pytest.approx(1.5)


def test_ftf_is_gpu_weighted_mean_across_types() -> None:
    # weights 4/16 and 12/16; ratios 300/100 = 3 and 300/400 = 0.75
    rho = finish_time_fairness(300.0, {"a100": 100.0, "t4": 400.0}, {"a100": 4, "t4": 12})
    assert rho == pytest.approx(0.25 * 3 + 0.75 * 0.75)


def test_ftf_drops_infeasible_types_and_renormalises() -> None:
    assert finish_time_fairness(300.0, {"a100": 100.0, "t4": math.inf}, {"a100": 4, "t4": 12}) == \
        pytest.approx(3.0)


def test_ftf_is_none_when_no_type_could_run_the_job() -> None:
    # a job whose fair share is below its scale-out unit everywhere has no isolated time: rho is undefined
    assert finish_time_fairness(300.0, {"t4": math.inf}, {"t4": 12}) is None
    assert finish_time_fairness(300.0, {"a100": 100.0}, {"t4": 12}) is None
    with pytest.raises(ValueError):
        finish_time_fairness(-1.0, {"a100": 100.0}, {"a100": 4})


def test_ftf_time_combination_divides_by_the_weighted_mean_isolated_time() -> None:
    # the artifact's reading: weights 1/4 and 3/4, mean isolated time 0.25 * 100 + 0.75 * 400 = 325 s
    rho = finish_time_fairness(300.0, {"a100": 100.0, "t4": 400.0}, {"a100": 4, "t4": 12}, combine="time")
    assert rho == pytest.approx(300.0 / 325.0)
    # an expectation of ratios is never below the ratio of expectations (Jensen): 1.3125 > 0.923
    text = finish_time_fairness(300.0, {"a100": 100.0, "t4": 400.0}, {"a100": 4, "t4": 12})
    assert text == pytest.approx(1.3125) and text > 300.0 / 325.0
    with pytest.raises(ValueError, match="combination"):
        finish_time_fairness(300.0, {"a100": 100.0}, {"a100": 4}, combine="median")  # type: ignore[arg-type]


def test_fair_share_is_per_type_by_default_and_the_whole_cluster_capped_per_type_as_an_option() -> None:
    gpus = {"a100": 16, "t4": 48}
    assert fair_share_gpus(gpus, 4.0) == pytest.approx({"a100": 4.0, "t4": 12.0})
    # 64 / 4 = 16 GPUs of every type; 64 / 2 = 32 exceeds the 16 A100s, so A100 is capped at 16
    assert fair_share_gpus(gpus, 4.0, "cluster") == pytest.approx({"a100": 16.0, "t4": 16.0})
    assert fair_share_gpus(gpus, 2.0, "cluster") == pytest.approx({"a100": 16.0, "t4": 32.0})
    with pytest.raises(ValueError, match="at least 1"):
        fair_share_gpus(gpus, 0.5)


def test_fractional_share_time_slices_one_more_gpu_instead_of_rounding_down() -> None:
    times = {1: 100.0, 2: 60.0, 3: 50.0}
    at = times.__getitem__
    assert time_sliced_runtime_s(at, 0.5) == pytest.approx(200.0)     # half of one GPU
    assert time_sliced_runtime_s(at, 1.0) == pytest.approx(100.0)
    assert time_sliced_runtime_s(at, 2.0) == pytest.approx(60.0)
    # 1.5 GPUs: rate 0.5 / 100 + 0.5 / 60 = 1 / 75; rounding down would have said 100 s
    assert time_sliced_runtime_s(at, 1.5) == pytest.approx(75.0)
    # 1.9 GPUs: rate 0.1 / 100 + 0.9 / 60 = 0.016 -> 62.5 s, faster than 0.99 GPUs (101.01 s)
    assert time_sliced_runtime_s(at, 1.9) == pytest.approx(62.5)
    assert time_sliced_runtime_s(at, 0.99) == pytest.approx(100.0 / 0.99)
    # a job that cannot run on 2 GPUs (its gang is 1 or 3) gets only the whole GPU's rate for 1.5 GPUs
    assert time_sliced_runtime_s({1: 100.0, 2: math.inf}.__getitem__, 1.5) == pytest.approx(200.0)
    assert time_sliced_runtime_s(at, 0.0) == math.inf


def test_isolated_start_waits_for_the_round_profiles_and_pays_one_restart() -> None:
    # submitted at 3488 s, 60 s rounds: first round 3540, profiling 84 s ends 3624, next round 3660, restore 50 s
    assert isolated_start_s(3488.0, 60.0, profile_s=84.0, restart_delay_s=50.0) == pytest.approx(3660 - 3488 + 50)
    assert isolated_start_s(3488.0, 60.0, restart_delay_s=50.0) == pytest.approx(3540 - 3488 + 50)
    assert isolated_start_s(120.0, 60.0) == 0.0                       # on a round boundary, nothing to pay
    with pytest.raises(ValueError):
        isolated_start_s(0.0, 0.0)


def test_ftf_definition_rejects_unknown_readings() -> None:
    assert FtfDefinition() == FtfDefinition(share="type", combine="ratio", isolated="ideal")
    with pytest.raises(ValueError, match="ftf.share"):
        FtfDefinition(share="node")  # type: ignore[arg-type]


def test_engine_reports_the_chosen_ftf_reading() -> None:
    from dlsched.policies import build_scheduler
    from dlsched.sim.engine import Engine, SimConfig
    from dlsched.world.base import World
    from testkit import duration_job, small_cluster

    cluster = small_cluster((("v100", 1, 4),))

    def rho(**ftf: str) -> float | None:
        world = World(cluster, seed=0)
        res = Engine(cluster, [duration_job("a", 30.0, 1, 100.0, model="philly")], build_scheduler("fifo"), world,
                     SimConfig(round_s=60.0, ftf=FtfDefinition(**ftf))).run()  # type: ignore[arg-type]
        (rec,) = res.jobs
        assert rec.jct_s == pytest.approx(130.0)                      # waits 30 s for the round, runs 100 s
        return rec.ftf

    # alone (N_avg = 1) its fair share is the whole node; a rigid 1-GPU job runs 100 s there
    assert rho() == pytest.approx(1.3)
    # started: the isolated run also waits 30 s for the first round (no profiling, no restore delay here)
    assert rho(isolated="started") == pytest.approx(1.0)


def test_average_contention_is_time_weighted() -> None:
    # [50, 250]: 50 s at 1, 100 s at 3, 50 s at 2 -> 450 / 200
    assert average_contention(ROUNDS, 50.0, 250.0) == pytest.approx(2.25)
    assert average_contention(ROUNDS, 0.0, 400.0) == pytest.approx((100 + 300 + 200 + 100) / 400)
    assert average_contention(ROUNDS, 150.0, 150.0) == pytest.approx(3.0)   # empty interval: value there
    profile = ContentionProfile.from_rounds(ROUNDS)
    vec = profile.average(np.array([50.0, 0.0]), np.array([250.0, 400.0]))
    assert np.allclose(vec, [2.25, 1.75])


def test_average_contention_is_at_least_one() -> None:
    idle = [rnd(0, 0.0, 0, 0, 0, 0.0), rnd(1, 10.0, 0, 0, 0, 0.0)]
    assert average_contention(idle, 0.0, 20.0) == 1.0
    assert average_contention([], 0.0, 20.0) == 1.0


def test_frames_have_expected_columns() -> None:
    jf = jobs_frame(JOBS)
    assert list(jf.columns) == [*JOB_COLUMNS, "gpu_s_a100", "gpu_s_t4"]
    assert jf.loc[jf.job_id == "B", "gpu_s_a100"].item() == 0.0
    assert jf["jct_s"].tolist() == [110.0, 200.0, 350.0]
    rf = rounds_frame(ROUNDS)
    assert list(rf.columns) == [*ROUND_COLUMNS, "gpus_a100", "gpus_t4"]
    assert rf["gpus_t4"].tolist() == [0, 2, 2, 1]
    assert list(jobs_frame([]).columns) == list(JOB_COLUMNS)
    assert len(rounds_frame([])) == 0


def test_average_summaries() -> None:
    a = {"policy": "sia", "jobs": 10, "avg_jct_s": 100.0, "deadline_met_frac": None, "ftf_max": None}
    b = {"policy": "sia", "jobs": 20, "avg_jct_s": 300.0, "deadline_met_frac": None, "ftf_max": 2.0}
    out = average_summaries([a, b])
    assert out == {"policy": "sia", "jobs": 15.0, "avg_jct_s": 200.0, "deadline_met_frac": None,
                   "ftf_max": 2.0}
    assert average_summaries([]) == {}


def test_one_run_reports_every_reading_of_ftf_and_the_chosen_one_is_its_ftf():
    """A run's jobs carry rho under every reading of eq. 3.6, so comparing readings needs no second run; the
    reading a run is configured with is the one in ``ftf`` and in the summary, and the experiments' per-reading
    figures agree with a run configured with that reading."""
    from dlsched.sim.config import RunConfig
    from dlsched.sim.metrics import FTF_READINGS, ftf_readings
    from dlsched.sim.run import simulate

    base = dict(trace="synthetic:rate=20,hours=1", policy="sia", cluster="sia-hetero-64", jobs=12, seed=1)
    text = simulate(RunConfig(**base))
    started = simulate(RunConfig(**base, ftf={"isolated": "started", "share": "cluster"}))
    labels = {r.label for r in FTF_READINGS}
    assert len(labels) == 8
    done = [j for j in text.jobs if j.finish_s is not None]
    assert done and all(set(j.ftf_by_reading) == labels for j in done)
    assert all(j.ftf == j.ftf_by_reading["type/ratio/ideal"] for j in done)
    # charging the isolated run its start-up can only make it longer, so rho can only fall
    assert all(j.ftf_by_reading["type/ratio/started"] <= j.ftf_by_reading["type/ratio/ideal"] + 1e-12
               for j in done if j.ftf_by_reading["type/ratio/ideal"] is not None)
    figures = ftf_readings(text.jobs)
    assert figures["type/ratio/ideal"]["ftf_max"] == pytest.approx(text.summary["ftf_max"])
    assert figures["cluster/ratio/started"]["ftf_max"] == pytest.approx(started.summary["ftf_max"])
    assert figures["cluster/ratio/started"]["ftf_unfair_frac"] == pytest.approx(started.summary["ftf_unfair_frac"])


def test_raqlr_is_the_mean_latency_ratio_of_jobs_finished_in_the_last_hour():
    from dlsched.sim.metrics import raqlr_series

    def rec(i, finish, lr):
        return JobRecord(job_id=f"j{i}", model="m", user="u", adaptivity="rigid", requested_gpus=1, submit_s=0.0,
                         start_s=0.0, finish_s=finish, wait_s=0.0, gpu_s=1.0, restarts=0, restart_gpu_s=0.0,
                         deadline_s=None, ideal_runtime_s=1.0, latency_ratio=lr)

    jobs = [rec(0, 100.0, 1.0), rec(1, 200.0, 0.0), rec(2, 4000.0, 0.5), rec(3, 8000.0, 0.1), rec(4, None, 9.0)]
    # at 4000 s both earlier jobs finished more than an hour before; the unfinished job never counts
    assert raqlr_series(jobs, 3600.0) == pytest.approx([1.0, 0.5, 0.5, 0.1])
    assert raqlr_series(jobs, 10000.0) == pytest.approx([1.0, 0.5, 0.5, 0.4])
