"""Gimbal's runtime monitor reads speeds with seeded measurement error, not the world's truth, and trying a
plan costs the jobs the time they ran under it."""

from __future__ import annotations

import statistics

import pytest

from dlsched.core import Adaptivity, ClusterView, Decision, JobSpec, JobStatus, JobView, Placement
from dlsched.policies.gimbal import GimbalCoordination
from dlsched.sim.monitor import WorldMonitor
from dlsched.world.base import World, WorldConfig
from dlsched.world.sharing import job_speed
from testkit import small_cluster

CLUSTER = small_cluster((("a40", 2, 2),))
MEMBERS = {"big": ("resnet50", Placement.of([0, 1]), (100, 60)), "small": ("vgg16", Placement.of([1]), (70,))}


def world(seed: int = 0, **config) -> World:
    return World(CLUSTER, WorldConfig(variability=False, **config), seed=seed)


def test_readings_are_noisy_seeded_and_reproducible():
    truth = WorldMonitor(world(), noise=0.0).worker_speeds(MEMBERS)
    assert truth == WorldMonitor(world()).true_speeds(MEMBERS)
    first = [WorldMonitor(world(seed=7)).worker_speeds(MEMBERS) for _ in range(2)]
    assert first[0] == first[1]  # the same world seed reads the same
    assert WorldMonitor(world(seed=8)).worker_speeds(MEMBERS) != first[0]
    assert first[0] != truth  # a reading is not the truth
    monitor = WorldMonitor(world(seed=3, monitor_noise=0.05))
    errors = [r / t - 1 for _ in range(400) for j, vs in monitor.worker_speeds(MEMBERS).items()
              for r, t in zip(vs, truth[j], strict=True)]
    assert abs(statistics.fmean(errors)) < 0.01 and statistics.stdev(errors) == pytest.approx(0.05, rel=0.15)
    assert monitor.readings == 400 and monitor.period_s == 30.0


def test_a_trial_costs_the_time_it_ran_slower_than_the_kept_plan():
    monitor = WorldMonitor(world(), noise=0.0)
    kept = (MEMBERS, {})
    slow = ({**MEMBERS, "big": ("resnet50", Placement.of([0, 1]), (100, 20))}, {})
    v = {name: job_speed(monitor.true_speeds(plan[0])["big"]) for name, plan in (("kept", kept), ("slow", slow))}
    assert v["slow"] < v["kept"]
    delays = monitor.trial_delays([slow, kept], kept, 30.0)
    assert delays["big"] == pytest.approx(30.0 * (1 - v["slow"] / v["kept"]))
    assert monitor.trial_delays([kept], kept, 30.0) == {"big": 0.0, "small": 0.0}  # the kept plan costs nothing


def _coordinated(period_s: float) -> tuple[Decision, WorldMonitor, GimbalCoordination]:
    jobs = {"big": ("resnet50", 4, 30000.0), "small": ("vgg16", 2, 600.0)}
    placements = {"big": Placement.of([0, 1, 2, 3]), "small": Placement.of([0, 1])}
    views = [JobView(spec=JobSpec(job_id=j, submit_time_s=0.0, model=m, num_gpus=k, duration_s=d,
                                  adaptivity=Adaptivity.RIGID, reference_gpu="a40"),
                     status=JobStatus.RUNNING, placement=placements[j], batch_size=None, age_s=0.0, wait_s=0.0,
                     attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                     start_time_s=0.0, estimated_duration_s=d) for j, (m, k, d) in jobs.items()]
    coord = GimbalCoordination(switch_s=0.0)
    monitor = WorldMonitor(world(), noise=0.0, period_s=period_s)
    coord.attach_monitor(monitor)
    d = Decision()
    for j, p in placements.items():
        d.place(j, p)
    return coord.coordinate(ClusterView(time_s=0.0, round_s=60.0, cluster=CLUSTER, jobs=views), d), monitor, coord


def test_the_coordinator_charges_its_trials_as_pauses_and_counts_them_in_the_search_time():
    free, _, _ = _coordinated(0.0)
    assert all(a.pause_s == 0.0 for a in free.allocations.values())  # no switch cost, trials of no length
    out, monitor, coord = _coordinated(30.0)
    assert out.info["gimbal_attempts"] >= 1
    assert sum(a.pause_s for a in out.allocations.values()) > 0  # the trials slowed a job
    assert monitor.readings == len(coord._trials)  # one reading per trial plan, none repeated
    assert out.info["gimbal_search_s"] == pytest.approx(30.0 * monitor.readings)
    # the same plans as without trial costs: what the search keeps does not depend on the charge
    assert {j: a.mps_pct for j, a in out.allocations.items()} == {j: a.mps_pct for j, a in free.allocations.items()}
