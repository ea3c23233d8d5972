"""Thesis table 3.3: Sia vs Pollux vs Gavel+TunedJobs on the heterogeneous 64-GPU cluster.

Philly (``sia-philly:N``) and Helios-Saturn (``sia-saturn:N``, the thesis's "Helios" rows) workloads on ``sia-hetero-64``:
average and p99 JCT, makespan, GPU-hours per job and restarts per job, mean ± std over workloads.

    python experiments/sia_table33.py --workloads 8 --saturn 3
    python experiments/sia_table33.py --workloads 3 --saturn 2 --calibration none sia-artifact

Each row names the world calibration profile it ran under (``--calibration``, default: every profile).
"""

from __future__ import annotations

import sia_common as sc
from sia_table34 import EXTRA_METRICS, add_calibration_arg

CLUSTER = "sia-hetero-64"
POLICIES = ("sia", "pollux", "gavel")
#: Thesis table 3.3 (avg JCT h, p99 JCT h, makespan h, GPU-h/job, restarts/job). ``sia-saturn:N`` are the
#: Sia artifact's 8-hour, 160-job samples of Helios-Saturn, i.e. the thesis's "Helios" rows (its 48-hour
#: "newTrace" is not in the data); Philly rows are the 8 busiest-hours Philly workloads.
THESIS = {
    ("philly", "sia"): ("0.6 ± 0.1", "9.5", "14.2 ± 1.9", "4.0 ± 0.7", "2.9"),
    ("philly", "pollux"): ("1.0 ± 0.1", "14.9", "24.5 ± 7.9", "5.6 ± 1.1", "5.8"),
    ("philly", "gavel"): ("1.9 ± 0.3", "30.0", "33.8 ± 8.6", "9.0 ± 6.3", "5.7"),
    ("saturn", "sia"): ("0.7 ± 0.1", "10.9", "14.9 ± 1.7", "4.8 ± 0.7", "3.4"),
    ("saturn", "pollux"): ("1.0 ± 0.2", "15.0", "25.5 ± 8.0", "5.9 ± 0.7", "5.3"),
    ("saturn", "gavel"): ("2.5 ± 0.9", "38.7", "43.0 ± 10.9", "12.1 ± 3.7", "7.5"),
}


def specs(philly: int, saturn: int, cluster: str = CLUSTER, calibrations: tuple[str, ...] | None = None,
          policies: tuple[str, ...] = POLICIES) -> list[dict]:
    """Every (calibration, family, workload, policy); without ``calibrations`` the cluster's default world."""
    out = []
    for cal in calibrations or (None,):
        world = {} if cal is None else {"world": {"calibration": cal}}
        suffix = "" if cal is None else f" [{cal}]"
        for family, n in (("philly", philly), ("saturn", saturn)):
            for w in range(1, n + 1):
                for pol in policies:
                    out.append(sc.spec(pol, cluster, f"sia-{family}:{w}", tag=f"{family}/{sc.NAMES[pol]}{suffix}",
                                       **world))
    return out


def report(records: list[dict | None], thesis: dict | None = THESIS) -> str:
    header, rows = sc.group_rows(records, metrics=sc.METRICS + EXTRA_METRICS)
    if thesis:
        header = [*header, "thesis (avg / p99 / makespan / GPU-h / restarts)"]
        inv = {v: k for k, v in sc.NAMES.items()}
        for row in rows:
            family, name = row[0].split(" [")[0].split("/")
            t = thesis.get((family, inv.get(name, name)))
            row.append(" / ".join(t) if t else "-")
    return sc.table(header, rows)


def tables(data: dict) -> dict[str, str]:
    """The experiment's tables and derived sentences, from its result file (``experiments/results/sia_table33.json``)."""
    records = sc.records_of(data)
    suffixes = dict.fromkeys(r["spec"]["tag"][len(r["spec"]["tag"].split(" [")[0]):] for r in records if r)
    pairs = {(f"{a}{suffix}", f"{b}{suffix}"): ratios for suffix in suffixes for (a, b), ratios in THESIS_RATIOS.items()}
    items = [(f"{fam} {sc.NAMES[pol]}", f"{fam}/{sc.NAMES[pol]}", key, THESIS[(fam, pol)][i])
             for fam, pol in THESIS
             for i, key in enumerate(("avg_jct_s", "p99_jct_s", "makespan_s", "gpu_hours_per_job", "restarts_per_job"))]
    return {"table": report(records), "comparison": sc.comparison(records, pairs), "best": sc.best(records),
            "fidelity": sc.paper_vs_ours(records, items)}


#: Thesis table 3.3 ratios the text compares with: (tag A, tag B) -> A / B for avg JCT, makespan, restarts/job.
THESIS_RATIOS = {(f"{fam}/Sia", f"{fam}/{sc.NAMES[other]}"): tuple(
    sc.paper_number(THESIS[(fam, "sia")][i]) / sc.paper_number(THESIS[(fam, other)][i])
    for i in (0, 2, 4))
    for fam in ("philly", "saturn") for other in ("pollux", "gavel")}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=8, name="sia_table33")
    p.add_argument("--saturn", type=int, default=3, help="number of Saturn workloads (default 3)")
    add_calibration_arg(p, POLICIES)
    args = p.parse_args()
    records = sc.run_all(specs(args.workloads, args.saturn, calibrations=tuple(args.calibration),
                               policies=tuple(args.policies)),
                         workers=args.workers, force=args.force)
    sc.finish("sia_table33", args, records, tables)


if __name__ == "__main__":
    main()
