"""Hops (SoCC'24) section 4: the priority ablation (LR, LAS, SJF, SRTF under the Hops planner) over arrival rates.

The Hops planner (service window, location-specific configurations, the priority-weighted ILP) runs with
each ordering in turn; under an ordering other than ``latency-ratio`` the ILP weighs queue positions
(docs/hops.md, choice 6). The paper runs this on ``hops-512`` with arrival rates 30, 60, 120, 300, 600 and
1,200 jobs per hour (trace ``hops:jobs=N,rate=R,seed=S``). ``--cluster``, ``--jobs`` and ``--rates`` run a
smaller slice (e.g. ``hops-64`` with the rates divided by 8, the cluster being 8 times smaller); the result
file records which.

    python experiments/hops_priority.py [--cluster hops-512] [--jobs 500] [--rates 30,60,120,300,600,1200]
"""

from __future__ import annotations

import sia_common as sc

#: (tag, ordering): the priorities compared.
ORDERINGS = (("LR", "latency-ratio"), ("LAS", "las"), ("SJF", "sjf"), ("SRTF", "srtf"))
METRICS = [("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"), ("avg_wait_s", "avg wait (h)", 3600.0, "{:.2f}"),
           ("makespan_s", "makespan (h)", 3600.0, "{:.2f}"), ("latency_ratio_max", "max LR", 1.0, "{:.2f}"),
           ("raqlr", "RAQLR", 1.0, "{:.3f}"), ("fragments_per_round", "fragments/round", 1.0, "{:.2f}")]


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/hops_priority.json``: ``summary``, one row per (priority, arrival rate)."""
    header, rows = sc.group_rows(sc.records_of(data), metrics=METRICS)
    args = data.get("args", {})
    title = f"cluster {args.get('cluster')}, {args.get('jobs')} jobs per trace"
    return {"summary": f"{title}\n\n{sc.table(header, rows)}"}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=1, name="hops_priority")
    p.add_argument("--cluster", default="hops-512", help="cluster preset (default hops-512)")
    p.add_argument("--jobs", type=int, default=500, help="jobs per trace (default 500)")
    p.add_argument("--rates", default="30,60,120,300,600,1200", help="arrival rates in jobs per hour")
    args = p.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    specs = [sc.spec("hops", args.cluster, f"hops:jobs={args.jobs},rate={rate:g},seed={w}", seed=w, tuned=False,
                     tag=f"{name} @ {rate:g}/h", ordering=ordering)
             for w in range(1, args.workloads + 1) for rate in rates for name, ordering in ORDERINGS]
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    sc.finish("hops_priority", args, records, tables)


if __name__ == "__main__":
    main()
