"""One Hops iteration as a random draw: data loading as cache hits and misses per server, noisy compute and sync.

A configuration's servers each load their batch (a hit with the chance of that server's host for the job,
else a miss, each lognormal), the GPUs compute and all-reduce (lognormal noise of mean 1, the all-reduce
shared by the servers), and every worker waits for the slowest server. :func:`draw_iterations` plays a few
iterations with a job's own random generator (what its profiler times and reports);
:func:`expected_iteration` is the expectation the job progresses at, taken over a fixed bank of draws
(common random numbers: the same configuration always gets the same answer, and a small change of a
parameter moves it smoothly). The two share :func:`_iterations`, so what a job reports is, on average, what
it runs at.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from dlsched.world.hops_params import SIGMA_COMPUTE, SIGMA_HIT, SIGMA_MISS, SIGMA_SYNC, TRUTH_DRAWS


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """Data loading on one server of a configuration: a hit's and a miss's median time and the hit chance."""

    hit_s: float
    miss_s: float
    p_hit: float


@dataclass(frozen=True, slots=True)
class IterationShape:
    """What one configuration's iteration is made of (seconds; means of the noisy parts)."""

    #: GPU work of one iteration (forward, backward, update) on one GPU of the type.
    compute_s: float
    #: All-reduce time not hidden behind the backward pass (0 on one GPU).
    sync_s: float
    #: Equation 1's pattern: 1 prefetches the next batch during the step, 2 loads it in the step.
    pattern: int
    servers: tuple[ServerLoad, ...]


@dataclass(frozen=True, slots=True)
class Draws:
    """Iterations played: each one's time, all-reduce time and every server's data-loading time."""

    step_s: np.ndarray
    sync_s: np.ndarray
    #: Shape (iterations, servers).
    load_s: np.ndarray


def _iterations(shape: IterationShape, u: np.ndarray, z_load: np.ndarray, z_compute: np.ndarray,
                z_sync: np.ndarray) -> Draws:
    """Iterations from standard draws: ``u`` uniform and ``z_load`` normal, (n, servers); the rest (n,)."""
    p = np.array([s.p_hit for s in shape.servers])
    hit = np.array([s.hit_s for s in shape.servers])
    miss = np.array([s.miss_s for s in shape.servers])
    is_hit = u < p
    load = np.where(is_hit, hit * np.exp(SIGMA_HIT * z_load), miss * np.exp(SIGMA_MISS * z_load))
    compute = shape.compute_s * np.exp(SIGMA_COMPUTE * z_compute - 0.5 * SIGMA_COMPUTE ** 2)
    sync = shape.sync_s * np.exp(SIGMA_SYNC * z_sync - 0.5 * SIGMA_SYNC ** 2)
    gpu = (compute + sync)[:, None]
    per_server = np.maximum(load, gpu) if shape.pattern == 1 else load + gpu
    return Draws(step_s=per_server.max(axis=1), sync_s=sync, load_s=load)


def draw_iterations(shape: IterationShape, rng: np.random.Generator, n: int) -> Draws:
    """``n`` iterations of the configuration, drawn with the job's generator."""
    k = len(shape.servers)
    return _iterations(shape, rng.random((n, k)), rng.standard_normal((n, k)), rng.standard_normal(n),
                       rng.standard_normal(n))


@cache
def _bank(servers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fixed draws expectations are taken over (seeded: the world's truth is the same on every run)."""
    rng = np.random.default_rng(20241120 + servers)
    return (rng.random((TRUTH_DRAWS, servers)), rng.standard_normal((TRUTH_DRAWS, servers)),
            rng.standard_normal(TRUTH_DRAWS), rng.standard_normal(TRUTH_DRAWS))


def expected_iteration(shape: IterationShape) -> float:
    """The configuration's expected iteration time (what its job progresses at)."""
    if not shape.servers:
        return 0.0
    return float(_iterations(shape, *_bank(len(shape.servers))).step_s.mean())
