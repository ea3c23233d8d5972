"""Thesis table 3.4: Sia, Pollux, and Shockwave, Themis, Gavel with TunedJobs, on 16 t4 nodes (64 GPUs), Philly.

    python experiments/sia_table34.py --workloads 3
    python experiments/sia_table34.py --workloads 3 --policies shockwave,themis
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-homo-64"
POLICIES = ("sia", "pollux", "shockwave", "themis", "gavel")
#: Thesis table 3.4 (avg JCT h, p99 JCT h, makespan h, GPU-h/job) and restarts per job from its text.
THESIS = {"sia": ("1.9", "18.1", "21.4", "8.4", "2.6"), "pollux": ("2.0", "19.3", "21.7", "8.6", "5.1"),
          "shockwave": ("3.6", "32.8", "35.0", "12.5", "-"), "themis": ("5.4", "44.7", "49.7", "17.2", "-"),
          "gavel": ("4.3", "37.1", "44.3", "15.3", "-")}


def specs(n: int, policies: tuple[str, ...] = POLICIES) -> list[dict]:
    return [sc.spec(pol, CLUSTER, f"sia-philly:{w}", tag=sc.NAMES[pol])
            for w in range(1, n + 1) for pol in policies]


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=3)
    p.add_argument("--policies", default=",".join(POLICIES),
                   help=f"comma-separated subset of {', '.join(POLICIES)} (default: all)")
    args = p.parse_args()
    chosen = tuple(x.strip() for x in args.policies.split(",") if x.strip())
    unknown = [x for x in chosen if x not in POLICIES]
    if unknown or not chosen:
        p.error(f"--policies: unknown policy '{unknown[0] if unknown else ''}' (one of: {', '.join(POLICIES)})")
    records = sc.run_all(specs(args.workloads, chosen), workers=args.workers, force=args.force)
    header, rows = sc.group_rows(records)
    inv = {v: k for k, v in sc.NAMES.items()}
    header.append("thesis (avg / p99 / makespan / GPU-h / restarts)")
    for row in rows:
        row.append(" / ".join(THESIS[inv[row[0]]]))
    print(sc.table(header, rows))
    print(f"\nsimulation time (sum over runs): {sc.total_wall(records) / 60:.1f} min")
    sc.write_json(args.json, [r for r in records if r is not None])


if __name__ == "__main__":
    main()
