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
