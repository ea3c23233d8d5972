"""Hops's plan time per round against queued jobs and cluster size (Hops, SoCC'24, section 4.3).

Each measurement times one scheduling round of the ``hops`` preset (``schedule(view)``: ordering, service
window, configurations, the ILP and placement) on a view with ``queued`` waiting jobs of the Hops workload
(``hops:jobs=queued``) and an idle cluster, the round with the most to plan. Clusters: ``hops-64``,
``hops-512``, and ``hops-512`` three times over (1,536 GPUs) for the paper's largest scale. Throughputs come
from the simulator's oracle, as in a simulated run. Between rounds every job waits ``round_s`` longer, so
latency ratios (and the plan) change.

Output: a table on stderr, then one JSON object per line and measurement on stdout with keys ``policy``,
``gpus``, ``queued``, ``median_s``, ``p99_s`` (wall time; plus ``cpu_median_s``, the process's CPU time,
which a machine shared with other work inflates less, ``rounds``, ``window``, ``options``, and the plan's
``objective`` against the solver's upper ``bound`` on the optimum, ``gap_max`` the worst relative gap over
the rounds; over server classes the bound is the class relaxation's, which bounds the exact ILP as well).

    python benchmarks/hops_plan_time.py [--sizes 64,512,1536] [--queued 100,500,2000] [--rounds 3]
                                        [--set server_classes=off] [--set solver=milp]
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


def measure(gpus: int, queued: int, rounds: int, seed: int = 1, settings: dict[str, str] | None = None) -> dict:
    cluster = cluster_of(gpus)
    world = World(cluster)
    specs = hops_trace(num_jobs=queued, rate_per_h=100.0, seed=seed)
    phys = {s.job_id: world.physics(s) for s in specs}
    sched = build_scheduler("hops", settings=settings or {})
    sched.attach_oracle(OracleGoodput(world, lambda k: phys[k]))
    now = max(s.submit_time_s for s in specs)
    times, cpu, info, gaps = [], [], {}, []
    for r in range(rounds):
        t = now + 60.0 * r
        jobs = [JobView(spec=s, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None,
                        age_s=t - s.submit_time_s, wait_s=t - s.submit_time_s, attained_gpu_s=0.0,
                        attained_service_s=0.0, restarts=0, progress_fraction=0.0, start_time_s=None,
                        estimated_duration_s=s.duration_s) for s in specs]
        view = ClusterView(time_s=t, round_s=60.0, cluster=cluster, jobs=jobs)
        t0, c0 = time.perf_counter(), time.process_time()
        decision = sched.schedule(view)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        info = decision.info
        gaps.append(1.0 - info["hops.objective"] / info["hops.bound"])
    return {"policy": "hops", "gpus": cluster.num_gpus, "queued": queued, "median_s": float(np.median(times)),
            "p99_s": float(np.percentile(times, 99)), "cpu_median_s": float(np.median(cpu)), "rounds": rounds,
            "window": info.get("hops.window"), "options": info.get("hops.options"),
            "objective": info.get("hops.objective"), "bound": info.get("hops.bound"),
            "gap_max": float(max(gaps)), "settings": settings or {}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64,512,1536", help="cluster sizes in GPUs (comma separated)")
    p.add_argument("--queued", default="100,500,2000", help="queued jobs (comma separated)")
    p.add_argument("--rounds", type=int, default=3, help="rounds timed per measurement")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a tunable of the hops allocation, e.g. server_classes=off (the exact ILP) or solver=milp")
    args = p.parse_args()
    settings = dict(kv.split("=", 1) for kv in args.set)
    rows = []
    for gpus in (int(x) for x in args.sizes.split(",")):
        for queued in (int(x) for x in args.queued.split(",")):
            row = measure(gpus, queued, args.rounds, settings=settings)
            rows.append(row)
            print(f"{row['gpus']:>6} GPUs {queued:>5} queued: median {row['median_s']:.3f} s, p99 "
                  f"{row['p99_s']:.3f} s, CPU {row['cpu_median_s']:.3f} s (window {row['window']}, options {row['options']}, objective "
                  f"{row['objective']:.2f} of bound {row['bound']:.2f}, worst gap {row['gap_max']:.2%})", file=sys.stderr)
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
