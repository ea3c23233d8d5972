"""Hops's plan time per round against queued jobs and cluster size (Hops, SoCC'24, section 4.3).

Each measurement times one scheduling round of the ``hops`` preset (``schedule(view)``: ordering, service
window, configurations, the ILP and placement) on a view with ``queued`` waiting jobs of the Hops workload
(``hops:jobs=queued``) and an idle cluster, the round with the most to plan. Clusters: ``hops-64``,
``hops-512``, and ``hops-512`` three times over (1,536 GPUs) for the paper's largest scale. Throughputs come
from the simulator's oracle, as in a simulated run. Between rounds every job waits ``round_s`` longer, so
latency ratios (and the plan) change.

Output: a table on stderr, then one JSON object per line and measurement on stdout with keys ``policy``,
``gpus``, ``queued``, ``median_s``, ``p99_s`` (plus ``rounds``, ``window``, ``options``).

    python benchmarks/hops_plan_time.py [--sizes 64,512,1536] [--queued 100,500,2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from dlsched.clusters import load_cluster
from dlsched.core import ClusterView, JobStatus, JobView, Placement
from dlsched.policies import build_scheduler
from dlsched.sim.oracle import OracleGoodput
from dlsched.sim.run import scale_cluster
from dlsched.traces.hops import hops_trace
from dlsched.world.base import World


def cluster_of(gpus: int):
    """``hops-64``, ``hops-512``, or ``hops-512`` scaled to at least ``gpus`` GPUs."""
    if gpus <= 64:
        return load_cluster("hops-64")
    base = load_cluster("hops-512")
    return scale_cluster(base, max(1, -(-gpus // base.num_gpus)))


def measure(gpus: int, queued: int, rounds: int, seed: int = 1) -> dict:
    cluster = cluster_of(gpus)
    world = World(cluster)
    specs = hops_trace(num_jobs=queued, rate_per_h=100.0, seed=seed)
    phys = {s.job_id: world.physics(s) for s in specs}
    sched = build_scheduler("hops")
    sched.attach_oracle(OracleGoodput(world, lambda k: phys[k]))
    now = max(s.submit_time_s for s in specs)
    times, info = [], {}
    for r in range(rounds):
        t = now + 60.0 * r
        jobs = [JobView(spec=s, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None,
                        age_s=t - s.submit_time_s, wait_s=t - s.submit_time_s, attained_gpu_s=0.0,
                        attained_service_s=0.0, restarts=0, progress_fraction=0.0, start_time_s=None,
                        estimated_duration_s=s.duration_s) for s in specs]
        view = ClusterView(time_s=t, round_s=60.0, cluster=cluster, jobs=jobs)
        t0 = time.perf_counter()
        decision = sched.schedule(view)
        times.append(time.perf_counter() - t0)
        info = decision.info
    return {"policy": "hops", "gpus": cluster.num_gpus, "queued": queued, "median_s": float(np.median(times)),
            "p99_s": float(np.percentile(times, 99)), "rounds": rounds,
            "window": info.get("hops.window"), "options": info.get("hops.options")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64,512,1536", help="cluster sizes in GPUs (comma separated)")
    p.add_argument("--queued", default="100,500,2000", help="queued jobs (comma separated)")
    p.add_argument("--rounds", type=int, default=3, help="rounds timed per measurement")
    args = p.parse_args()
    rows = []
    for gpus in (int(x) for x in args.sizes.split(",")):
        for queued in (int(x) for x in args.queued.split(",")):
            row = measure(gpus, queued, args.rounds)
            rows.append(row)
            print(f"{row['gpus']:>6} GPUs {queued:>5} queued: median {row['median_s']:.3f} s, p99 "
                  f"{row['p99_s']:.3f} s (window {row['window']}, options {row['options']})", file=sys.stderr)
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
