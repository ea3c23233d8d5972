"""Isolated run times (finish-time fairness's denominator) from the running maximum over GPU counts equal a
scan of every count from one, whatever order the fair shares are asked in.

A 100k-job run asks for hundreds of distinct fair shares; the world extends a per-job-shape running maximum
instead of rescanning. That is only a speed-up if each answer is the scan's, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import KNOWN_GPU_TYPES, Adaptivity, JobSpec, make_cluster
from dlsched.world.base import World, WorldConfig, _packed_counts

TYPES = ("t4", "a100")
CLUSTER = make_cluster("c", [(t, 8, 8) for t in TYPES], {t: KNOWN_GPU_TYPES[t] for t in TYPES})
SPECS = [JobSpec(job_id="ad", submit_time_s=0.0, model="cifar10", num_gpus=2, adaptivity=Adaptivity.ADAPTIVE),
         JobSpec(job_id="st", submit_time_s=0.0, model="bert", num_gpus=4, adaptivity=Adaptivity.ADAPTIVE,
                 min_gpus=4, max_gpus=32, gpu_unit=4),
         JobSpec(job_id="rg", submit_time_s=0.0, model="imagenet", num_gpus=8, batch_size=256,
                 adaptivity=Adaptivity.RIGID)]


def scanned(world: World, phys, gpu_type: str, num_gpus: float) -> float:
    """The definition: per progress segment, the best rate over every allowed count up to ``num_gpus``."""
    spec = phys.spec
    whole = max(1, int(math.floor(num_gpus)))
    if spec.adaptivity is Adaptivity.RIGID:
        shapes = [spec.num_gpus]
    else:
        shapes = [k for k in range(1, whole + 1) if spec.allows_gpu_count(k)] or [spec.lower_gpus]
    per_node = max(n.num_gpus for n in world.cluster.nodes if n.gpu_type == gpu_type)
    segments = np.linspace(0.0, phys.total_work, 9)
    t = 0.0
    for lo, hi in zip(segments[:-1], segments[1:], strict=True):
        mid = 0.5 * (lo + hi)
        best = 0.0
        for k in shapes:
            best = max(best, phys.base_rate(mid, gpu_type, _packed_counts(k, per_node), None).work_per_s)
        t += math.inf if best <= 0 else (hi - lo) / best
    if spec.adaptivity is Adaptivity.RIGID and num_gpus < spec.num_gpus:
        return t * spec.num_gpus / max(num_gpus, 1e-9)
    if num_gpus < 1:
        return t / max(num_gpus, 1e-9)
    return t


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SPECS) - 1), st.sampled_from(TYPES), st.floats(0.25, 40.0)),
                min_size=1, max_size=12))
def test_isolated_runtime_is_the_scan_from_one_in_any_order(queries):
    world = World(CLUSTER, WorldConfig(variability=False))
    reference = World(CLUSTER, WorldConfig(variability=False))
    for i, gpu_type, num_gpus in queries:
        got = world.isolated_runtime(world.physics(SPECS[i]), gpu_type, num_gpus)
        want = scanned(reference, reference.physics(SPECS[i]), gpu_type, num_gpus)
        assert got == want or (math.isinf(got) and math.isinf(want))
