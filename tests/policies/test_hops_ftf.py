"""Hops's alternative priority (section 4.4): projected finish-time fairness, rho = T_sh / T_id."""

from __future__ import annotations

import json

import pytest
from test_hops import TableEstimator, job, planner
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.core import ClusterView, Placement
from dlsched.policies import build_scheduler
from dlsched.policies.hops.ordering import FinishTimeFairness, LatencyRatio, projected_ftf
from testkit import small_cluster


def _view(jobs, t=0.0, cluster=None) -> ClusterView:
    return ClusterView(time_s=t, round_s=60.0, cluster=cluster or small_cluster(), jobs=list(jobs))


def test_rho_is_time_in_the_cluster_over_time_alone_on_its_share():
    """16 GPUs, two jobs: each's share is 8 GPUs. A 1-GPU job of 1 h submitted 30 min ago, not started:
    T_sh = 0.5 h + 1 h, T_id = 1 h. An 8-to-32-GPU job (mean 20 > its share 8) is stretched 20 / 8."""
    cluster = small_cluster((("v100", 2, 8),))
    a = job("a", (1,), duration=3600.0, submit=-1800.0)
    b = job("b", (8, 32), duration=3600.0, submit=0.0)  # num_gpus 8 < R_avg 20: eq. 9 gives 3600 * 8 / 20
    view = _view([a, b], cluster=cluster)
    assert projected_ftf(view, a) == pytest.approx(1.5)
    age_b = 3600.0 * 8 / 20
    assert projected_ftf(view, b) == pytest.approx(age_b / (age_b * 20 / 8))


def test_a_job_that_progressed_sinks_below_one_that_waited():
    """Same submission and run time: the one that ran half its work projects a shorter stay, so the one
    still waiting ranks first."""
    ran = job("ran", (1,), duration=3600.0, submit=-3600.0, placement=Placement.of([0]))
    ran.progress_fraction = 0.5
    waited = job("waited", (1,), duration=3600.0, submit=-3600.0)
    view = _view([ran, waited])
    assert projected_ftf(view, waited) == pytest.approx(2.0)
    assert projected_ftf(view, ran) == pytest.approx(1.5)
    assert [j.job_id for j in FinishTimeFairness().order(view, [ran, waited])] == ["waited", "ran"]


def test_it_differs_from_the_latency_ratio_where_progress_counts():
    """The latency ratio ranks by waiting alone: a running job that waited longer stays first there."""
    ran = job("ran", (1,), duration=3600.0, submit=-5000.0, wait=3000.0, placement=Placement.of([0]))
    ran.progress_fraction = 0.9
    waited = job("waited", (1,), duration=3600.0, submit=-3600.0, wait=2000.0)
    view = _view([ran, waited])
    assert [j.job_id for j in LatencyRatio().order(view, [ran, waited])] == ["ran", "waited"]
    assert [j.job_id for j in FinishTimeFairness().order(view, [ran, waited])] == ["waited", "ran"]


def test_the_planner_weighs_its_ilp_by_the_ordering_it_runs_under():
    a = job("a", (1,), duration=3600.0, submit=-7200.0)
    b = job("b", (1,), duration=3600.0, submit=0.0)
    view = _view([a, b])
    est = TableEstimator({("a", "v100"): 1.0, ("b", "v100"): 1.0})
    ftf = planner(est, ordering="finish-time-fairness").priorities(view, [a, b])
    assert list(ftf) == pytest.approx([projected_ftf(view, a), projected_ftf(view, b)])
    assert list(planner(est).priorities(view, [a, b])) == pytest.approx([0.0, 0.0])  # neither waited


def test_the_hops_preset_takes_finish_time_fairness_as_its_queue():
    sched = build_scheduler("hops", ordering="finish-time-fairness")
    assert isinstance(sched.ordering, FinishTimeFairness)
    assert sched.allocation.ordering == "finish-time-fairness"


def test_a_hops_run_under_finish_time_fairness_completes_every_job():
    res = CliRunner().invoke(app, ["simulate", "--cluster", "hops-64", "--trace", "hops-table3:seed=1", "--policy",
                                   "hops", "--ordering", "finish-time-fairness", "--set", "throughputs=oracle",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["completed"] == summary["jobs"] == 25
    assert summary["ftf_max"] is not None
