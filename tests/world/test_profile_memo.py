"""Sia's bootstrap profiling remembers each model's profiled step times per GPU shape; a job profiled after
another of its model on the same shape (other GPUs, other speeds) reports what a fresh world reports."""

from __future__ import annotations

from dlsched.core import KNOWN_GPU_TYPES, Adaptivity, JobSpec, Placement, make_cluster
from dlsched.world.base import World, WorldConfig

TYPES = ("t4", "a100")
CLUSTER = make_cluster("c", [(t, 4, 4) for t in TYPES], {t: KNOWN_GPU_TYPES[t] for t in TYPES})


def job(i: int, model: str) -> JobSpec:
    return JobSpec(job_id=f"j{i}", submit_time_s=0.0, model=model, num_gpus=2, adaptivity=Adaptivity.ADAPTIVE)


def test_a_remembered_profile_is_the_profile_a_fresh_world_takes():
    # two GPUs on one node of each type, on different GPUs, for two models, and a larger shape in between
    small = [Placement.of([0, 1, 16, 17]), Placement.of([4, 5, 20, 21]), Placement.of([8, 9, 24, 25])]
    large = Placement.of([0, 1, 2, 3, 4, 5, 16, 17, 18, 19, 20, 21])
    plays = [(job(0, "cifar10"), small[0]), (job(1, "bert"), small[1]), (job(2, "cifar10"), large),
             (job(3, "cifar10"), small[2]), (job(4, "bert"), large), (job(5, "bert"), small[0])]
    shared = World(CLUSTER, WorldConfig(variability=True), seed=3)
    for spec, placement in plays:
        fresh = World(CLUSTER, WorldConfig(variability=True), seed=3)
        want = fresh.profile(fresh.physics(spec), placement, 60.0)
        got = shared.profile(shared.physics(spec), placement, 60.0)
        assert got == want
        assert want[1], "the profile reports observations"
