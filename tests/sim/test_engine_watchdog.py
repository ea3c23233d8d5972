"""The engine's second line of defence: a run that cannot finish stops with one clear error, never hangs."""

from __future__ import annotations

import pytest

from dlsched.core import InputError, JobSpec
from dlsched.policies import build_scheduler
from dlsched.sim.engine import Engine, SimConfig, SimulationStuck
from dlsched.world.base import Rate, World, WorldConfig
from testkit import duration_job, small_cluster


def _engine(specs, round_s=60.0, stall_rounds=50, world=None):
    cluster = small_cluster((("v100", 1, 4),))
    world = world or World(cluster, WorldConfig(), seed=0)
    return Engine(cluster, specs, build_scheduler("fifo"), world,
                  SimConfig(round_s=round_s, stall_rounds=stall_rounds))


@pytest.mark.timeout(300)
def test_a_job_that_holds_gpus_without_progress_stops_the_run_naming_it(monkeypatch):
    cluster = small_cluster((("v100", 1, 4),))
    world = World(cluster, WorldConfig(), seed=0)
    monkeypatch.setattr(world, "rate", lambda *a, **k: Rate(0.0))
    spec = JobSpec("stuck", 0.0, "philly", 1, duration_s=100.0, origin="t.csv:2")
    with pytest.raises(SimulationStuck) as err:  # without the watchdog this would hang (pytest-timeout)
        _engine([spec], world=world).run()
    assert isinstance(err.value, InputError)
    assert str(err.value).startswith("t.csv:2 field 'batch_size': job 'stuck' held 1 GPU(s) for 50 rounds")


@pytest.mark.parametrize("rate", [float("nan"), float("inf")])
def test_a_rate_that_is_not_finite_stops_the_run_at_once(monkeypatch, rate):
    cluster = small_cluster((("v100", 1, 4),))
    world = World(cluster, WorldConfig(), seed=0)
    monkeypatch.setattr(world, "rate", lambda *a, **k: Rate(rate))
    with pytest.raises(SimulationStuck, match=r"job 'a' has a progress rate of (nan|inf) on its GPUs"):
        _engine([duration_job("a", 0.0, 1, 100.0)], world=world).run()


def test_a_clock_that_cannot_advance_is_refused():
    with pytest.raises(SimulationStuck, match="simulated time cannot advance"):
        _engine([duration_job("late", 1e17, 1, 100.0)], round_s=1e-300).run()
    with pytest.raises(SimulationStuck, match="round length must be a positive number"):
        _engine([duration_job("a", 0.0, 1, 100.0)], round_s=float("nan")).run()


def test_work_of_more_than_a_year_is_refused_before_the_run():
    spec = JobSpec("long", 0.0, "resnet50", 1, iterations=9e8, origin="t.csv:7")
    with pytest.raises(InputError) as err:
        _engine([spec])
    assert str(err.value).startswith("t.csv:7 field 'iterations': the job would run")
    assert "(0, 31536000]" in str(err.value)
