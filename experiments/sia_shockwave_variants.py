"""Shockwave+TJ as the Shockwave paper describes it and as the Sia thesis ran it, beside Gavel+TJ (table 3.4's setting).

    python experiments/sia_shockwave_variants.py             # first 60 jobs of sia-philly:1@tuned, both worlds
    python experiments/sia_shockwave_variants.py --jobs 0    # the whole workload
    python experiments/sia_shockwave_variants.py --jobs 0 --rows sia-artifact gavel   # some rows only

On ``sia-homo-64`` with TunedJobs, under each world calibration: Shockwave's ``variant=paper`` (the
default), ``variant=sia-artifact`` with the artifact script's window and log points
(:data:`dlsched.policies.markets.shockwave_artifact.SCRIPT_SETTINGS`), and Gavel+TJ. The thesis has
Shockwave+TJ at 0.84 of Gavel+TJ's average JCT (3.6 against 4.3 h, table 3.4).
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-homo-64"
#: Thesis table 3.4: Shockwave+TJ's average JCT over Gavel+TJ's.
THESIS_RATIO = 3.6 / 4.3
EXTRA_METRICS = [("p50_jct_s", "p50 JCT (h)", 3600.0, "{:.2f}"), ("avg_wait_s", "wait (min)", 60.0, "{:.0f}"),
                 ("idle_while_waiting", "idle GPUs while jobs wait", 1.0, "{:.1f}"),
                 ("relaxed_share", "solves relaxed", 1.0, "{:.0%}")]


def plan_stats(records) -> dict[str, float | None]:
    """GPUs left idle in rounds where a job waits (mean over those rounds), and for Shockwave's sia-artifact
    variant the share of its solves whose fairness constraints were infeasible (None when not reported)."""
    waiting = [r.idle_gpus for r in records.rounds if r.queue_len > 0]
    relaxed = [r.info["shockwave.relaxed"] for r in records.rounds if "shockwave.relaxed" in r.info]
    return {"idle_while_waiting": sum(waiting) / len(waiting) if waiting else 0.0,
            "relaxed_share": sum(relaxed) / len(relaxed) if relaxed else None}


def variants() -> dict[str, dict[str, str]]:
    """Row name -> the Shockwave settings it runs with."""
    from dlsched.policies.markets.shockwave_artifact import SCRIPT_SETTINGS

    return {"paper": {}, "sia-artifact": dict(SCRIPT_SETTINGS)}


#: The rows: Shockwave's variants and Gavel+TJ.
ROWS = ("paper", "sia-artifact", "gavel")


def specs(workloads: int, jobs: int | None, calibrations: tuple[str, ...], rows: tuple[str, ...] = ROWS) -> list[dict]:
    """Every (calibration, workload, row); the calibration is named explicitly, so it is in the cache key."""
    out = []
    for cal in calibrations:
        for w in range(1, workloads + 1):
            trace = f"sia-philly:{w}"
            for name, settings in variants().items():
                if name not in rows:
                    continue
                out.append(sc.spec("shockwave", CLUSTER, trace, settings=settings, jobs=jobs, extract=plan_stats,
                                   tag=f"Shockwave+TJ {name} [{cal}]", world={"calibration": cal}))
            if "gavel" not in rows:
                continue
            out.append(sc.spec("gavel", CLUSTER, trace, jobs=jobs, tag=f"Gavel+TJ [{cal}]", extract=plan_stats,
                               world={"calibration": cal}))
    return out


def tables(data: dict) -> dict[str, str]:
    """The experiment's tables, from its result file (``experiments/results/sia_shockwave_variants.json``)."""
    records = sc.records_of(data)
    header, rows = sc.group_rows(records, metrics=sc.METRICS + EXTRA_METRICS)
    worlds = dict.fromkeys(r["spec"]["tag"].split(" [")[1].rstrip("]") for r in records if r is not None)
    pairs = {(f"Shockwave+TJ {name} [{w}]", f"Gavel+TJ [{w}]"): (THESIS_RATIO, None, None)
             for w in worlds for name in variants()}
    return {"table": sc.table(header, rows), "ratio": sc.comparison(records, pairs)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=1, name="sia_shockwave_variants")
    p.add_argument("--jobs", type=int, default=60, help="first N jobs of each workload (0: all; default 60)")
    from dlsched.world.calibration import profile_names

    p.add_argument("--calibration", nargs="+", choices=profile_names(), default=list(profile_names()),
                   help="world calibration profiles to run under (default: all)")
    p.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS), help="rows to run (default: all)")
    args = p.parse_args()
    if args.jobs < 0:
        p.error("--jobs must be 0 (all) or more")
    records = sc.run_all(specs(args.workloads, args.jobs or None, tuple(args.calibration), tuple(args.rows)),
                         workers=args.workers, force=args.force)
    sc.finish("sia_shockwave_variants", args, records, tables)


if __name__ == "__main__":
    main()
