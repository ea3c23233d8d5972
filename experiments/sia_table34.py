"""Thesis table 3.4: Sia vs Pollux vs Gavel+TunedJobs on the homogeneous 64-GPU cluster (16 t4 nodes), Philly.

    python experiments/sia_table34.py --workloads 3
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-homo-64"
POLICIES = ("sia", "pollux", "gavel")
#: Thesis table 3.4 (avg JCT h, p99 JCT h, makespan h, GPU-h/job) and restarts per job from its text.
THESIS = {"sia": ("1.9", "18.1", "21.4", "8.4", "2.6"), "pollux": ("2.0", "19.3", "21.7", "8.6", "5.1"),
          "gavel": ("4.3", "37.1", "44.3", "15.3", "-")}


def specs(n: int) -> list[dict]:
    return [sc.spec(pol, CLUSTER, f"sia-philly:{w}", tag=sc.NAMES[pol])
            for w in range(1, n + 1) for pol in POLICIES]


def tables(data: dict) -> dict[str, str]:
    """The experiment's tables, from its result file (``experiments/results/sia_table34.json``)."""
    records = sc.records_of(data)
    header, rows = sc.group_rows(records)
    inv = {v: k for k, v in sc.NAMES.items()}
    header.append("thesis (avg / p99 / makespan / GPU-h / restarts)")
    for row in rows:
        row.append(" / ".join(THESIS[inv[row[0]]]) if row[0] in inv else "-")

    def ratio(a: str, b: str, i: int) -> float | None:
        x, y = THESIS[a][i], THESIS[b][i]
        return None if "-" in (x, y) else float(x) / float(y)
    pairs = {("Sia", sc.NAMES[o]): (ratio("sia", o, 0), ratio("sia", o, 2), ratio("sia", o, 4))
             for o in ("pollux", "gavel")}
    return {"table": sc.table(header, rows), "comparison": sc.comparison(records, pairs), "best": sc.best(records)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=3, name="sia_table34")
    args = p.parse_args()
    records = sc.run_all(specs(args.workloads), workers=args.workers, force=args.force)
    for text in tables(sc.write_results("sia_table34", args, records)).values():
        print(text + "\n")
    print(f"simulation time (sum over runs): {sc.total_wall(records) / 60:.1f} min")


if __name__ == "__main__":
    main()
