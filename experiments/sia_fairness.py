"""Thesis section 3.5.5: finish-time fairness (worst FTF ratio rho, fraction of jobs with rho > 1) per scheduler.

Reuses the table 3.3 runs (same specs, so cached runs are not repeated): Philly and Saturn workloads on
``sia-hetero-64``. The thesis (Helios traces) reports worst rho Sia 1.2, Pollux 4.6, Gavel 27.8 and unfair
fractions Sia <0.3%, Pollux 28%, Gavel 15%; Shockwave (figure 3.7, with TunedJobs) 3.3 and 14%. Shockwave and
Themis (not in the figure) run on the same workloads with TunedJobs.

    python experiments/sia_fairness.py --workloads 8 --saturn 3
"""

from __future__ import annotations

import sia_common as sc
import sia_table33

THESIS = {"Sia": ("1.2", "<0.3%"), "Pollux": ("4.6", "28%"), "Gavel+TJ": ("27.8", "15%"),
          "Shockwave+TJ": ("3.3", "14%")}
#: Fair schedulers run on the table 3.3 workloads besides its policies.
MARKETS = ("shockwave", "themis")
METRICS = [("ftf_max", "worst rho", 1.0, "{:.2f}"), ("ftf_unfair_frac", "unfair frac", 0.01, "{:.1f}%"),
           ("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}")]


def market_specs(philly: int, saturn: int) -> list[dict]:
    """Shockwave and Themis (TunedJobs) on the workloads of table 3.3, tagged as its rows are."""
    return [sc.spec(pol, sia_table33.CLUSTER, f"sia-{family}:{w}", tag=f"{family}/{sc.NAMES[pol]}")
            for family, n in (("philly", philly), ("saturn", saturn)) for w in range(1, n + 1) for pol in MARKETS]


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=8)
    p.add_argument("--saturn", type=int, default=3, help="number of Saturn workloads (default 3)")
    args = p.parse_args()
    runs = sia_table33.specs(args.workloads, args.saturn) + market_specs(args.workloads, args.saturn)
    records = sc.run_all(runs, workers=args.workers, force=args.force)
    header, rows = sc.group_rows(records, metrics=METRICS)
    header.append("thesis, Helios (worst rho / unfair)")
    for row in rows:
        row.append(" / ".join(THESIS.get(row[0].split("/")[1], ("-", "-"))))
    print(sc.table(header, rows))
    sc.write_json(args.json, [r for r in records if r is not None])


if __name__ == "__main__":
    main()
