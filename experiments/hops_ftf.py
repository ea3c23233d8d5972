"""Hops (SoCC'24) section 4.4 and figure 12: finish-time fairness on ``hops-512`` with 500 jobs.

Hops ranks its queue by projected finish-time fairness (``--ordering finish-time-fairness``) with
``lambda_fairness`` 2, the value the paper found best; Sia runs with its own fairness knob at the thesis's
p = -0.5 and lambda = 1.1 (its defaults) and Gavel as in Table 4, both under the latency-ratio queue; Hops
under its latency-ratio queue is the reference. Both Hops rows run the estimator without its server layer
(``server_layer=off``), which keeps the planner on its server-class ILP; see ``HOPS``. The metric is Sia's heterogeneous rho (thesis eq. 3.6), as
section 4.4 says: its maximum and the share of jobs with rho > 1 (paper's maximum rho: Hops 2.15, Sia 28.27,
Gavel 32.01).

    python experiments/hops_ftf.py --workloads 1
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "hops-512"
#: Hops's estimator without its server layer: with it, the servers it tells apart split the planner's server
#: classes, and a Hops run on hops-512 takes this machine 30-45 minutes (docs/results.md, Table 4).
HOPS = {"server_layer": "off"}
#: (tag, policy, ordering, settings): the rows of the figure.
ROWS: tuple[tuple[str, str, str | None, dict[str, str]], ...] = (
    ("Hops, FTF priority, lambda 2", "hops", "finish-time-fairness", {"lambda_fairness": "2", **HOPS}),
    ("Hops, latency ratio", "hops", None, HOPS),
    ("Sia", "sia", "latency-ratio", {}),
    ("Gavel", "gavel", "latency-ratio", {}),
)
#: The paper's largest rho per scheduler (section 4.4).
PAPER = {"Hops, FTF priority, lambda 2": "2.15", "Sia": "28.27", "Gavel": "32.01"}
METRICS = [("ftf_max", "max rho", 1.0, "{:.2f}"), ("ftf_unfair_frac", "rho > 1", 1.0, "{:.3f}"),
           ("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"), ("latency_ratio_max", "max LR", 1.0, "{:.2f}")]


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/hops_ftf.json``: ``summary`` (mean ± std over the seeds per row, the
    paper's largest rho under each scheduler it reports)."""
    header, rows = sc.group_rows(sc.records_of(data), metrics=METRICS)
    out = []
    for row in rows:
        out.append(row)
        if row[0] in PAPER:
            out.append([f"{row[0]}, paper", "-", PAPER[row[0]], "-", "-", "-"])
    return {"summary": sc.table(header, out)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=1, name="hops_ftf")
    args = p.parse_args()
    specs = [sc.spec(policy, CLUSTER, f"hops:jobs=500,rate=100,seed={w}", seed=w, tuned=False, tag=tag,
                     ordering=ordering, settings=settings)
             for w in range(1, args.workloads + 1) for tag, policy, ordering, settings in ROWS]
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    sc.finish("hops_ftf", args, records, tables)


if __name__ == "__main__":
    main()
