"""Hops on its section 3.5 estimator against the simulator's truth, on Table 3's cluster (``hops-64``).

Four Hops rows on each ``hops-table3`` workload: the default (throughputs from the estimator over its
multi-layer store, new jobs profiled first), the same without the server entity layer (per-type
throughputs only), the same with the formula as written below the records (``formula_correction=off``),
and ``throughputs=oracle`` (the simulator's true throughput per shape, nominal hosts,
no profiling), which the Table 3 experiment's first results used.

    python experiments/hops_estimator.py --workloads 3
"""

from __future__ import annotations

import sia_common as sc
from hops_common import RESTART_METRIC, restart_cost

CLUSTER = "hops-64"
#: (tag, settings of the hops allocation): the rows of the table.
ROWS: tuple[tuple[str, dict[str, str]], ...] = (
    ("Hops (estimator)", {"throughputs": "estimator"}),
    ("Hops (estimator, no server layer)", {"throughputs": "estimator", "server_layer": "off"}),
    ("Hops (estimator, formula uncorrected)", {"throughputs": "estimator", "formula_correction": "off"}),
    ("Hops (oracle)", {"throughputs": "oracle"}),
)
METRICS = [("makespan_s", "makespan (h)", 3600.0, "{:.2f}"), ("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"),
           ("avg_wait_s", "avg wait (h)", 3600.0, "{:.2f}"), ("latency_ratio_max", "max LR", 1.0, "{:.2f}"),
           ("fragments_per_round", "fragments/round", 1.0, "{:.2f}"),
           ("restarts_per_job", "restarts/job", 1.0, "{:.1f}"), RESTART_METRIC]


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/hops_estimator.json``: ``summary`` (mean ± std over the workloads)."""
    header, rows = sc.group_rows(sc.records_of(data), metrics=METRICS)
    return {"summary": sc.table(header, rows)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=3, name="hops_estimator")
    args = p.parse_args()
    specs = [sc.spec("hops", CLUSTER, f"hops-table3:seed={w}", settings=settings, seed=w, tuned=False, tag=tag,
                     extract=restart_cost)
             for w in range(1, args.workloads + 1) for tag, settings in ROWS]
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    sc.finish("hops_estimator", args, records, tables)


if __name__ == "__main__":
    main()
