"""Thesis table 3.4: Sia, Pollux, and Shockwave, Themis, Gavel with TunedJobs, on 16 t4 nodes (64 GPUs), Philly.

    python experiments/sia_table34.py --workloads 3
    python experiments/sia_table34.py --workloads 3 --calibration none sia-artifact
    python experiments/sia_table34.py --workloads 3 --policies shockwave themis
    python experiments/sia_table34.py --workloads 3 --policies shockwave --shockwave-variant sia-artifact

Each row names the world calibration profile it ran under (``--calibration``, default: every profile).
``--shockwave-variant sia-artifact`` runs Shockwave as the thesis's artifact ported it (its row is named
``Shockwave+TJ (sia-artifact)``; docs/fidelity.md, "Shockwave as the thesis ran it").
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-homo-64"
POLICIES = ("sia", "pollux", "shockwave", "themis", "gavel")
#: Thesis table 3.4 (avg JCT h, p99 JCT h, makespan h, GPU-h/job) and restarts per job from its text.
THESIS = {"sia": ("1.9", "18.1", "21.4", "8.4", "2.6"), "pollux": ("2.0", "19.3", "21.7", "8.6", "5.1"),
          "shockwave": ("3.6", "32.8", "35.0", "12.5", "-"), "themis": ("5.4", "44.7", "49.7", "17.2", "-"),
          "gavel": ("4.3", "37.1", "44.3", "15.3", "-")}


#: Beside the thesis's metrics: queueing and load, which say how strongly a slower world lengthens JCTs.
EXTRA_METRICS = [("avg_wait_s", "wait (min)", 60.0, "{:.0f}"), ("contention_avg", "contention", 1.0, "{:.1f}")]


#: Shockwave's variants (``--shockwave-variant``); the default is the Shockwave paper's formulation.
SHOCKWAVE_VARIANTS = ("paper", "sia-artifact")


def _shockwave(variant: str) -> tuple[dict[str, str], str]:
    """Settings and row-name suffix of a Shockwave variant (none for the paper's, so its cached runs stand)."""
    if variant == "paper":
        return {}, ""
    from dlsched.policies.markets.shockwave_artifact import SCRIPT_SETTINGS

    return dict(SCRIPT_SETTINGS), f" ({variant})"


def specs(n: int, calibrations: tuple[str, ...] = ("none",), policies: tuple[str, ...] = POLICIES,
          shockwave_variant: str = "paper") -> list[dict]:
    """Every (calibration, workload, policy); the calibration is named explicitly, so it is in the cache key."""
    out = []
    for cal in calibrations:
        for w in range(1, n + 1):
            for pol in policies:
                settings, suffix = _shockwave(shockwave_variant) if pol == "shockwave" else ({}, "")
                out.append(sc.spec(pol, CLUSTER, f"sia-philly:{w}", settings=settings,
                                   tag=f"{sc.NAMES[pol]}{suffix} [{cal}]", world={"calibration": cal}))
    return out


def add_calibration_arg(p, policies: tuple[str, ...] = POLICIES) -> None:
    """``--calibration`` (world profiles to run under) and ``--policies`` (a subset of ``policies``)."""
    from dlsched.world.calibration import profile_names

    p.add_argument("--calibration", nargs="+", choices=profile_names(), default=list(profile_names()),
                   help="world calibration profiles to run under (default: all)")
    p.add_argument("--policies", nargs="+", choices=policies, default=list(policies),
                   help=f"policies to run (default: {' '.join(policies)})")


def tables(data: dict) -> dict[str, str]:
    """The experiment's tables, from its result file (``experiments/results/sia_table34.json``)."""
    records = sc.records_of(data)
    header, rows = sc.group_rows(records, metrics=sc.METRICS + EXTRA_METRICS)
    inv = {v: k for k, v in sc.NAMES.items()}
    header.append("thesis (avg / p99 / makespan / GPU-h / restarts)")
    for row in rows:
        name = row[0].split(" [")[0].split(" (")[0]
        row.append(" / ".join(THESIS[inv[name]]) if inv.get(name) in THESIS else "-")

    def ratio(a: str, b: str, i: int) -> float | None:
        x, y = THESIS[a][i], THESIS[b][i]
        return None if "-" in (x, y) else float(x) / float(y)
    calibrations = dict.fromkeys(r["spec"]["tag"].split(" [")[1].rstrip("]") for r in records if r is not None)
    pairs = {(f"Sia [{cal}]", f"{sc.NAMES[o]} [{cal}]"): (ratio("sia", o, 0), ratio("sia", o, 2), ratio("sia", o, 4))
             for cal in calibrations for o in ("pollux", "gavel")}
    bases = dict.fromkeys(str(r["spec"]["tag"]).split(" [")[0] for r in records if r is not None)
    items = [(base, base, key, THESIS[pol][i]) for pol in THESIS for base in bases
             if base.split(" (")[0] == sc.NAMES[pol]
             for i, key in enumerate(("avg_jct_s", "p99_jct_s", "makespan_s", "gpu_hours_per_job", "restarts_per_job"))
             if THESIS[pol][i] != "-"]
    return {"table": sc.table(header, rows), "comparison": sc.comparison(records, pairs), "best": sc.best(records),
            "fidelity": sc.paper_vs_ours(records, items)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=3, name="sia_table34")
    add_calibration_arg(p)
    p.add_argument("--shockwave-variant", choices=SHOCKWAVE_VARIANTS, default="paper",
                   help="Shockwave's formulation: the paper's (default) or the Sia artifact's port")
    args = p.parse_args()
    records = sc.run_all(specs(args.workloads, tuple(args.calibration), tuple(args.policies),
                               args.shockwave_variant), workers=args.workers, force=args.force)
    sc.finish("sia_table34", args, records, tables)


if __name__ == "__main__":
    main()
