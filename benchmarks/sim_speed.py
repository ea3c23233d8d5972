"""Simulation speed: simulated seconds per wall-clock second.

Two sizes, as the simulator-core issue asks: 160 jobs on 64 GPUs (a Sia-scale run) and 10,000 jobs on
2,048 GPUs (cluster-scale). Both use a simple policy (FIFO, packed-sticky) so the figure measures the
engine and world, not a solver. The traces are synthetic Philly-calibrated duration jobs, seeded.

Prints a human line per measurement, then one JSON object per line per measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from dlsched.clusters import load_cluster
from dlsched.core import KNOWN_GPU_TYPES, make_cluster
from dlsched.policies import build_scheduler
from dlsched.sim.engine import Engine, SimConfig
from dlsched.traces import synthetic
from dlsched.world.base import World


def measure(cluster, specs, policy: str = "fifo") -> dict:
    world = World(cluster, seed=0)
    engine = Engine(cluster, specs, build_scheduler(policy), world, SimConfig(round_s=60.0))
    t0 = time.perf_counter()
    res = engine.run()
    wall = time.perf_counter() - t0
    done = sum(1 for r in res.jobs if r.finish_s is not None)
    return {"bench": "sim_speed", "gpus": cluster.num_gpus, "jobs": len(specs), "policy": policy,
            "completed": done, "rounds": len(res.rounds), "sim_s": res.end_time_s, "wall_s": round(wall, 3),
            "sim_s_per_wall_s": round(res.end_time_s / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="only the small case")
    args = ap.parse_args()
    rows = []
    small = load_cluster("sia-hetero-64")
    rows.append(measure(small, synthetic(rate=20, hours=8, seed=1, num_jobs=160)))
    if not args.quick:
        big = make_cluster("scale-2048", [("v100", 256, 8)], {"v100": KNOWN_GPU_TYPES["v100"]})
        # 10,000 jobs over ~2.5 days: about 170 jobs/h keeps a 2,048-GPU cluster busy but not swamped
        specs = synthetic(rate=170, hours=10000 / 170, seed=2, kind="rigid-duration")[:10000]
        rows.append(measure(big, specs))
    for r in rows:
        print(f"{r['jobs']:>6} jobs on {r['gpus']:>5} GPUs: {r['wall_s']:8.2f} s wall, "
              f"{r['sim_s_per_wall_s']:>10.0f} simulated s per wall s ({r['rounds']} rounds)", file=sys.stderr)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
