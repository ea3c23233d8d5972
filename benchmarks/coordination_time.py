"""Gimbal's coordinator's decision time per scheduling round, at 32 and 1,024 GPUs (A40 nodes of 2).

Each round a queue of Gimbal-trace jobs (Table 1's models, Table 2's Philly mix of sizes) whose summed
demand is ``load`` times the cluster goes through Lucid's relaxed packing stages (shortest job first,
rigid gangs up to two workers per GPU, packed onto running jobs in stars); the measured part is the
coordination stage alone (``coordinate(view, decision)``): the packing rules, and Algorithm 1's search for
every packing set that is new this round, its trial plans measured through the world's runtime monitor.
Between rounds a random fifth of the jobs finish and new ones arrive, so new packing sets keep forming.

Output: a table on stderr, then one JSON object per line and measurement on stdout with keys
``benchmark``, ``gpus``, ``median_s``, ``max_s`` (plus ``rounds``, ``sets_per_round``, ``searches_per_round``,
``attempts_per_round``). With ``--out FILE`` the measurements also go to a result file with provenance.

    python benchmarks/coordination_time.py [--sizes 32,1024] [--rounds 20] [--load 1.6] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from dlsched.core import (
    KNOWN_GPU_TYPES,
    Adaptivity,
    ClusterView,
    JobSpec,
    JobStatus,
    JobView,
    Placement,
    make_cluster,
)
from dlsched.core.packing import packing_sets
from dlsched.policies.gimbal import GimbalCoordination
from dlsched.policies.ordering import Sjf
from dlsched.policies.packing import PackingGang, PackingPlacement
from dlsched.sim.monitor import WorldMonitor
from dlsched.traces.gimbal import CLASS_COUNTS, DURATION_RANGE_S, GPU_CHOICES, MODELS
from dlsched.world.base import World, WorldConfig


def _job(i: int, rng: np.random.Generator, t: float) -> JobView:
    counts = CLASS_COUNTS["philly"]
    classes = list(counts)
    cls = classes[int(rng.choice(len(classes), p=np.array(list(counts.values())) / sum(counts.values())))]
    models = list(MODELS[cls])
    model = models[int(rng.integers(len(models)))]
    gpus = int(rng.choice([1, 2, 4, 8], p=GPU_CHOICES["philly"][cls]))
    duration = float(rng.uniform(*DURATION_RANGE_S[cls]))
    spec = JobSpec(job_id=str(i), submit_time_s=t, model=model, num_gpus=gpus, duration_s=duration,
                   adaptivity=Adaptivity.RIGID, reference_gpu="a40")
    return JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                   wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                   start_time_s=None, estimated_duration_s=duration)


def measure(num_gpus: int, rounds: int, load: float, seed: int) -> dict:
    cluster = make_cluster(f"bench-{num_gpus}", [("a40", num_gpus // 2, 2)], {"a40": KNOWN_GPU_TYPES["a40"]})
    world = World(cluster, WorldConfig(variability=False), seed=seed)
    ordering, allocation, placement = Sjf(), PackingGang(), PackingPlacement(relaxed=True)
    coord = GimbalCoordination()
    coord.attach_monitor(WorldMonitor(world))
    rng = np.random.default_rng(seed)
    jobs: list[JobView] = []
    next_id = 0
    times: list[float] = []
    sets: list[int] = []
    searches: list[float] = []
    attempts: list[float] = []
    for r in range(rounds):
        if jobs:
            keep = rng.random(len(jobs)) >= 0.2
            jobs = [j for j, k in zip(jobs, keep, strict=True) if k]
        demand = sum(j.spec.num_gpus for j in jobs)
        while demand < load * cluster.num_gpus:
            j = _job(next_id, rng, float(r * 60 + next_id * 1e-3))
            next_id += 1
            jobs.append(j)
            demand += j.spec.num_gpus
        view = ClusterView(time_s=r * 60.0, round_s=60.0, cluster=cluster, jobs=jobs)
        decision = placement.place(view, allocation.allocate(view, ordering.order(view, jobs)))
        t0 = time.perf_counter()
        decision = coord.coordinate(view, decision)
        times.append(time.perf_counter() - t0)
        placed = {j: a.placement for j, a in decision.allocations.items() if a.placement}
        sets.append(len(packing_sets(placed)))
        searches.append(decision.info.get("gimbal_searches", 0.0))
        attempts.append(decision.info.get("gimbal_attempts", 0.0))
        for j in jobs:
            j.placement = placed.get(j.job_id, Placement.empty())
    return {"benchmark": "coordination_time", "gpus": cluster.num_gpus, "median_s": statistics.median(times),
            "max_s": max(times), "rounds": rounds, "sets_per_round": statistics.median(sets),
            "searches_per_round": statistics.median(searches), "attempts_per_round": statistics.median(attempts)}


def _ms(x: float) -> str:
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.2f} s"


def tables(data: dict) -> dict[str, str]:
    """The measurements of a result file: per cluster size, packing sets, searches and decision time."""
    lines = ["| GPUs | packing sets per round | searches per round | attempts per round | median | worst |",
             "|---|---|---|---|---|---|"]
    for r in sorted(data["runs"], key=lambda r: r["gpus"]):
        lines.append(f"| {r['gpus']:,} | {r['sets_per_round']:g} | {r['searches_per_round']:g} | "
                     f"{r['attempts_per_round']:g} | {_ms(r['median_s'])} | {_ms(r['max_s'])} |")
    return {"table": "\n".join(lines)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="32,1024")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--load", type=float, default=1.6, help="queued GPU demand over cluster size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the measurements, with provenance, to this JSON file")
    args = ap.parse_args(argv)
    from dlsched.sim.about import begin_measurements, finish_measurements

    begin_measurements(args.out)
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        if n < 2 or n % 2:
            print(f"error: --sizes: {n} is not an even number of GPUs (nodes hold 2 A40)", file=sys.stderr)
            return 2
        rows.append(measure(n, args.rounds, args.load, args.seed))
        r = rows[-1]
        print(f"{r['gpus']:6d} GPUs  median {_ms(r['median_s']):>10s}  max {_ms(r['max_s']):>10s}  "
              f"({r['sets_per_round']:g} packing sets, {r['searches_per_round']:g} searches per round)",
              file=sys.stderr, flush=True)
    finish_measurements(rows, args.out, "coordination_time", args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
