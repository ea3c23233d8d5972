"""Thesis section 3.5.8: Sia's sensitivity to profiling, fairness p and round length (``sia-hetero-64``).

* profiling: bootstrap (default), oracle (true goodputs), none;
* p in {-1, -0.5 (default), 0.5, 1};
* round length 30, 60 (default), 300 s (thesis: 300 s raises avg JCT by 12%, 30 s also worse).

Philly workloads (the thesis used Helios for p); the default configuration is shared by the three sweeps.

    python experiments/sia_sensitivity.py --workloads 2
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-hetero-64"
VARIANTS: list[tuple[str, dict[str, str], float]] = [
    ("default (bootstrap, p=-0.5, 60s)", {}, 60.0),
    ("profiling=oracle", {"profiling": "oracle"}, 60.0),
    ("profiling=none", {"profiling": "none"}, 60.0),
    ("p=-1", {"p": "-1"}, 60.0),
    ("p=0.5", {"p": "0.5"}, 60.0),
    ("p=1", {"p": "1"}, 60.0),
    ("round=30s", {}, 30.0),
    ("round=300s", {}, 300.0),
]
METRICS = [*sc.METRICS, ("ftf_unfair_frac", "unfair frac", 0.01, "{:.1f}%")]


def specs(n: int) -> list[dict]:
    return [sc.spec("sia", CLUSTER, f"sia-philly:{w}", settings=st, round_s=rs, tag=name)
            for name, st, rs in VARIANTS for w in range(1, n + 1)]


def tables(data: dict) -> dict[str, str]:
    """The experiment's table, from its result file (``experiments/results/sia_sensitivity.json``)."""
    records = sc.records_of(data)
    header, rows = sc.group_rows(records, metrics=METRICS)
    base = sc.mean(r["summary"]["avg_jct_s"] for r in records if r and r["spec"]["tag"] == VARIANTS[0][0])
    header.append("avg JCT vs default")
    for row in rows:
        v = sc.mean(r["summary"]["avg_jct_s"] for r in records if r and r["spec"]["tag"] == row[0])
        row.append(f"{100 * (v / base - 1):+.0f}%" if v and base else "-")
    return {"table": sc.table(header, rows)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=2, name="sia_sensitivity")
    args = p.parse_args()
    records = sc.run_all(specs(args.workloads), workers=args.workers, force=args.force)
    sc.finish("sia_sensitivity", args, records, tables)


if __name__ == "__main__":
    main()
