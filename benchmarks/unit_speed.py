"""Speed of four hot paths whose cost the test suite once bounded with wall-clock asserts.

A time bound in a unit test fails on a loaded machine (a 2-core CI runner running the suite in parallel)
while the code is fine, so the tests now check only behaviour and guard against hangs; how fast these paths
are is measured here, on a quiet machine, and compared by a person or a result file:

* ``continual_edit``: one add/re-value/remove edit of :class:`~dlsched.solvers.differential.DifferentialAssignment`
  at 400 and 40,000 jobs; an edit should cost the same at both sizes (``ratio`` near 1, not ~100).
* ``best_batch``: 300 uncached :meth:`ThroughputModel.best_batch` calls (was bounded at 1 s).
* ``slowest``: one :meth:`GpuSpeeds.slowest` call over a 4-GPU gang on a 256-GPU cluster (was bounded at 20 us).
* ``goodput_many``: :meth:`LearnedGoodputEstimator.goodput_many` over 1,000 jobs x 20 shapes, cold and
  cached (was bounded at 5 s and 0.25 s).

Output: one JSON object per line and measurement on stdout; with ``--out FILE`` a result file with the
provenance (:func:`dlsched.sim.about.finish_measurements`).

    python benchmarks/unit_speed.py [--repeat 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _best_of(repeat: int, fn: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def continual_edit(repeat: int) -> dict[str, Any]:
    from dlsched.solvers.differential import DifferentialAssignment

    def per_edit(jobs: int) -> float:
        problem = DifferentialAssignment([1e6, 1e6])
        rng = np.random.default_rng(0)
        for j in range(jobs):
            problem.add_job(j, rng.integers(0, 2, 20), np.ones(20), rng.uniform(0, 1, 20))
        state = {"rep": 0}

        def batch() -> None:
            rep = state["rep"]
            state["rep"] += 1
            for i in range(60):
                j = rep * 60 + i
                problem.add_job(("n", j), np.zeros(20, dtype=int), np.ones(20), np.ones(20))
                problem.set_values(("n", j), np.full(20, 2.0))
                problem.set_capacity(0, 1e6 - j)
                problem.remove_job(j)

        return _best_of(repeat, batch) / 60

    small, large = per_edit(400), per_edit(40_000)
    return {"measurement": "continual_edit", "small_s": small, "large_s": large, "ratio": large / small}


def best_batch(repeat: int) -> dict[str, Any]:
    from dlsched.world.efficiency import EfficiencyModel
    from dlsched.world.throughput import ThroughputModel

    tm, em = ThroughputModel.load(), EfficiencyModel.load()
    calls = {"n": 0}

    def batch() -> None:
        calls["n"] += 1
        for i in range(300):  # new arguments each batch: nothing cached from the last
            tm.best_batch("ncf", "v100", (8, (i % 8) + 1), 1e4 * i + calls["n"], em, 32768)

    return {"measurement": "best_batch", "calls": 300, "best_s": _best_of(repeat, batch)}


def slowest(repeat: int) -> dict[str, Any]:
    from dlsched.core import KNOWN_GPU_TYPES, make_cluster
    from dlsched.world.variability import GpuSpeeds

    cluster = make_cluster("bench", [("v100", 64, 4)], KNOWN_GPU_TYPES, variability="longhorn")
    speeds = GpuSpeeds.for_cluster(cluster, seed=0, data_dir=None, enabled=True)
    gangs = [tuple(range(i, i + 4)) for i in range(0, 250, 4)]

    def batch() -> None:
        for _ in range(200):
            for g in gangs:
                speeds.slowest("classA", g)

    return {"measurement": "slowest", "per_call_s": _best_of(repeat, batch) / (200 * len(gangs)),
            "origin": speeds.origin}


def goodput_many(repeat: int) -> dict[str, Any]:
    from dlsched.core import (
        KNOWN_GPU_TYPES,
        Adaptivity,
        ClusterView,
        GradientObservation,
        JobSpec,
        JobStatus,
        JobView,
        Placement,
        ThroughputObservation,
        make_cluster,
    )
    from dlsched.estimators.goodput import LearnedGoodputEstimator
    from dlsched.estimators.throughput_model import ThroughputParams, compute_time, step_time

    def profile(p: ThroughputParams, gtype: str) -> list[ThroughputObservation]:
        out = []
        for b in np.unique(np.round(np.geomspace(16, 512, 5))):
            step = float(step_time(p, 1, 1, int(b), 1))
            out.append(ThroughputObservation(time_s=1.0, gpu_type=gtype, num_nodes=1, num_gpus=1, local_bsz=int(b),
                                             accum_steps=1, step_time_s=step,
                                             sync_time_s=step - float(compute_time(p, int(b)))))
        return out

    fast = ThroughputParams(alpha_c=0.008, beta_c=0.0002, alpha_r=0.004, beta_r=0.001, alpha_n=0.02, beta_n=0.001,
                            gamma=1.0)
    cluster = make_cluster("bench", [("t4", 2, 4), ("a100", 1, 4)], KNOWN_GPU_TYPES)
    jobs = []
    for i in range(1000):
        p = ThroughputParams(0.01 + 0.001 * (i % 7), 0.0003 * (1 + i % 5))
        spec = JobSpec(job_id=f"j{i}", submit_time_s=0.0, model="cifar10", num_gpus=1, adaptivity=Adaptivity.ADAPTIVE,
                       max_gpus=128)
        jobs.append(JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None,
                            age_s=0.0, wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0,
                            progress_fraction=0.0, start_time_s=None,
                            throughput_obs=profile(p, "t4") + profile(fast, "a100"),
                            gradient_obs=[GradientObservation(1.0, 128, 1.0, 1.0 + i % 11)],
                            batch_limits=(128, 4096)))
    est = LearnedGoodputEstimator()
    est.update(ClusterView(time_s=0.0, round_s=60.0, cluster=cluster, jobs=jobs))
    shapes = np.array([[1, 1], [1, 2], [1, 4]] + [[n, 4 * n] for n in range(2, 19)])
    t0 = time.perf_counter()
    for jv in jobs:
        est.goodput_many(jv, "t4", shapes)
    cold = time.perf_counter() - t0

    def warm() -> None:
        for jv in jobs:
            est.goodput_many(jv, "t4", shapes)

    return {"measurement": "goodput_many", "jobs": 1000, "cold_s": cold, "warm_s": _best_of(repeat, warm)}


MEASUREMENTS: dict[str, Callable[[int], dict[str, Any]]] = {
    "continual_edit": continual_edit, "best_batch": best_batch, "slowest": slowest, "goodput_many": goodput_many}


def main(argv: list[str] | None = None) -> None:
    from dlsched.sim.about import begin_measurements, finish_measurements

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="batches per measurement; the fastest counts")
    parser.add_argument("--only", default=",".join(MEASUREMENTS), help="comma-separated measurements")
    parser.add_argument("--out", default=None, help="result file (JSON) with the provenance")
    args = parser.parse_args(argv)
    begin_measurements(args.out)
    rows = [MEASUREMENTS[name.strip()](max(1, args.repeat)) for name in args.only.split(",") if name.strip()]
    finish_measurements(rows, args.out, "unit_speed", args)


if __name__ == "__main__":
    main()
