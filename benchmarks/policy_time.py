"""Policy run time per scheduling round at 64, 512 and 2,048 GPUs (thesis section 3.5.7, figure 3.10).

Each measurement simulates a policy on ``sia-hetero-64`` scaled by K (every node group K times larger: 6K t4
nodes of 4, 3K rtx and 2K a100 nodes of 8) with the Sia ``scale`` workload of matching load
(``sia-scale:scale_Kx:1``: K times the jobs of a 64-GPU Philly-like trace over the same eight hours; the
64-GPU case uses ``sia-philly:1``). The engine times every call of the policy; the figures are the median and
99th percentile over rounds that had at least one active job, after ``--warmup-h`` hours (the cluster fills
up first) and up to ``--hours`` simulated hours.

Policies are listed in :data:`POLICIES`; a name that is not registered (yet) is skipped with a note on stderr,
so rows for Pollux and Gavel appear as soon as those policies are registered. A measurement that runs past
``--max-wall-s`` (a slow policy at 2,048 GPUs) is cut short and reports the rounds simulated so far
(``"truncated": true``). Policies that report a breakdown in ``Decision.info`` (keys ``<policy>.<part>_s``)
get ``<part>_median_s`` columns; Sia's ``estimator_s`` is the goodput models' update (the fitting Sia's
adaptive executors do on the jobs' side), and ``without_estimator_median_s`` the rest of the round.

Prints a human line per measurement on stderr, then one JSON object per line per measurement on stdout
with keys ``policy``, ``gpus``, ``median_s``, ``p99_s`` (and a few more).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from dlsched.policies import SCHEDULERS
from dlsched.sim.config import RunConfig
from dlsched.sim.run import StopRun, simulate

#: Policies to time; unregistered names are skipped (add Pollux, Gavel ... here as they land).
POLICIES = ["sia", "pollux", "gavel"]
#: Cluster scale factors K (GPUs = 64 K).
SCALES = [1, 8, 32]
#: Largest scale timed by default per policy: Pollux's genetic search takes seconds per round at 512 GPUs and
#: minutes at 2,048 (the scaling wall the thesis describes), so it stops at K=8 unless ``--all-scales``.
MAX_SCALE = {"pollux": 8}
BASE_CLUSTER = "sia-hetero-64"
#: Every policy is timed at the same round length, so rounds are comparable across policies.
ROUND_S = 60.0


def trace_for(k: int, workload: int) -> str:
    return f"sia-philly:{workload}" if k == 1 else f"sia-scale:scale_{k}x:{workload}"


def measure(policy: str, k: int, *, hours: float, warmup_h: float, workload: int,
            settings: dict[str, str] | None = None, max_wall_s: float | None = None) -> dict:
    trace = trace_for(k, workload)
    config = RunConfig(cluster=BASE_CLUSTER, cluster_scale=k, trace=trace, policy=policy, settings=settings or {},
                       round_s=ROUND_S, max_time_s=hours * 3600.0)
    t0 = time.perf_counter()

    def guard(t: float, done: int, total: int) -> None:
        if max_wall_s is not None and time.perf_counter() - t0 > max_wall_s:
            raise StopRun  # a slow policy: measure the rounds simulated within the budget

    infos: dict[float, dict[str, float]] = {}  # each round's Decision.info (Sia reports its own breakdown there)
    records = simulate(config, on_progress=guard, on_decision=lambda view, d: infos.__setitem__(view.time_s,
                                                                                                   dict(d.info)))
    truncated = not records.complete
    wall = time.perf_counter() - t0
    cluster_gpus = records.num_gpus
    rounds = records.rounds
    end_s = rounds[-1].time_s + ROUND_S if rounds else 0.0
    start = warmup_h * 3600.0 if any(r.time_s >= warmup_h * 3600.0 for r in rounds) else 0.0
    rows = [r for r in rounds if r.active_jobs > 0 and r.time_s >= start] or [r for r in rounds if r.active_jobs > 0]
    if not rows:
        return {"bench": "policy_time", "policy": policy, "gpus": cluster_gpus, "trace": trace, "rounds": 0,
                "median_s": None, "p99_s": None, "wall_s": round(wall, 1), "truncated": truncated}
    times = np.array([r.policy_s for r in rows], dtype=float)
    active = np.array([r.active_jobs for r in rows], dtype=float)
    out = {"bench": "policy_time", "policy": policy, "gpus": cluster_gpus, "trace": trace,
           "rounds": int(len(times)), "median_s": round(float(np.median(times)), 5),
           "p99_s": round(float(np.percentile(times, 99)), 5), "mean_s": round(float(times.mean()), 5),
           "max_s": round(float(times.max()), 5), "active_jobs_median": float(np.median(active)),
           "active_jobs_max": int(active.max()), "sim_hours": round(end_s / 3600.0, 2),
           "wall_s": round(wall, 1), "truncated": truncated}
    # the policy's own breakdown, when it reports one: e.g. Sia's estimator update (model fitting, which Sia's
    # adaptive executors do on the jobs' side) versus building and solving the optimisation problem
    parts = [infos[r.time_s] for r in rows if r.time_s in infos]
    prefix = f"{policy}."
    keys = sorted({k for d in parts for k in d if k.startswith(prefix) and k.endswith("_s")})
    for k in keys:
        vals = np.array([d.get(k, 0.0) for d in parts], dtype=float)
        out[f"{k[len(prefix):-2]}_median_s"] = round(float(np.median(vals)), 5)
    if parts and f"{prefix}estimator_s" in keys:
        rest = np.array([r.policy_s - infos[r.time_s].get(f"{prefix}estimator_s", 0.0) for r in rows
                         if r.time_s in infos], dtype=float)
        out["without_estimator_median_s"] = round(float(np.median(rest)), 5)
        out["without_estimator_p99_s"] = round(float(np.percentile(rest, 99)), 5)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policy names")
    ap.add_argument("--scales", default=",".join(map(str, SCALES)), help="cluster scale factors K (64 K GPUs)")
    ap.add_argument("--hours", type=float, default=3.0, help="simulated hours per measurement")
    ap.add_argument("--warmup-h", type=float, default=1.0, help="hours before rounds are counted")
    ap.add_argument("--workload", type=int, default=1, help="workload number of the traces")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="Sia tunable")
    ap.add_argument("--all-scales", action="store_true", help="time every policy at every scale")
    ap.add_argument("--max-wall-s", type=float, default=900.0,
                    help="wall-clock budget per measurement; a slower run is cut short and measured so far")
    args = ap.parse_args(argv)
    settings = dict(s.split("=", 1) for s in args.set)
    rows = []
    for policy in [p.strip() for p in args.policies.split(",") if p.strip()]:
        if policy not in SCHEDULERS:
            print(f"policy '{policy}' is not registered; skipped", file=sys.stderr)
            continue
        for k in [int(x) for x in args.scales.split(",") if x.strip()]:
            if not args.all_scales and k > MAX_SCALE.get(policy, k):
                print(f"{policy} at {64 * k} GPUs skipped (use --all-scales)", file=sys.stderr)
                continue
            row = measure(policy, k, hours=args.hours, warmup_h=args.warmup_h, workload=args.workload,
                          settings=settings if policy == "sia" else None, max_wall_s=args.max_wall_s)
            if not row["rounds"]:
                print(f"{policy:>8} {row['gpus']:>5} GPUs: no round with an active job within the budget",
                      file=sys.stderr)
                rows.append(row)
                continue
            print(f"{row['policy']:>8} {row['gpus']:>5} GPUs: median {row['median_s'] * 1e3:8.1f} ms, "
                  f"p99 {row['p99_s'] * 1e3:8.1f} ms over {row['rounds']} rounds "
                  f"(median {row['active_jobs_median']:.0f} active jobs; {row['wall_s']} s wall)",
                  file=sys.stderr, flush=True)
            rows.append(row)
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
