"""What ``dlsched trace validate`` checks beyond the file's format: that the simulated world can play it.

A trace can be well-formed and still unrunnable: a job of a model the world has no profile for, a batch
beyond the model's largest, work that would take more than a year, or (given a cluster) a gang larger than
any GPU type's pool. The engine refuses these before a run; checking them here with the same function
(:func:`~dlsched.sim.job_checks.validate_jobs`) means ``trace validate`` says "ok" only for a trace that runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlsched.clusters import load_cluster
from dlsched.core import JobSpec
from dlsched.sim.job_checks import validate_jobs
from dlsched.world.base import World, WorldConfig

#: Cluster whose world decides which models are known when no cluster is named (its fit is not checked).
DEFAULT_CHECK_CLUSTER = "sia-hetero-64"


def check_runnable(specs: Sequence[JobSpec], cluster: str | None = None) -> None:
    """Raise an InputError naming ``file:line`` for the first job the world (and ``cluster``) cannot run.

    Without ``cluster`` only what holds on any cluster is checked; with it, every job must also fit it as an
    elastic job at its smallest size (a rigid policy needs the full request; the engine checks that then).
    """
    built = load_cluster(cluster or DEFAULT_CHECK_CLUSTER)
    world = World(built, WorldConfig(variability=False))
    validate_jobs(specs, built, world, rigid=False, fit=cluster is not None)
