"""Hops (SoCC'24) Table 4: Hops, Sia and Gavel on the simulated 512-GPU cluster (``hops-512``), 500 jobs.

The trace is ``hops:jobs=500,rate=100,seed=S`` (Poisson arrivals at 100 jobs per hour). Sia and Gavel run
under Hops's latency-ratio queue, as the paper's baselines did (Gavel rigid at each job's median
requirement, Sia with a configuration for every requirement); Gavel runs twice, with its greedy lease hand-out
and as the Hops paper ran it (``gavel-hops``: leases strictly in the queue's order, each gang on one GPU type).
The latency ratio and the fragments are given as the paper defines them (from the waiting queue, which a job
enters when its profile ends) and counted from submission. Hops reads its section 3.5 estimator (the
default, ``throughputs=estimator``). Four Hops rows switch one part off each to show its share of the gain:
the service window, the sensitivity adjustment, the plans inside a round and the estimator's server entity
layer (``server_layer=off``: per-type throughputs only). One row reads the simulator's truth instead
(``throughputs=oracle``). Every row pays the world's checkpoint-restore delay per restart (30 s for these
models; the tables' "restart cost (s)" column); the last row switches it off (``world.restart_delay_scale=0``)
to show what restarts cost Hops, whose ILP replans running jobs every round.

The rows Hops is measured by (``Hops``, ``Sia``, ``Gavel``, ``Gavel (Hops paper)``) run on trace seeds
1..N (``--seeds``); the rows that switch a part of Hops off, on seeds 1..M (``--ablation-seeds``, default N),
each compared with the full Hops on the same seeds.

    python experiments/hops_table4.py --seeds 5 --ablation-seeds 1
"""

from __future__ import annotations

import sia_common as sc
from hops_common import EARLIER_FRAGMENTS, RESTART_METRIC, queue_records, restart_cost

CLUSTER = "hops-512"
#: (tag, policy, settings): the rows of the table.
ROWS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("Hops", "hops", {}),
    ("Hops, no service window", "hops", {"service_window": "off"}),
    ("Hops, no sensitivity adjustment", "hops", {"sensitivity_adjustment": "off"}),
    ("Hops, one plan per round", "hops", {"multi_plan": "off"}),
    ("Hops, no server layer", "hops", {"server_layer": "off"}),
    ("Hops (oracle throughputs)", "hops", {"throughputs": "oracle"}),
    ("Sia", "sia", {}),
    ("Gavel", "gavel", {}),
    ("Gavel (Hops paper)", "gavel-hops", {}),
    ("Hops, restart cost off", "hops", {"world.restart_delay_scale": "0"}),
)
#: The rows every seed runs; the others are ablations (``--ablation-seeds``).
MAIN_ROWS = ("Hops", "Sia", "Gavel", "Gavel (Hops paper)")
#: The paper's Table 4: makespan (h), avg JCT (h), avg wait (h), max latency ratio, fragments per round.
PAPER = {"Hops": ("10.48", "2.24", "0.87", "3.22", "0.45"), "Sia": ("12.36", "3.79", "1.68", "78.5", "56"),
         "Gavel": ("15.42", "4.04", "2.24", "70.43", "18")}
METRICS = [("makespan_s", "makespan (h)", 3600.0, "{:.2f}"), ("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"),
           ("avg_wait_s", "avg wait (h)", 3600.0, "{:.2f}"),
           ("latency_ratio_max", "max LR (waiting queue)", 1.0, "{:.2f}"),
           ("latency_ratio_submit_max", "max LR (from submission)", 1.0, "{:.2f}"),
           ("fragments_waiting_per_round", "fragments/round (waiting queue)", 1.0, "{:.2f}"),
           ("fragments_per_round", "fragments/round (any job not running)", 1.0, "{:.2f}"),
           ("raqlr", "RAQLR", 1.0, "{:.3f}"),
           ("restarts_per_job", "restarts/job", 1.0, "{:.1f}"),
           ("latency_ratio_best_max", "max LR (best type)", 1.0, "{:.2f}"), RESTART_METRIC, EARLIER_FRAGMENTS]
#: Which column each of the paper's figures stands under (its definitions: the waiting queue's).
PAPER_KEYS = ("makespan_s", "avg_jct_s", "avg_wait_s", "latency_ratio_max", "fragments_waiting_per_round")
#: The baselines Hops is measured against.
BASELINES = ("Sia", "Gavel", "Gavel (Hops paper)")


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/hops_table4.json``: ``summary`` (mean ± std over the seeds per row, with
    the paper's figure under each scheduler's name), ``must_show`` (Hops against each baseline: the
    ratios the issue asks for) and ``shares`` (each part of Hops switched off, against the full Hops)."""
    records = queue_records(data)
    header, rows = sc.group_rows(records, metrics=METRICS)
    out = []
    for row in rows:
        out.append(row)
        paper = PAPER.get("Gavel" if row[0] == "Gavel (Hops paper)" else row[0])
        if paper is not None:  # each figure under the column of the paper's definition
            by_key = dict(zip(PAPER_KEYS, paper, strict=True))
            out.append([f"{row[0]}, paper", "-", *(by_key.get(k, "-") for k, *_ in METRICS)])
    return {"summary": sc.table(header, out), "must_show": must_show(records), "shares": shares(records)}


def _mean_of(records: list[dict | None], tag: str, key: str, seeds: set[int] | None = None) -> float | None:
    """The mean of summary ``key`` over the runs of row ``tag`` (on trace ``seeds`` when given; None when no
    run has it)."""
    return sc.mean(r["summary"].get(key) for r in records if r is not None and r["spec"]["tag"] == tag
                   and (seeds is None or r["summary"].get("seed") in seeds))


def _seeds_of(records: list[dict | None], tag: str) -> set[int]:
    return {int(r["summary"]["seed"]) for r in records if r is not None and r["spec"]["tag"] == tag}


def must_show(records: list[dict | None]) -> str:
    """Hops against Sia and Gavel, the issue's must-show: each baseline's largest latency ratio and fragments
    per round over Hops's (the issue asks for 10x or more) and how much lower Hops's average JCT is (20% or
    more), from the means over the seeds each row ran. Fragments are given both ways: the paper's count, over
    the waiting queue (``fragments_waiting_per_round``: a job enters it when its profile ends), then with every
    job not running counted as waiting (``fragments_per_round``); a run made before a count existed shows "-"."""
    keys = ("latency_ratio_max", "fragments_waiting_per_round", "fragments_per_round", "avg_jct_s")
    # a run made before waits were counted from the waiting queue: its own counts, said in the last column
    earlier = ("latency_ratio_submit_max", EARLIER_FRAGMENTS[0], "fragments_per_round", "avg_jct_s")
    rows = []
    for hops_tag in ("Hops", "Hops, no server layer", "Hops (oracle throughputs)"):
        counted = "waiting queue"
        if _mean_of(records, hops_tag, keys[0]) is None and _mean_of(records, hops_tag, earlier[0]) is not None:
            counted = "from submission; earlier fragment count"
        used = keys if counted == "waiting queue" else earlier
        hops = dict(zip(keys, (_mean_of(records, hops_tag, k) for k in used), strict=True))
        for base in BASELINES:
            other = dict(zip(keys, (_mean_of(records, base, k) for k in used), strict=True))
            if any(hops[k] is None or other[k] is None for k in (keys[0], keys[3])):
                continue
            cells = []
            for k in keys[:3]:
                if hops[k] is None or other[k] is None:
                    cells.append("-")
                    continue
                h, o = float(hops[k]), float(other[k])  # type: ignore[arg-type]
                cells.append(f"{o:.2f} / {h:.2f} = {o / h:.1f}x" if h > 0 else f"{o:.2f} / 0")
            jct = 1.0 - float(hops["avg_jct_s"]) / float(other["avg_jct_s"])  # type: ignore[arg-type]
            rows.append([hops_tag, base, *cells, f"{jct:.0%}", counted])
    return sc.table(["Hops row", "baseline", "max LR, baseline / Hops",
                     "fragments/round (waiting queue), baseline / Hops",
                     "fragments/round (any job not running), baseline / Hops", "Hops's avg JCT lower by",
                     "waits counted"], rows)


#: The rows that switch one part of Hops off, and the part each one names.
ABLATIONS = (("Hops, no service window", "service window"),
             ("Hops, no sensitivity adjustment", "sensitivity adjustment"),
             ("Hops, one plan per round", "plans within a round"),
             ("Hops, no server layer", "server layer"))


def shares(records: list[dict | None]) -> str:
    """Each part's share of Hops's gain: for every row that switches one part off, its makespan, average JCT,
    largest latency ratio and fragments per round against the full Hops's (the difference in brackets), and
    the share of Hops's average-JCT lead over each baseline the part accounts for, (row - Hops) / (baseline
    - Hops); "-" where Hops has no lead. Every mean is over the trace seeds the row ran."""
    keys = (("makespan_s", 3600.0), ("avg_jct_s", 3600.0), ("latency_ratio_max", 1.0),
            ("fragments_waiting_per_round", 1.0), ("fragments_per_round", 1.0))
    rows = []
    for tag, part in ABLATIONS:
        seeds = _seeds_of(records, tag)
        full = {k: _mean_of(records, "Hops", k, seeds) for k, _ in keys}
        leads = {}
        for base in BASELINES:
            got, mine = _mean_of(records, base, "avg_jct_s", seeds), full["avg_jct_s"]
            leads[base] = got - mine if got is not None and mine is not None else None
        row = {k: _mean_of(records, tag, k) for k, _ in keys}
        cells = []
        for k, scale in keys:
            h, m = full[k], row[k]
            cells.append("-" if h is None or m is None else f"{m / scale:.2f} ({(m - h) / scale:+.2f})")
        for lead in leads.values():
            h, m = full["avg_jct_s"], row["avg_jct_s"]
            ok = lead is not None and lead > 0 and h is not None and m is not None
            cells.append(f"{(m - h) / lead:.1%}" if ok else "-")  # type: ignore[operator]
        if row["avg_jct_s"] is not None:
            rows.append([part, tag, str(len(seeds)), *cells])
    return sc.table(["part off", "row", "seeds", "makespan (h)", "avg JCT (h)", "max LR", "fragments/round (waiting queue)",
                     "fragments/round (any job not running)",
                     *(f"share of JCT lead over {base}" for base in BASELINES)], rows)


def row_spec(tag: str, seed: int) -> dict:
    """The run of row ``tag`` on trace seed ``seed`` (``benchmarks/sim_speed.py`` times the same runs)."""
    policy, settings = next((p, s) for t, p, s in ROWS if t == tag)
    return sc.spec(policy, CLUSTER, f"hops:jobs=500,rate=100,seed={seed}", seed=seed, tuned=False, tag=tag,
                   ordering=None if policy == "hops" else "latency-ratio", extract=restart_cost,
                   settings={k: v for k, v in settings.items() if not k.startswith("world.")},
                   world={k.removeprefix("world."): v for k, v in settings.items() if k.startswith("world.")})


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=1, name="hops_table4")
    p.add_argument("--ablation-seeds", type=int, default=None,
                   help="trace seeds 1..M of the rows that switch a part of Hops off (default: --seeds)")
    p.add_argument("--rows", default="", help="only these rows (tags separated by ';', as tags hold commas), "
                                                 "e.g. 'Hops;Sia'")
    args = p.parse_args()
    ablation_seeds = args.workloads if args.ablation_seeds is None else args.ablation_seeds
    if not 0 <= ablation_seeds <= args.workloads:
        p.error(f"--ablation-seeds: {ablation_seeds} is not in 0..{args.workloads} (--seeds)")
    wanted = {t.strip() for t in args.rows.split(";") if t.strip()}
    unknown = wanted - {tag for tag, _, _ in ROWS}
    if unknown:
        p.error(f"--rows: no row {', '.join(sorted(unknown))} (rows: {'; '.join(tag for tag, _, _ in ROWS)})")
    specs = [row_spec(tag, w) for w in range(1, args.workloads + 1) for tag, _, _ in ROWS
             if (not wanted or tag in wanted) and (tag in MAIN_ROWS or w <= ablation_seeds)]
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    sc.finish("hops_table4", args, records, tables)


if __name__ == "__main__":
    main()
