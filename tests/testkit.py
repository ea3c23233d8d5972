"""Shared test helpers: small clusters, traces and a data-directory guard."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlsched.core import KNOWN_GPU_TYPES, Adaptivity, JobSpec, make_cluster

DATA = Path(os.environ.get("DLSCHED_DATA", "../shared/data"))


def needs_data(*parts: str):
    """Skip a test when the measured data it reads is absent (CI always has it)."""
    path = DATA.joinpath(*parts)
    return pytest.mark.skipif(not path.exists(), reason=f"measured data not found at {path} (set DLSCHED_DATA)")


def small_cluster(groups=(("v100", 2, 4),), name="test", variability=None):
    types = {g[0]: KNOWN_GPU_TYPES[g[0]] for g in groups}
    return make_cluster(name, groups, types, variability=variability)


def duration_job(job_id: str, submit: float, gpus: int, duration: float, model: str = "philly") -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=submit, model=model, num_gpus=gpus, duration_s=duration,
                   adaptivity=Adaptivity.RIGID)


class Recorder:
    """Wraps a scheduler and keeps every decision with the view it answered, for invariant checks."""

    def __init__(self, inner):
        self.inner, self.name, self.allows_packing = inner, inner.name, inner.allows_packing
        self.rigid = getattr(inner, "rigid", False)
        self.log = []

    def schedule(self, view):
        d = self.inner.schedule(view)
        self.log.append((view, d))
        return d


def assert_round_invariants(cluster, log, specs, *, exact_gangs: bool) -> None:
    """Every recorded decision: allocated jobs are active and not also being profiled, each on one GPU type,
    with exactly its request (``exact_gangs``) or an allowed count, and no GPU given beyond a full share
    (profiling GPUs count as taken)."""
    by_id = {s.job_id: s for s in specs}
    assert log
    for view, decision in log:
        active = {j.job_id for j in view.jobs}
        share = [0.0] * cluster.num_gpus
        for job_id, alloc in decision.allocations.items():
            assert job_id in active and job_id not in decision.profiles
            gpus = alloc.placement.gpus
            if exact_gangs:
                assert len(gpus) == by_id[job_id].num_gpus  # gangs whole
            else:
                assert by_id[job_id].allows_gpu_count(len(gpus))
            assert len({cluster.gpu_type_of[g] for g in gpus}) == 1  # one GPU type per job
            for g in gpus:
                share[g] += alloc.gpu_share
        for placement in decision.profiles.values():
            for g in placement.gpus:
                share[g] += 1.0
        assert max(share, default=0.0) <= 1.0 + 1e-9  # no GPU given twice
