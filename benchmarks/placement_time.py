"""Placement time per scheduling round of PAL and PM-First, at 64 to 27,000 GPUs (PAL, SC'24, figure 18).

Each measurement times the placement stage alone (``place(view, plan)``) over a sequence of rounds. A
round's queue is a Synergy-style mix of jobs (Philly GPU demands, PAL's models) whose summed demand is
``load`` times the cluster, ordered FIFO and cut by the rigid-gang allocation, as in a saturated cluster;
between rounds a random fifth of the jobs finish and new ones arrive. GPU PM-scores are drawn from the
Longhorn profile (single runs, as PAL's simulator draws them) when the data directory is present and from a
log-normal spread otherwise. The first round of each policy includes binning the scores (K-Means with the
silhouette sweep, not cached from an earlier measurement), as PAL's worst case does.

Output: a table on stderr, then one JSON object per line and measurement on stdout with keys
``placement``, ``gpus``, ``median_s``, ``max_s`` (plus ``rounds``, ``jobs_per_round``, ``first_s``). With
``--out FILE`` the measurements also go to a result file with the provenance of
:func:`dlsched.sim.about.provenance`; ``tables(data)`` renders figure 18's table from it (``docs/results.md``).

    python benchmarks/placement_time.py [--sizes 64,256,1024,27000] [--rounds 20] [--load 1.3] [--out FILE]
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
from dlsched.estimators.classifier import PAL_MODEL_CLASSES
from dlsched.estimators.pm_scores import BINS
from dlsched.policies.allocation import RigidGang
from dlsched.policies.ordering import Fifo
from dlsched.policies.pal import PalPlacement, PmFirstPlacement

PAPER = {"pal": {256: (2.8, 4.0)}, "pm-first": {256: (None, 2.0)}}


def _scores(n: int, seed: int) -> dict[str, np.ndarray]:
    from dlsched.datadir import data_dir

    root = data_dir()
    if root is not None and (root / "pal" / "aggregated_data").is_dir():
        from dlsched.estimators.pm_scores import sample_runs

        return sample_runs("longhorn", n, seed=seed, data_dir=root).scores
    rng = np.random.default_rng(seed)
    spread = {"classA": 0.05, "classB": 0.015, "classC": 0.015, "classD": 0.002}
    return {c: np.exp(rng.normal(0.0, s, n)) for c, s in spread.items()}


def _job(i: int, rng: np.random.Generator, t: float) -> JobView:
    from dlsched.traces.synergy import TASK_MODELS
    from dlsched.traces.synthetic import philly_stats

    st = philly_stats()["num_gpus"]
    p = np.asarray(st["probs"]) / sum(st["probs"])
    gpus = int(rng.choice(st["values"], p=p))
    model = TASK_MODELS[int(rng.choice(3, p=[0.3, 0.6, 0.1]))][int(rng.integers(2))]
    spec = JobSpec(job_id=str(i), submit_time_s=t, model=model, num_gpus=gpus, iterations=1000.0,
                   adaptivity=Adaptivity.RIGID)
    return JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.empty(), batch_size=None, age_s=0.0,
                   wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                   start_time_s=None)


def measure(name: str, num_gpus: int, rounds: int, load: float, seed: int) -> dict:
    cluster = make_cluster(f"bench-{num_gpus}", [("v100", num_gpus // 4, 4)], {"v100": KNOWN_GPU_TYPES["v100"]})
    scores = _scores(cluster.num_gpus, seed)
    BINS.clear()  # the first round bins the scores, as a fresh scheduler would
    placement = PalPlacement(l_across=1.7) if name == "pal" else PmFirstPlacement()
    ordering, allocation = Fifo(), RigidGang()
    rng = np.random.default_rng(seed)
    jobs: list[JobView] = []
    next_id = 0
    times: list[float] = []
    per_round: list[int] = []
    for r in range(rounds):
        if jobs:  # a fifth of the queue finishes
            keep = rng.random(len(jobs)) >= 0.2
            jobs = [j for j, k in zip(jobs, keep, strict=True) if k]
        demand = sum(j.spec.num_gpus for j in jobs)
        while demand < load * cluster.num_gpus:
            j = _job(next_id, rng, float(r * 360 + next_id * 1e-3))
            next_id += 1
            if j.spec.num_gpus <= cluster.num_gpus:
                jobs.append(j)
                demand += j.spec.num_gpus
        view = ClusterView(time_s=r * 360.0, round_s=360.0, cluster=cluster, jobs=jobs, gpu_scores=scores,
                           model_class=PAL_MODEL_CLASSES)
        plan = allocation.allocate(view, ordering.order(view, jobs))
        t0 = time.perf_counter()
        decision = placement.place(view, plan)
        times.append(time.perf_counter() - t0)
        per_round.append(len(decision.allocations))
    return {"placement": name, "gpus": cluster.num_gpus, "median_s": statistics.median(times), "max_s": max(times),
            "first_s": times[0], "rounds": rounds, "jobs_per_round": statistics.median(per_round)}


#: PAL's figure 18 at 256 GPUs (seconds): PM-First's worst round, PAL's median and worst.
PAPER_256 = {"pm-first_max_s": 2.0, "pal_median_s": 2.8, "pal_max_s": 4.0}


def _ms(x: float) -> str:
    return f"{x * 1e3:.2g} ms" if x < 0.01 else f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.2f} s"


def tables(data: dict) -> dict[str, str]:
    """Figure 18's table from a result file written with ``--out``: per cluster size, jobs placed per round
    and each placement's median and worst round."""
    by = {(r["gpus"], r["placement"]): r for r in data["runs"]}
    sizes = sorted({g for g, _ in by})
    lines = ["| GPUs | jobs per round | PM-First median | PM-First worst | PAL median | PAL worst |", "|---|---|---|---|---|---|"]
    for n in sizes:
        pm, pal = by.get((n, "pm-first")), by.get((n, "pal"))
        cells = [_ms(r[k]) if r else "-" for r in (pm, pal) for k in ("median_s", "max_s")]
        jobs = (pm or pal or {}).get("jobs_per_round")
        lines.append(f"| {n:,} | {jobs:,.0f} | " + " | ".join(cells) + " |")
    lines.append(f"| paper, 256 | | | {PAPER_256['pm-first_max_s']:g} s | {PAPER_256['pal_median_s']:g} s | "
                 f"{PAPER_256['pal_max_s']:g} s |")
    targets = []
    for n, goal, key in ((256, 0.010, "median_s"), (27000, 1.0, "max_s")):
        got = [by[(n, p)][key] for p in ("pm-first", "pal") if (n, p) in by]
        if got:
            met = "met" if max(got) < goal else "not met"
            targets.append(f"{'median' if key == 'median_s' else 'worst round'} under {_ms(goal)} at {n:,} GPUs: "
                           f"{met} (slowest of the two: {_ms(max(got))})")
    return {"table": "\n".join(lines), "targets": "Targets: " + "; ".join(targets) + "."}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256,1024,27000")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--load", type=float, default=1.3, help="queued GPU demand over cluster size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the measurements, with provenance, to this JSON file")
    args = ap.parse_args(argv)
    from dlsched.sim.about import begin_measurements, finish_measurements

    begin_measurements(args.out)
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        for name in ("pm-first", "pal"):
            rows.append(measure(name, n, args.rounds, args.load, args.seed))
            r = rows[-1]
            print(f"{name:9s} {r['gpus']:6d} GPUs  median {r['median_s'] * 1e3:9.2f} ms  max {r['max_s'] * 1e3:9.2f} ms"
                  f"  first {r['first_s'] * 1e3:9.2f} ms  ({r['jobs_per_round']:.0f} jobs placed per round)",
                  file=sys.stderr, flush=True)
    finish_measurements(rows, args.out, "placement_time", args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
