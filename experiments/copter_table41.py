"""Thesis table 4.1 and figure 4.5 (COpter): average JCT, makespan and policy time per round of Sia's
allocation solved by LP*, POP-16 and the continual method, at the scale this machine can finish.

The thesis runs ``copter-10k`` (10,240 GPUs, 40k jobs) and ``copter-25k`` (25,600 GPUs, 100k jobs) over 24
hours. A loaded 2-core machine cannot simulate those three times over, so this experiment runs the same
cluster shape at 1x, ``benchmarks/clusters/copter-256.yaml`` (one 256-GPU block of the seven types), with
the COpter workload at the thesis's arrival rate per GPU (40k jobs per 10,240 GPUs per day: about 42 jobs
an hour on 256 GPUs), by default 500 jobs over 12 hours (``--jobs``, ``--hours``). Sia's allocation is
solved three ways (``--set solver=...``):

* ``LP*``: the relaxation solved from scratch every round (HiGHS), then the shim;
* ``POP-16``: 16 random sub-problems solved as MILPs, in one process here (its policy time is the sum of the
  parts; the thesis's is the slowest part on 16 cores);
* ``COpter``: the continual method (proximal point, warm-started; at most 15 proximal steps of eta 100 per
  round, its defaults), then the shim;
* ``COpter (eta 10)``: the same with ``prox_eta=10``, shorter steps: a 15-step round then leaves moves of
  small gain partly made, so they land rounds later or never and fewer jobs restart than under LP*
  (docs/continual.md); this row shows how much that changes the average JCT.

LP* and COpter use the same shim: the thesis's, then the fill and upgrade passes (``shim_fill``,
``shim_upgrade``). Policy time is the measured time of the whole scheduling round (Sia's options and
goodput estimates included), its CDF summarised by the median, p90, p99 and maximum.

``--cluster copter-10k`` (or ``copter-25k``) runs the thesis's own cluster; with ``--hours`` shorter than
the thesis's 24 h and ``--jobs`` at its rate per hour, it is the first hours of the thesis's workload, and
the table says so.

    python experiments/copter_table41.py                # 500 jobs over 12 h on 256 GPUs
    python experiments/copter_table41.py --jobs 1000 --hours 24
    python experiments/copter_table41.py --cluster copter-10k --jobs 5000 --hours 3 --json experiments/results/copter_table41_10k.json
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import sia_common as sc

CLUSTER = str(Path(__file__).resolve().parents[1] / "benchmarks" / "clusters" / "copter-256.yaml")
#: GPUs of the clusters ``--cluster`` takes, for the table's label.
GPUS = {"copter-256": "256", "copter-10k": "10,240", "copter-25k": "25,600"}
SHIM = {"shim_fill": "true", "shim_upgrade": "true"}
#: (tag, Sia settings): the rows of the table.
ROWS: tuple[tuple[str, dict[str, str]], ...] = (
    ("LP*", {"solver": "lpstar", **SHIM}),
    ("POP-16", {"solver": "pop-16"}),
    ("COpter", {"solver": "continual", **SHIM}),
    ("COpter (eta 10)", {"solver": "continual", "prox_eta": "10", **SHIM}),
)
#: The thesis's table 4.1 at 25,600 GPUs and 100k jobs: avg JCT (h), makespan (h), p99 policy time (s).
THESIS_25K = {"LP*": ("0.35", "29.3", "2277"), "POP-16": ("0.39", "30.9", "66.5"), "COpter": ("0.36", "29.4", "40.3")}
METRICS = [("avg_jct_s", "avg JCT (h)", 3600.0, "{:.3f}"), ("makespan_s", "makespan (h)", 3600.0, "{:.2f}"),
           ("policy_p50_s", "policy p50 (s)", 1.0, "{:.3f}"), ("policy_p90_s", "policy p90 (s)", 1.0, "{:.3f}"),
           ("policy_p99_s", "policy p99 (s)", 1.0, "{:.3f}"), ("policy_max_s", "policy max (s)", 1.0, "{:.3f}")]


def policy_times(records: Any) -> dict[str, Any]:
    """The CDF of policy time per round (rounds with jobs to schedule), summarised."""
    t = np.array([r.policy_s for r in records.rounds if r.active_jobs > 0])
    if not len(t):
        return {}
    return {"policy_p50_s": float(np.percentile(t, 50)), "policy_p90_s": float(np.percentile(t, 90)),
            "policy_p99_s": float(np.percentile(t, 99)), "policy_max_s": float(t.max()),
            "policy_rounds": len(t)}


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/copter_table41.json``: ``summary`` (ours, mean ± std over the seeds, and the
    thesis's 25k-GPU figures) and ``jct_vs_lpstar`` (each row's average JCT over LP*'s, and its restarts per
    job, ``restarts_per_job``: what makes the rows differ)."""
    records = sc.records_of(data)
    header, rows = sc.group_rows(records, metrics=METRICS)
    args = data.get("args", {})
    gpus = GPUS.get(args.get("cluster") or "copter-256", args.get("cluster"))
    scale = f"ours, {gpus} GPUs, {args.get('jobs')} jobs / {args.get('hours')} h"
    out = [[f"{row[0]} ({scale})", *row[1:]] for row in rows]
    for tag, (jct, mk, p99) in THESIS_25K.items():
        out.append([f"{tag} (thesis, 25,600 GPUs, 100k jobs / 24 h)", "-", jct, mk, "-", "-", p99, "-"])
    jct: dict[str, list[float]] = {}
    restarts: dict[str, list[float]] = {}
    for r in records:
        if r is not None and r["summary"].get("avg_jct_s") is not None:
            jct.setdefault(r["spec"]["tag"], []).append(r["summary"]["avg_jct_s"])
            if r["summary"].get("restarts_per_job") is not None:
                restarts.setdefault(r["spec"]["tag"], []).append(r["summary"]["restarts_per_job"])
    ref = float(np.mean(jct["LP*"])) if jct.get("LP*") else None
    ratio = [[tag, "-" if ref is None else f"{float(np.mean(v)) / ref:.4f}",
              f"{float(np.mean(restarts[tag])):.2f}" if restarts.get(tag) else "-"] for tag, v in jct.items()]
    return {"summary": sc.table(header, out),
            "jct_vs_lpstar": sc.table(["method", "avg JCT / LP*'s", "restarts per job"], ratio)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=1, name="copter_table41")
    p.add_argument("--jobs", type=int, default=500, help="jobs in the COpter workload (default 500)")
    p.add_argument("--hours", type=float, default=12.0, help="its arrival window, hours (default 12)")
    p.add_argument("--cluster", choices=sorted(GPUS), default="copter-256",
                   help="copter-256 (one block, default), or the thesis's copter-10k / copter-25k")
    p.add_argument("--rows", nargs="+", choices=[tag for tag, _ in ROWS], default=[tag for tag, _ in ROWS],
                   metavar="ROW", help="rows to run (default: all; " + ", ".join(repr(t) for t, _ in ROWS) + ")")
    args = p.parse_args()
    cluster = CLUSTER if args.cluster == "copter-256" else args.cluster
    specs = [sc.spec("sia", cluster, f"copter:jobs={args.jobs},hours={args.hours:g},seed={w}", settings=settings,
                     seed=w, tuned=False, tag=tag, extract=policy_times)
             for w in range(1, args.workloads + 1) for tag, settings in ROWS if tag in args.rows]
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    sc.finish("copter_table41", args, records, tables)


if __name__ == "__main__":
    main()
