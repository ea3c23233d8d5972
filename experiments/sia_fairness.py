"""Thesis section 3.5.5: finish-time fairness (worst FTF ratio rho, fraction of jobs with rho > 1) per scheduler.

Reuses the table 3.3 runs (same specs, so cached runs are not repeated): Philly and Saturn workloads on
``sia-hetero-64``. The thesis (Helios traces) reports worst rho Sia 1.2, Pollux 4.6, Gavel 27.8 and unfair
fractions Sia <0.3%, Pollux 28%, Gavel 15%.

    python experiments/sia_fairness.py --workloads 8 --saturn 3
"""

from __future__ import annotations

import sia_common as sc
import sia_table33

THESIS = {"Sia": ("1.2", "<0.3%"), "Pollux": ("4.6", "28%"), "Gavel+TJ": ("27.8", "15%")}
METRICS = [("ftf_max", "worst rho", 1.0, "{:.2f}"), ("ftf_unfair_frac", "unfair frac", 0.01, "{:.1f}%"),
           ("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}")]


def tables(data: dict) -> dict[str, str]:
    """The experiment's table, from its result file (``experiments/results/sia_fairness.json``)."""
    header, rows = sc.group_rows(sc.records_of(data), metrics=METRICS)
    header.append("thesis, Helios (worst rho / unfair)")
    for row in rows:
        row.append(" / ".join(THESIS.get(row[0].split("/")[-1], ("-", "-"))))
    return {"table": sc.table(header, rows)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=8, name="sia_fairness")
    p.add_argument("--saturn", type=int, default=3, help="number of Saturn workloads (default 3)")
    args = p.parse_args()
    records = sc.run_all(sia_table33.specs(args.workloads, args.saturn), workers=args.workers, force=args.force)
    for text in tables(sc.write_results("sia_fairness", args, records)).values():
        print(text + "\n")


if __name__ == "__main__":
    main()
