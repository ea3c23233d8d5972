"""Pollux's goodput and speedups against AdaptDL's, recomputed independently from the Pollux paper's equations.

The reference below is written from the equations, one configuration at a time, in plain Python: step time
``T = s * T_grad + (T_grad**g + T_sync**g)**(1/g)`` with ``T_grad = alpha_c + beta_c * m`` and ``T_sync``
taken from the inter-node terms ``alpha_n, beta_n`` when the job spans nodes and from the in-node terms
``alpha_r, beta_r`` otherwise; efficiency ``gain / scale`` with ``gain = (var + sqr) / (var / scale + sqr)``;
and AdaptDL's batch search (50 geometric global batches, micro-batches within the memory limit, at least two
micro-steps on a single replica above the initial batch, the realised batch credited). The estimator must
reproduce it to rounding for several parameter sets and shapes, and Pollux's speedups must be goodputs over
the fair share of Sia's artifact (ceil(G / J) GPUs on one node).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlsched.core import (
    Adaptivity,
    ClusterView,
    GradientObservation,
    JobSpec,
    JobStatus,
    JobView,
    Placement,
    ThroughputObservation,
)
from dlsched.estimators.goodput import LearnedGoodputEstimator
from dlsched.estimators.throughput_model import ThroughputParams, compute_time, step_time
from dlsched.policies.pollux import PolluxAllocation, speedup_table
from testkit import small_cluster

CLUSTER = small_cluster((("t4", 16, 4),))
B0, BMAX = 128, 4096
#: (true throughput parameters, grad_sqr, grad_var): slow and fast networks, no and much overlap, small and
#: large noise scales.
CASES = [
    (ThroughputParams(0.02, 5e-4, alpha_n=0.05, beta_n=0.004, alpha_r=0.01, beta_r=0.002, gamma=1.0), 1.0, 4.0),
    (ThroughputParams(0.005, 2e-4, alpha_n=0.2, beta_n=0.01, alpha_r=0.02, beta_r=0.001, gamma=2.5), 2.0, 1.0),
    (ThroughputParams(0.05, 1e-3, alpha_n=0.01, beta_n=0.0, alpha_r=0.005, beta_r=0.0005, gamma=6.0), 0.5, 40.0),
]
SHAPES = [(1, 1), (1, 2), (1, 3), (1, 4), (2, 2), (2, 4), (2, 8), (3, 9), (4, 16), (8, 32)]
MEMORY = 256  # largest micro-batch the job is seen to run, its learned memory limit


def reference_goodput(p: ThroughputParams, sqr: float, var: float, nodes: int, replicas: int,
                      max_atomic: float) -> tuple[float, int, int]:
    """AdaptDL's optimised goodput of one shape, and its micro-batch and number of micro-steps."""
    best = (0.0, 0, 0)
    for nominal in np.geomspace(max(B0, replicas), BMAX, 50):
        share = nominal / replicas
        extra = math.ceil(share / max_atomic - 1e-8) - 1
        if replicas == 1 and share > B0 + 1e-8:
            extra = max(extra, 1)
        atomic = math.ceil(share / (extra + 1) - 1e-8)
        if not 1 <= atomic <= max_atomic:
            continue
        t_grad = p.alpha_c + p.beta_c * atomic
        if replicas == 1:
            t_sync = 0.0
        elif nodes > 1:
            t_sync = p.alpha_n + p.beta_n * (replicas - 2)
        else:
            t_sync = p.alpha_r + p.beta_r * (replicas - 2)
        t_step = extra * t_grad + (t_grad ** p.gamma + t_sync ** p.gamma) ** (1 / p.gamma)
        batch = replicas * atomic * (extra + 1)
        scale = batch / B0
        efficiency = (var + sqr) / (var / scale + sqr) / scale
        goodput = batch / t_step * efficiency
        if goodput > best[0]:
            best = (goodput, atomic, extra + 1)
    return best


def observation(p: ThroughputParams, n: int, k: int, b: int) -> ThroughputObservation:
    step = float(step_time(p, n, k, b, 1))
    return ThroughputObservation(time_s=1.0, gpu_type="t4", num_nodes=n, num_gpus=k, local_bsz=b, accum_steps=1,
                                 step_time_s=step, sync_time_s=step - float(compute_time(p, b)))


def job(p: ThroughputParams, sqr: float, var: float, job_id: str = "j") -> JobView:
    spec = JobSpec(job_id=job_id, submit_time_s=0.0, model="cifar10", num_gpus=1, adaptivity=Adaptivity.ADAPTIVE)
    seen = [observation(p, n, k, b) for n, k in [(1, 1), (1, 2), (1, 4), (2, 8), (4, 16)] for b in (32, 96, MEMORY)]
    return JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                   wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                   start_time_s=None, throughput_obs=seen, gradient_obs=[GradientObservation(1.0, B0, sqr, var)],
                   batch_limits=(B0, BMAX))


def pollux_estimator(*views: JobView) -> LearnedGoodputEstimator:
    est = LearnedGoodputEstimator(mode="none", hetero_aware=False, batch_search="adaptdl")
    est.update(ClusterView(time_s=60.0, round_s=60.0, cluster=CLUSTER, jobs=list(views)))
    return est


@pytest.mark.parametrize("case", range(len(CASES)))
def test_optimised_goodput_matches_adaptdl_on_every_shape(case):
    p_true, sqr, var = CASES[case]
    jv = job(p_true, sqr, var)
    est = pollux_estimator(jv)
    p = est.params(jv, "t4")  # what the job's model believes: the reference uses the same parameters
    assert p is not None
    t = est.evaluate_many(jv, "t4", np.array(SHAPES))
    for i, (n, r) in enumerate(SHAPES):
        good, atomic, steps = reference_goodput(p, sqr, var, n, r, MEMORY)
        assert t.goodput[i] == pytest.approx(good, rel=1e-9), (n, r)
        assert (t.local_bsz[i], t.accum_steps[i]) == (atomic, steps), (n, r)
        assert t.batch_size[i] == r * atomic * steps  # the batch that runs, not the nominal one


def test_one_replica_above_the_initial_batch_always_accumulates():
    # a noisy gradient makes large batches worth it; one replica then runs two half-size micro-batches even
    # though a whole batch of 256 fits in memory (AdaptDL needs two micro-batches for its gradient statistics)
    p = ThroughputParams(0.02, 5e-4)
    jv = job(p, 1.0, 1000.0)
    est = pollux_estimator(jv)
    t = est.evaluate_many(jv, "t4", np.array([[1, 1]]))
    assert t.batch_size[0] > B0
    assert t.accum_steps[0] >= 2
    assert t.local_bsz[0] * t.accum_steps[0] == t.batch_size[0]
    dense = LearnedGoodputEstimator(mode="none", hetero_aware=False, batch_search="dense")
    dense.update(ClusterView(time_s=60.0, round_s=60.0, cluster=CLUSTER, jobs=[jv]))
    assert dense.evaluate_many(jv, "t4", np.array([[1, 1]])).accum_steps[0] == 1  # the former search


def test_hand_worked_single_replica_goodput():
    # alpha_c = 0.02 s, beta_c = 5e-4 s/sample, no noise (var = 0): efficiency 1/scale, so the best batch is
    # the initial one, B0 = 128, on one micro-batch: T = 0.02 + 0.064 = 0.084 s, goodput 128 / 0.084 x 1
    p = ThroughputParams(0.02, 5e-4)
    jv = job(p, 1.0, 0.0)
    est = pollux_estimator(jv)
    q = est.params(jv, "t4")
    assert q is not None
    assert q.alpha_c == pytest.approx(0.02, rel=1e-4) and q.beta_c == pytest.approx(5e-4, rel=1e-4)
    t = est.evaluate_many(jv, "t4", np.array([[1, 1]]))
    assert (t.batch_size[0], t.accum_steps[0]) == (128, 1)
    assert t.goodput[0] == pytest.approx(128 / (q.alpha_c + q.beta_c * 128), rel=1e-9)


def test_pollux_speedups_are_relative_to_one_node_of_a_fair_share():
    total, num_jobs, vsize = CLUSTER.num_gpus, 3, 4
    alloc = PolluxAllocation()
    assert alloc._base_shape(num_jobs, total, vsize) == (1, math.ceil(total / num_jobs))  # (1, 22)
    assert PolluxAllocation(speedup_base="fair-spread")._base_shape(num_jobs, total, vsize) == (6, 22)
    assert PolluxAllocation(speedup_base="one-gpu")._base_shape(num_jobs, total, vsize) == (1, 1)
    p_true, sqr, var = CASES[1]
    jv = job(p_true, sqr, var)
    est = alloc.require_estimator()
    assert isinstance(est, LearnedGoodputEstimator)
    est.update(ClusterView(time_s=60.0, round_s=60.0, cluster=CLUSTER, jobs=[jv]))
    p = est.params(jv, "t4")
    assert p is not None
    table = speedup_table(alloc._goodput_fn(jv, "t4"), (1, 22), 4, 16, vsize)
    base = reference_goodput(p, sqr, var, 1, 22, MEMORY)[0]
    for n, r in [(1, 1), (1, 4), (2, 8), (3, 12), (4, 16)]:
        assert table[n, r] == pytest.approx(reference_goodput(p, sqr, var, n, r, MEMORY)[0] / base, rel=1e-9)
