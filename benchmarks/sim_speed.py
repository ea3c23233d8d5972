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
from pathlib import Path

from dlsched.progress import progress_bar
from dlsched.sim.config import RunConfig
from dlsched.sim.run import simulate

#: 256 servers of 8 V100 (a cluster file, so the run is an ordinary configuration).
BIG_CLUSTER = str(Path(__file__).resolve().parent / "clusters" / "v100-2048.yaml")


def measure(config: RunConfig) -> dict:
    res = simulate(config)
    wall = res.summary["sim_wall_s"]
    done = sum(1 for r in res.jobs if r.finish_s is not None)
    return {"bench": "sim_speed", "gpus": res.num_gpus, "jobs": len(res.jobs), "policy": res.label,
            "completed": done, "rounds": len(res.rounds), "sim_s": res.end_time_s, "wall_s": round(wall, 3),
            "sim_s_per_wall_s": round(res.end_time_s / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="only the small case")
    args = ap.parse_args()
    configs = [RunConfig(cluster="sia-hetero-64", trace="synthetic:rate=20,hours=8,seed=1,jobs=160", round_s=60.0)]
    if not args.quick:
        # 10,000 jobs over ~2.5 days: about 170 jobs/h keeps a 2,048-GPU cluster busy but not swamped
        configs.append(RunConfig(cluster=BIG_CLUSTER, trace=f"synthetic:rate=170,hours={10000 / 170!r},seed=2,"
                                 "kind=rigid-duration", jobs=10000, round_s=60.0))
    rows = []
    with progress_bar(len(configs), "sim_speed", unit="cases") as advance:
        for cfg in configs:
            rows.append(measure(cfg))
            advance()
    for r in rows:
        print(f"{r['jobs']:>6} jobs on {r['gpus']:>5} GPUs: {r['wall_s']:8.2f} s wall, "
              f"{r['sim_s_per_wall_s']:>10.0f} simulated s per wall s ({r['rounds']} rounds)", file=sys.stderr)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
