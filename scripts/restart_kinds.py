"""Restarts of one run, by what changed: growth, shrinking, a change of GPU type, a move to other GPUs with
the same shape, or a resume after preemption; and the growth floor.

Why: ``restarts_per_job`` counts restarts as the thesis and the simulator of Sia's artifact do (a new
placement whose GPU type or per-node GPU counts differ, a resume included); ``checkpoint_restores_per_job``
counts every checkpoint-restore the engine charges, moves to other GPUs of the same shape included. This
script says how many of a run's checkpoint-restores are of each kind.

Growth floor: Sia starts every job on one GPU and at most doubles it per round (thesis, section 3.3.1), so a
job that ever holds k GPUs has restarted at least ceil(log2 k) times. The mean of that over the jobs is the
fewest restarts per job any run reaching the same job sizes can make; what a run makes above it is churn
(shrinking and growing again, moves).

    PYTHONPATH=src python scripts/restart_kinds.py --cluster sia-hetero-64 --trace sia-philly:1 \
        --policy sia --set profiling=oracle
"""

from __future__ import annotations

import argparse
import math
from collections import Counter

from dlsched.core import ClusterView, Decision
from dlsched.sim.config import RunConfig
from dlsched.sim.run import simulate

KINDS = ("grow", "shrink", "type", "reshape", "same-shape-move", "resume")


def classify(view: ClusterView, decision: Decision, counts: Counter[str]) -> None:
    """Add the round's restarts (new placements of jobs that have run before) to ``counts`` by kind."""
    cluster = view.cluster
    for job in view.jobs:
        alloc = decision.allocations.get(job.job_id)
        new = alloc.placement if alloc is not None else None
        if job.start_time_s is None or not new or new == job.placement:
            continue
        old = job.placement
        if not old:
            counts["resume"] += 1
        elif cluster.gpu_type_of[old.gpus[0]] != cluster.gpu_type_of[new.gpus[0]]:
            counts["type"] += 1
        elif len(new) != len(old):
            counts["grow" if len(new) > len(old) else "shrink"] += 1
        elif sorted(old.node_counts(cluster)) != sorted(new.node_counts(cluster)):
            counts["reshape"] += 1  # same type and count, split over nodes differently
        else:
            counts["same-shape-move"] += 1


def record_largest(view: ClusterView, decision: Decision, largest: dict[str, int]) -> None:
    """Keep each job's largest GPU count so far in ``largest``."""
    for job_id, alloc in decision.allocations.items():
        if alloc.placement:
            largest[job_id] = max(largest.get(job_id, 0), len(alloc.placement))


def growth_floor(largest: dict[str, int], jobs: int) -> float:
    """Fewest restarts per job that reach each job's largest GPU count by doubling from one GPU."""
    return sum(math.ceil(math.log2(k)) for k in largest.values() if k > 0) / max(jobs, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--policy", default="sia")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="policy tunable")
    args = ap.parse_args()
    settings = dict(item.split("=", 1) for item in args.set)
    counts: Counter[str] = Counter()
    largest: dict[str, int] = {}

    def observe(view: ClusterView, decision: Decision) -> None:
        classify(view, decision, counts)
        record_largest(view, decision, largest)

    run = simulate(RunConfig(cluster=args.cluster, trace=args.trace, policy=args.policy, settings=settings),
                   on_decision=observe)
    jobs = run.summary["jobs"]
    total = sum(counts.values())
    artifact = total - counts["same-shape-move"]
    print(f"{args.cluster} {args.trace} {args.policy} {settings}: "
          f"restarts_per_job={run.summary['restarts_per_job']:.2f} "
          f"checkpoint_restores_per_job={run.summary['checkpoint_restores_per_job']:.2f} "
          f"avg_jct_h={run.summary['avg_jct_s'] / 3600:.3f}")
    print("per job: " + ", ".join(f"{k}={counts[k] / jobs:.2f}" for k in KINDS))
    print(f"per job as the artifact's simulator counts (same-shape moves free; restarts_per_job): "
          f"{artifact / jobs:.2f}")
    print(f"growth floor per job (doubling from one GPU to each job's largest count): "
          f"{growth_floor(largest, jobs):.2f}")


if __name__ == "__main__":
    main()
