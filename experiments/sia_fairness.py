"""Thesis section 3.5.5: finish-time fairness (worst FTF ratio rho, fraction of jobs with rho > 1) per scheduler.

Rows are ``family/scheduler/reading``: the trace family (``philly`` = ``sia-philly:N``; ``helios`` =
``sia-saturn:N``, the Sia artifact's Helios-Saturn samples, the family of the thesis's figure 3.7), the scheduler
on ``sia-hetero-64``, and the reading of the metric (``RunConfig.ftf``, docs/fidelity.md "Finish-time
fairness"): ``text`` follows eq. 3.6 as written, ``started`` also charges the isolated run the start-up of a
round-based scheduler, ``artifact`` is the Sia artifact's combination (whole-cluster share per type, mean of
isolated times). Every run reports every reading, so readings are rows of the same runs (those of table 3.3),
not more runs. The thesis reports figure 3.7 only (Helios): worst rho Sia 1.2, Pollux 4.6, Gavel 27.8 and
unfair fractions Sia <0.3%, Pollux 28%, Gavel 15%, Shockwave (TunedJobs) 3.3 and 14%; Themis is not in the
figure. For Philly it gives no fairness numbers.

    python experiments/sia_fairness.py --workloads 2 --saturn 2 --pollux 1 --workers 1
    python experiments/sia_fairness.py --workloads 2 --saturn 2 --pollux 0 --p=-1,-0.5,0.5,1 --workers 1
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-hetero-64"
#: Schedulers compared (Gavel, Shockwave and Themis run TunedJobs, see sia_common.TUNED).
POLICIES = ("sia", "pollux", "gavel", "shockwave", "themis")
#: Trace family -> named trace of workload N.
FAMILIES = {"philly": "sia-philly:{}", "helios": "sia-saturn:{}"}
#: Readings of the metric -> ``FtfDefinition.label`` (share/combine/isolated). Every run reports all of them
#: (``summary["ftf_readings"]``), so a reading is a column of one run, not another run.
READINGS = {
    "text": "type/ratio/ideal",
    "started": "type/ratio/started",
    "artifact": "cluster/time/ideal",
    "artifact+started": "cluster/time/started",
}
#: Figure 3.7 (Helios): (worst rho, unfair fraction).
THESIS = {("helios", "Sia"): ("1.2", "<0.3%"), ("helios", "Pollux"): ("4.6", "28%"),
          ("helios", "Gavel+TJ"): ("27.8", "15%"), ("helios", "Shockwave+TJ"): ("3.3", "14%")}
#: Sia's default fairness knob (thesis section 3.4.3: p = -0.5); a p row at it reuses the default run.
SIA_DEFAULT_P = -0.5
METRICS = [("ftf_max", "worst rho", 1.0, "{:.2f}"), ("ftf_unfair_frac", "unfair frac", 0.01, "{:.1f}%"),
           ("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}")]


def specs(philly: int, saturn: int, *, pollux: int | None = None, policies: tuple[str, ...] = POLICIES,
          p_values: tuple[str, ...] = ()) -> list[dict]:
    """Runs per family, workload and scheduler (the same runs as table 3.3's, so they are shared); Pollux
    (about 2 minutes a run) on its first ``pollux`` workloads per family only. ``p_values``: Sia again at each
    value of its fairness knob p."""
    from dlsched.clusters import cluster_file

    # the cluster's own calibration, named explicitly as table 3.3 names it, so the runs are table 3.3's
    world = {"calibration": cluster_file(CLUSTER).world.get("calibration", "none")}
    out = []
    for family, n in (("philly", philly), ("helios", saturn)):
        for w in range(1, n + 1):
            trace = FAMILIES[family].format(w)
            for pol in policies:
                if pol == "pollux" and pollux is not None and w > pollux:
                    continue
                out.append(sc.spec(pol, CLUSTER, trace, tag=f"{family}/{sc.NAMES.get(pol, pol)}", world=world))
            for p in p_values:
                if float(p) != SIA_DEFAULT_P:
                    out.append(sc.spec("sia", CLUSTER, trace, settings={"p": p}, tag=f"{family}/Sia p={p}",
                                       world=world))
    return out


def by_reading(records: list[dict | None], readings: tuple[str, ...]) -> list[dict | None]:
    """One record per (run, reading), tagged ``family/scheduler/reading``, with that reading's figures as
    ``ftf_max`` / ``ftf_unfair_frac``."""
    out: list[dict | None] = []
    for reading in readings:
        for r in records:
            if r is None:
                continue
            figures = r["summary"].get("ftf_readings", {}).get(READINGS[reading], {})
            out.append({"spec": {**r["spec"], "tag": f"{r['spec']['tag']}/{reading}"},
                        "summary": {**r["summary"], **figures}})
    return sorted(out, key=lambda r: r["spec"]["tag"].rsplit("/", 1)[0])  # type: ignore[index]


def _names(text: str, known: dict | tuple) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in names if x not in known]
    if bad:
        raise SystemExit(f"error: unknown {bad[0]!r} (known: {', '.join(known)})")
    return names


def tables(data: dict) -> dict[str, str]:
    """The experiment's table, from its result file (``experiments/results/sia_fairness.json``)."""
    readings = tuple(data["args"].get("readings", "text,started").split(","))
    header, rows = sc.group_rows(by_reading(sc.records_of(data), readings), metrics=METRICS)
    header.append("thesis fig. 3.7 (worst rho / unfair)")
    for row in rows:
        family, name = row[0].split("/")[:2]
        row.append(" / ".join(THESIS.get((family, name), ("-", "-"))))
    per_reading = by_reading(sc.records_of(data), readings)
    items = [(f"{family} {name}, {reading}", f"{family}/{name}/{reading}", key, cell)
             for (family, name), cells in THESIS.items() for reading in readings
             for key, cell in zip(("ftf_max", "ftf_unfair_frac"), cells, strict=True)]
    return {"table": sc.table(header, rows), "fidelity": sc.paper_vs_ours(per_reading, items, metrics=METRICS)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=8, name="sia_fairness")
    p.add_argument("--saturn", type=int, default=3, help="number of Helios-Saturn workloads (default 3)")
    p.add_argument("--pollux", type=int, default=None, help="Pollux on only the first N workloads per family")
    p.add_argument("--readings", default="text,started", help=f"comma-separated, of: {', '.join(READINGS)}")
    p.add_argument("--policies", default=",".join(POLICIES), help="comma-separated schedulers")
    p.add_argument("--p", default="", help="Sia's fairness knob p: comma-separated values to add (e.g. -1,0.5)")
    args = p.parse_args()
    readings = _names(args.readings, READINGS)
    policies = _names(args.policies, POLICIES)
    p_values = tuple(x.strip() for x in args.p.split(",") if x.strip())
    for x in p_values:
        try:
            float(x)
        except ValueError:
            raise SystemExit(f"error: --p: {x!r} is not a number") from None
    args.readings = ",".join(readings)
    records = sc.run_all(specs(args.workloads, args.saturn, pollux=args.pollux, policies=policies,
                               p_values=p_values), workers=args.workers, force=args.force)
    sc.finish("sia_fairness", args, records, tables)


if __name__ == "__main__":
    main()
