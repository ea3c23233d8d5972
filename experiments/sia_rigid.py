"""Thesis figure 3.1 (right): every job rigid (``@rigid``) on ``sia-hetero-64``, Sia vs Gavel (and Pollux).

Jobs keep the trace's GPU count and batch size; only the GPU type (and when to run) is the scheduler's. Gavel
runs the same rigid jobs (no TunedJobs: the point of the figure is that nobody adapts). The thesis reports Sia
about 25% better than Gavel here, with Pollux behind both.

    python experiments/sia_rigid.py --workloads 3 [--pollux]
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-hetero-64"


def specs(n: int, pollux: bool) -> list[dict]:
    pols = ("sia", "gavel", "pollux") if pollux else ("sia", "gavel")
    return [sc.spec(pol, CLUSTER, f"sia-philly:{w}@rigid", tuned=False, tag=pol)
            for w in range(1, n + 1) for pol in pols]


def tables(data: dict) -> dict[str, str]:
    """The experiment's table and Sia's gain over Gavel, from ``experiments/results/sia_rigid.json``."""
    records = sc.records_of(data)
    header, rows = sc.group_rows(records)
    avg = {row[0]: sc.mean(r["summary"]["avg_jct_s"] for r in records if r and r["spec"]["tag"] == row[0])
           for row in rows}
    sia, gavel = avg.get("sia"), avg.get("gavel")
    gain = "Sia or Gavel has no finished run."
    if sia is not None and gavel:
        change = 1 - sia / gavel
        gain = (f"Sia's average JCT is {100 * abs(change):.0f}% {'lower' if change >= 0 else 'higher'} than "
                "Gavel's (thesis: about 25% lower).")
    return {"table": sc.table(header, rows), "gain": gain}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=3, name="sia_rigid")
    p.add_argument("--pollux", action="store_true", help="also run Pollux on the rigid jobs")
    args = p.parse_args()
    records = sc.run_all(specs(args.workloads, args.pollux), workers=args.workers, force=args.force)
    sc.finish("sia_rigid", args, records, tables)


if __name__ == "__main__":
    main()
