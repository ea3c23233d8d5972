"""Themis's auction and Shockwave's window plan on instances small enough to work out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.policies import build_scheduler
from dlsched.policies.markets import partial_allocation, plan_window, solve_auction
from dlsched.policies.markets.lease import job_estimates
from dlsched.policies.markets.shockwave import feasible_start, fill_rounds
from dlsched.policies.markets.shockwave_artifact import (
    momentum_average,
    plan_window_artifact,
    work_conserving_fill,
)
from testkit import small_cluster

FOUR = small_cluster((("t4", 1, 4),))  # one node of 4 GPUs


def job(job_id: str, gpus: int, *, age: float, estimate: float, served: float = 0.0, progress: float = 0.0,
        on: tuple[int, ...] = ()) -> JobView:
    spec = JobSpec(job_id=job_id, submit_time_s=0.0, model="resnet50", num_gpus=gpus, batch_size=128,
                   iterations=1000.0)
    placement = Placement.of(on)
    return JobView(spec=spec, status=JobStatus.RUNNING if on else JobStatus.QUEUED, placement=placement,
                   batch_size=128 if on else None, age_s=age, wait_s=0.0, attained_gpu_s=served * gpus,
                   attained_service_s=served, restarts=0, progress_fraction=progress,
                   start_time_s=0.0 if on else None, estimated_duration_s=estimate)


def view(jobs: list[JobView], time_s: float = 0.0) -> ClusterView:
    return ClusterView(time_s=time_s, round_s=360.0, cluster=FOUR, jobs=jobs)


def running(decision) -> set[str]:
    return {k for k, a in decision.allocations.items() if a.placement}


# -- Themis ----------------------------------------------------------------------------------------------
def test_auction_maximises_the_product_of_valuations():
    # A's gang fills the cluster (value 2); B and C fit together (1.5 * 1.5 = 2.25 > 2): B and C win.
    won, welfare = solve_auction(np.log([2.0, 1.5, 1.5]), np.array([4, 2, 2]), 4)
    assert won.tolist() == [False, True, True]
    assert welfare == pytest.approx(math.log(2.25))


def test_partial_allocation_is_the_welfare_others_lose_to_the_winner():
    # Two 2-GPU apps on 2 GPUs: A (value 3) wins; without A, B would win with value 2. A's share is
    # prod of others' values with A (1) over without A (2): c_A = 0.5.
    values, gpus = np.log([3.0, 2.0]), np.array([2, 2])
    won, _ = solve_auction(values, gpus, 2)
    assert won.tolist() == [True, False]
    assert partial_allocation(values, gpus, 2, won).tolist() == pytest.approx([0.5, 1.0])
    # Room for both: nobody loses anything to A, so A keeps all of its bundle.
    won, _ = solve_auction(values, gpus, 4)
    assert partial_allocation(values, gpus, 4, won).tolist() == pytest.approx([1.0, 1.0])


def test_themis_offers_to_the_worst_rho_apps_only():
    # Five one-GPU apps; f = 0.8 offers to ceil(0.2 * 5) = 1 app: the oldest (worst rho).
    jobs = [job(f"j{i}", 1, age=100.0 * (i + 1), estimate=3600.0) for i in range(5)]
    sched = build_scheduler("themis")
    decision = sched.schedule(view(jobs))
    assert sched.allocation.last_offered == ["j4"]
    # f = 0.2 offers to ceil(0.8 * 5) = 4 apps, worst rho first
    sched = build_scheduler("themis", settings={"fairness_knob": "0.2"})
    sched.schedule(view(jobs))
    assert sched.allocation.last_offered == ["j4", "j3", "j2", "j1"]
    assert len(running(decision)) == 4  # leftover GPUs are handed out: the cluster's 4 GPUs all run


def test_themis_two_jobs_the_bigger_saving_wins_and_keeps_its_gang():
    # Both apps offered (f = 0), a 4-GPU gang each on 4 GPUs. A: age 1 h, 6 min left, bids
    # (3960 + 360) / 3960 = 1.09; B: age 6 min, 6 min left, bids (720 + 360) / 720 = 1.5. B wins.
    a = job("A", 4, age=3600.0, estimate=360.0)
    b = job("B", 4, age=360.0, estimate=360.0)
    sched = build_scheduler("themis", settings={"fairness_knob": "0"})
    assert running(sched.schedule(view([a, b]))) == {"B"}
    # B's share: A's welfare with B (1) over without B (1.09) = 3960 / 4320 = 0.917 of 4 GPUs = 3.67,
    # which rounds to the whole gang
    assert sched.allocation.last_shares["B"] == pytest.approx(3960.0 / 4320.0)


def test_themis_withheld_gang_goes_to_the_leftover():
    # A: 6 min of work, just arrived, bids 720 / 360 = 2; B: 12 min, bids 1080 / 720 = 1.5. A wins, but its
    # share is 1 / 1.5 = 2/3 of 4 GPUs = 2.67 GPUs, not its gang: the GPUs are left over and B gets them.
    a = job("A", 4, age=0.0, estimate=360.0)
    b = job("B", 4, age=0.0, estimate=720.0)
    sched = build_scheduler("themis", settings={"fairness_knob": "0"})
    decision = sched.schedule(view([a, b]))
    assert sched.allocation.last_shares["A"] == pytest.approx(2.0 / 3.0)
    assert running(decision) == {"B"}
    # without the hidden payment the winner runs
    sched = build_scheduler("themis", settings={"fairness_knob": "0", "partial_allocation": "off"})
    assert running(sched.schedule(view([a, b]))) == {"A"}


# -- Shockwave -------------------------------------------------------------------------------------------
def test_shockwave_plan_prefers_the_job_whose_rho_is_at_risk():
    # two 2-GPU jobs on 2 GPUs, equal work; X has waited long (rho > 1), Y just arrived
    x = job("X", 2, age=10000.0, estimate=3600.0)
    y = job("Y", 2, age=0.0, estimate=3600.0)
    est = job_estimates([x, y], 2)
    plan = plan_window(est, 2, round_s=360.0, window_rounds=1, ftf_weight=10.0, makespan_weight=0.1,
                       rho_max=1.0, log_bases=(0.01, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert plan.run[:, 0].tolist() == [True, False]
    # without the fairness regulariser neither job gains more log-progress: no preference for X is forced,
    # but the plan still fits the cluster
    plan = plan_window(est, 2, round_s=360.0, window_rounds=1, ftf_weight=0.0, makespan_weight=0.1,
                       rho_max=1.0, log_bases=(0.01, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert int(plan.run[:, 0].sum()) == 1


def test_shockwave_log_welfare_prefers_the_job_with_less_progress():
    # same gang, same work per round; A is 80% done, B 10%: log(P) gains more for B
    a = job("A", 4, age=100.0, estimate=4000.0, served=3200.0, progress=0.8)
    b = job("B", 4, age=100.0, estimate=4000.0, served=400.0, progress=0.1)
    est = job_estimates([a, b], 4)
    plan = plan_window(est, 4, round_s=360.0, window_rounds=1, ftf_weight=0.0, makespan_weight=0.0,
                       rho_max=1.0, log_bases=(0.01, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert plan.run[:, 0].tolist() == [False, True]


def test_shockwave_plan_respects_capacity_every_round_and_stops_at_the_job_end():
    rng = np.random.default_rng(3)
    jobs = [job(f"j{i}", int(rng.choice([1, 2, 4])), age=float(rng.uniform(0, 5000)),
                estimate=float(rng.uniform(300, 5000))) for i in range(8)]
    est = job_estimates(jobs, 4)
    plan = plan_window(est, 4, round_s=360.0, window_rounds=6, ftf_weight=10.0, makespan_weight=0.1,
                       rho_max=1.0, log_bases=(0.01, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert plan.run.shape == (8, 6)
    assert (est.gpus @ plan.run <= 4).all()
    needed = np.ceil(est.remaining_s / 360.0)
    assert (plan.run.sum(axis=1) <= needed).all()
    assert plan.run.any()  # work to do and GPUs free: something runs


def test_feasible_start_drops_what_breaks_the_plan_and_orders_rounds_busiest_first():
    gpus = np.array([2.0, 2.0, 4.0])
    run = np.array([[True, True, True],     # needs only 2 rounds: its last one goes
                    [False, True, True],
                    [True, False, False]])  # round 0: 2 + 4 GPUs on 4: the 4-GPU job is dropped there
    fixed = feasible_start(run, gpus, 4, np.array([2.0, 5.0, 5.0]))
    assert (gpus @ fixed <= 4).all()
    assert fixed.sum(axis=1).tolist() == [2, 2, 0]
    load = gpus @ fixed
    assert (np.diff(load) <= 0).all()


def _random_small_jobs(n: int, sizes: tuple[int, ...] = (1, 2), seed: int = 0) -> list:
    """``n`` jobs of ``sizes`` GPUs with random ages and run-time estimates (seeded)."""
    rng = np.random.default_rng(seed)
    return [job(f"j{i}", int(rng.choice(list(sizes))), age=float(rng.uniform(0, 5000)),
                estimate=float(rng.uniform(300, 5000))) for i in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_shockwave_warm_start_is_never_worse_than_the_plan_it_starts_from(seed):
    jobs = _random_small_jobs(10, (1, 2, 4), seed)
    est = job_estimates(jobs, 4)
    kw = dict(round_s=360.0, window_rounds=6, ftf_weight=10.0, makespan_weight=0.1, rho_max=1.0,
              log_bases=(0.01, 0.2, 0.4, 0.6, 0.8, 1.0))
    cold = plan_window(est, 4, **kw)
    # a poor start (every job's first fitting rounds, greedily) must be improved on, and the optimum kept
    greedy = np.zeros((10, 6), dtype=bool)
    left = np.full(6, 4.0)
    for j in range(10):
        for r in range(6):
            if est.gpus[j] <= left[r] and greedy[j].sum() < np.ceil(est.remaining_s[j] / 360.0):
                greedy[j, r], left[r] = True, left[r] - est.gpus[j]
    warm = plan_window(est, 4, start_run=greedy, **kw)
    assert (est.gpus @ warm.run <= 4).all()
    assert warm.objective >= cold.objective - 1e-3 * abs(cold.objective) - 1e-9
    restart = plan_window(est, 4, start_run=cold.run, **kw)
    assert restart.objective >= cold.objective - 1e-9


def test_shockwave_re_plan_cut_short_by_its_time_limit_keeps_the_plan_it_started_from():
    jobs = _random_small_jobs(30, (1, 2, 4))
    est = job_estimates(jobs, 4)
    kw = dict(round_s=360.0, window_rounds=10, ftf_weight=10.0, makespan_weight=0.1, rho_max=1.0,
              log_bases=(0.01, 0.2, 0.4, 0.6, 0.8, 1.0))
    best = plan_window(est, 4, **kw)
    cut = plan_window(est, 4, time_limit_s=1e-4, **kw)
    assert not cut.run.any()  # from scratch, no plan is found in time: nobody would run
    warm = plan_window(est, 4, time_limit_s=1e-4, start_run=best.run, **kw)
    # the start is the best plan, with any slot it left free filled: never worse
    assert warm.run.sum() >= best.run.sum() and warm.objective >= best.objective - 1e-9


def test_a_re_plan_cut_short_runs_the_newcomers_on_the_gpus_the_old_plan_leaves_free():
    # The previous plan ran a (2 GPUs) in every round of a 4-GPU cluster; b and c arrived since. A re-plan
    # cut short by its time limit keeps its start: that start must give b and c the free GPUs, not leave
    # them idle until the next re-plan.
    jobs = [job("a", 2, age=3600.0, estimate=7200.0, served=1800.0, progress=0.25),
            job("b", 2, age=0.0, estimate=1800.0), job("c", 2, age=0.0, estimate=3600.0)]
    est = job_estimates(jobs, 4)
    old = np.array([[True] * 4, [False] * 4, [False] * 4])
    cut = plan_window(est, 4, round_s=360.0, window_rounds=4, ftf_weight=10.0, makespan_weight=0.1,
                      rho_max=1.0, log_bases=(0.01, 0.2, 0.4, 0.6, 0.8, 1.0), time_limit_s=1e-4, start_run=old)
    assert cut.run[:, 0].tolist() == [True, True, False] or cut.run[:, 0].tolist() == [True, False, True]
    assert (est.gpus @ cut.run == 4).all()  # no GPU idle while a job could use it




def test_the_first_plan_cut_short_still_fills_the_cluster():
    # 60 small jobs, a 20-round window and a 0.1 s limit: the solve stops early. It starts from a filled
    # plan, so the first round uses every GPU (from nothing, it used 2 of the 4).
    jobs = _random_small_jobs(60)
    sched = build_scheduler("shockwave", settings={"window_rounds": "20", "time_limit_s": "0.1"})
    decision = sched.schedule(view(jobs, 0.0))
    assert sum(len(a.placement) for a in decision.allocations.values()) == 4


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fill_rounds_keeps_the_plan_feasible_and_leaves_no_slot_a_waiting_job_fits(data):
    n = data.draw(st.integers(1, 7))
    R = data.draw(st.integers(1, 6))
    cap = data.draw(st.integers(1, 8))
    gpus = np.array(data.draw(st.lists(st.integers(1, 8), min_size=n, max_size=n)), dtype=float)
    needed = np.array(data.draw(st.lists(st.integers(0, R + 1), min_size=n, max_size=n)), dtype=float)
    raw = np.array(data.draw(st.lists(st.booleans(), min_size=n * R, max_size=n * R))).reshape(n, R)
    start = feasible_start(raw, gpus, cap, needed)
    prio = np.array(data.draw(st.lists(st.floats(0, 10), min_size=n, max_size=n)))
    filled = fill_rounds(start, gpus, cap, needed, prio)
    load = gpus @ filled
    assert (load <= cap + 1e-9).all()
    assert (filled.sum(axis=1) <= needed).all()
    assert (np.diff(load) <= 1e-9).all()  # busiest first
    assert (filled.sum(axis=1) >= start.sum(axis=1)).all()  # nobody loses a round
    for j in range(n):  # maximal: a job short of rounds fits in none of the rounds it does not run in
        if filled[j].sum() < needed[j]:
            assert all(gpus[j] > cap - load[r] + 1e-9 for r in range(R) if not filled[j, r])


def test_shockwave_solves_stop_at_its_node_limit():
    jobs = _random_small_jobs(30)
    sched = build_scheduler("shockwave", settings={"window_rounds": "10", "node_limit": "3"})
    decision = sched.schedule(view(jobs, 0.0))
    assert 0 <= decision.info["shockwave.nodes"] <= 3
    assert running(decision)  # the filled start plan runs jobs even if the search stops at once


def test_shockwave_keeps_its_plan_while_the_jobs_are_unchanged():
    jobs = [job("a", 4, age=0.0, estimate=3600.0), job("b", 4, age=0.0, estimate=3600.0)]
    sched = build_scheduler("shockwave", settings={"window_rounds": "4"})
    first = running(sched.schedule(view(jobs, 0.0)))
    sched.schedule(view(jobs, 360.0))
    assert len(sched.allocation.solve_s) == 1  # one solve for both rounds
    assert len(first) == 1
    sched.schedule(view(jobs[:1], 720.0))  # b left: re-plan
    assert len(sched.allocation.solve_s) == 2


@pytest.mark.parametrize("policy, settings, field", [
    ("shockwave", {"log_bases": "0,0.5"}, "log_bases"),
    ("shockwave", {"window_rounds": "0"}, "window_rounds"),
    ("themis", {"fairness_knob": "1"}, "fairness_knob"),
])
def test_bad_tunables_are_refused_naming_the_field(policy, settings, field):
    with pytest.raises(InputError) as exc:
        build_scheduler(policy, settings=settings)
    assert field in str(exc.value)


@pytest.mark.parametrize("policy", ["themis", "shockwave"])
def test_incompatible_stages_are_refused(policy):
    with pytest.raises(InputError, match="las"):
        build_scheduler(policy, ordering="las")  # they rank jobs themselves
    with pytest.raises(InputError, match="GPU type"):
        build_scheduler(policy, placement="sia")  # they leave the GPU type to placement


def test_presets_list_their_round_and_tunables_with_ranges():
    from dlsched.policies import describe_scheduler

    themis, shockwave = describe_scheduler("themis"), describe_scheduler("shockwave")
    assert themis["round_s"] == shockwave["round_s"] == 360.0  # the thesis's round for both
    assert themis["stages"]["allocation"]["ranges"]["fairness_knob"] == "[0, 1)"
    assert themis["tunables"]["allocation.fairness_knob"] == 0.8
    assert shockwave["tunables"]["allocation.window_rounds"] == 20
    assert shockwave["stages"]["allocation"]["ranges"]["window_rounds"] == "[1, 500]"


# -- Shockwave, the Sia artifact's port (variant=sia-artifact) ------------------------------------------
ARTIFACT = dict(round_s=360.0, rho_max=1.0, log_bases=(0.2, 0.4, 0.6, 0.8, 1.0), log_origin=1e-6,
                makespan_k=1e-9, priority_power=12.0, finish_power=100.0)


def test_fair_finish_time_is_the_time_weighted_average_moved_towards_the_newest_value():
    assert momentum_average([(0.0, 100.0)], 0.0) == pytest.approx(100.0)
    # 100 stood 600 s, 200 stood 600 s: average 150, then 10% of the way to 200
    assert momentum_average([(0.0, 100.0), (600.0, 200.0)], 1200.0) == pytest.approx(155.0)
    # the newest value, recorded now, has stood for no time: it counts only through the momentum
    assert momentum_average([(0.0, 100.0), (600.0, 200.0)], 600.0) == pytest.approx(0.9 * 100.0 + 0.1 * 200.0)


def test_artifact_fairness_is_a_hard_constraint():
    # Two 4-GPU jobs on 4 GPUs, two rounds. B has no progress, so log welfare wants B in both rounds; A's fair
    # finish time (3650 s) is met only if A runs in both (720 + 7200 * (1 - 0.6) = 3600 s, one round 3960 s).
    a = job("A", 4, age=0.0, estimate=7200.0, served=3600.0, progress=0.5)
    b = job("B", 4, age=0.0, estimate=3600.0)
    est = job_estimates([a, b], 4)
    plan = plan_window_artifact(est, 4, np.array([3650.0, 1e9]), window_rounds=2, **ARTIFACT)
    assert not plan.relaxed
    assert plan.run.tolist() == [[True, True], [False, False]]
    loose = plan_window_artifact(est, 4, np.array([1e9, 1e9]), window_rounds=2, **ARTIFACT)
    assert not loose.relaxed
    assert loose.run.tolist() == [[False, False], [True, True]]


def test_artifact_infeasible_fairness_falls_back_to_priorities_and_ranks_a_finishing_job_first():
    # Neither job can meet its fair finish time: X (rho 1.1) can finish within a round, so its priority is
    # 1.1^100 = 1.4e4; Y (rho 1.5) gets 1.5^12 = 130. Ranked, X runs first. With the exponent 12 for X as well
    # (1.1^12 = 3.1), moving Y's four rounds later costs more than X waiting: Y runs first.
    x = job("X", 4, age=800.0, estimate=300.0)
    y = job("Y", 4, age=1800.0, estimate=3600.0)
    est = job_estimates([x, y], 4)
    fair = np.array([1000.0, 3600.0])
    plan = plan_window_artifact(est, 4, fair, window_rounds=5, **ARTIFACT)
    assert plan.relaxed
    assert plan.priority == pytest.approx([1.1 ** 100, 1.5 ** 12], rel=1e-6)
    assert plan.run.sum(axis=1).tolist() == [1, 4]
    assert plan.run[:, 0].tolist() == [True, False]
    flat = plan_window_artifact(est, 4, fair, window_rounds=5, **{**ARTIFACT, "finish_power": 12.0})
    assert flat.run[:, 0].tolist() == [False, True]


def test_artifact_makespan_term_is_k_times_the_largest_remaining_time():
    # One 4-GPU round for one of two new jobs: B (1 h) gains ten times A's (10 h) progress, so welfare runs B;
    # only running A lowers the largest remaining time after the window, which a large k rewards.
    a = job("A", 4, age=0.0, estimate=36000.0)
    b = job("B", 4, age=0.0, estimate=3600.0)
    est = job_estimates([a, b], 4)
    fair = np.array([1e9, 1e9])
    assert plan_window_artifact(est, 4, fair, window_rounds=1, **ARTIFACT).run[:, 0].tolist() == [False, True]
    heavy = plan_window_artifact(est, 4, fair, window_rounds=1, **{**ARTIFACT, "makespan_k": 1.0})
    assert heavy.run[:, 0].tolist() == [True, False]


def test_work_conserving_fill_gives_idle_gpus_to_the_longest_remaining_job_that_fits():
    gpus = np.array([2.0, 1.0, 1.0, 4.0])
    remaining = np.array([100.0, 500.0, 900.0, 5000.0])
    # job 0 planned on 4 GPUs: 2 idle. Job 3 (longest) does not fit; job 2 (900 s) then job 1 (500 s) do.
    filled = work_conserving_fill(np.array([True, False, False, False]), gpus, 4, remaining)
    assert filled.tolist() == [True, True, True, False]
    # one idle GPU: only the longer of the two 1-GPU jobs gets it
    filled = work_conserving_fill(np.array([True, False, False, False]), gpus, 3, remaining)
    assert filled.tolist() == [True, False, True, False]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_work_conserving_fill_keeps_the_plan_fits_and_leaves_no_gpu_a_waiting_job_could_use(data):
    n = data.draw(st.integers(1, 8))
    cap = data.draw(st.integers(1, 8))
    gpus = np.array(data.draw(st.lists(st.integers(1, 8), min_size=n, max_size=n)), dtype=float)
    remaining = np.array(data.draw(st.lists(st.floats(1.0, 1e5), min_size=n, max_size=n)))
    planned = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    planned &= np.cumsum(np.where(planned, gpus, 0.0)) <= cap  # a plan that fits
    filled = work_conserving_fill(planned, gpus, cap, remaining)
    left = cap - gpus[filled].sum()
    assert left >= -1e-9
    assert (filled >= planned).all()
    assert all(gpus[j] > left for j in range(n) if not filled[j])
    added = filled & ~planned
    # a job left out never has a longer remaining time than a job added, unless it did not fit when its turn came
    for j in np.flatnonzero(~filled):
        for k in np.flatnonzero(added):
            assert remaining[j] <= remaining[k] or gpus[j] > gpus[k]


def test_artifact_variant_re_solves_every_round_and_fills_the_cluster():
    jobs = _random_small_jobs(8, (1, 2, 4), seed=5)
    sched = build_scheduler("shockwave", settings={"variant": "sia-artifact", "window_rounds": "5"})
    for t in range(3):
        decision = sched.schedule(view(jobs, 360.0 * t))
        used = sum(len(a.placement) for a in decision.allocations.values())
        waiting = [j for j in jobs if j.job_id not in running(decision)]
        assert used == 4 or all(j.spec.num_gpus > 4 - used for j in waiting)
    assert len(sched.allocation.solve_s) == 3  # unchanged jobs, yet a solve every round
    assert "variant=sia-artifact" in sched.allocation.describe()
    with pytest.raises(InputError, match="variant"):
        build_scheduler("shockwave", settings={"variant": "gurobi"})
