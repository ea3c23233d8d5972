"""Hops (SoCC'24) Table 3: Hops, Sia and Gavel on the 64-GPU physical cluster (``hops-64``), 25 mixed jobs.

Every scheduler runs under Hops's latency-ratio queue, as the paper's baselines did; Gavel gets each job's
median requirement as a rigid count, Sia a configuration for each requirement. Sia runs twice: with its own
bootstrapped throughput estimates (its default) and with the simulator's true throughputs (``profiling=oracle``),
which Hops and Gavel use here. Gavel runs twice too: as Gavel (its greedy lease hand-out, passing over a job that
fits nowhere) and as the Hops paper ran it (``gavel-hops``: leases strictly in the queue's order, each gang on
one GPU type). The latency ratio and the fragments are given as the paper defines them (counted from the
waiting queue, which a job enters when its profile ends) and counted from submission. Four Hops rows switch one part off each: the service window, the priority
weighting (``lambda_fairness=0``, throughput alone), the plans inside a round and the sensitivity adjustment;
one gives a running job's configuration only a tie-breaking bonus (``keep_bonus=1e-6``), so that its plans move
jobs for any gain, however small (docs/hops.md, choice 9); one prices the configurations a job has not run on
by the formula as written, not scaled by the job's own records (``formula_correction=off``, choice 25).

    python experiments/hops_table3.py --workloads 3
"""

from __future__ import annotations

import sia_common as sc
from hops_common import RESTART_METRIC, queue_records, restart_cost

CLUSTER = "hops-64"
#: (tag, policy, settings): the rows of the table.
ROWS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("Hops", "hops", {}),
    ("Hops, no service window", "hops", {"service_window": "off"}),
    ("Hops, lambda 0", "hops", {"lambda_fairness": "0"}),
    ("Hops, one plan per round", "hops", {"multi_plan": "off"}),
    ("Hops, no sensitivity adjustment", "hops", {"sensitivity_adjustment": "off"}),
    ("Hops, ties only (keep_bonus 1e-6)", "hops", {"keep_bonus": "1e-6"}),
    ("Hops, formula uncorrected", "hops", {"formula_correction": "off"}),
    ("Sia (bootstrap)", "sia", {}),
    ("Sia (oracle)", "sia", {"profiling": "oracle"}),
    ("Gavel", "gavel", {}),
    ("Gavel (Hops paper)", "gavel-hops", {}),
)
#: The paper's Table 3: makespan (h), avg JCT (h), avg wait (h), max latency ratio, fragments per round.
PAPER = {"Hops": ("9.51", "3.2", "0.95", "0.37", "0.15"), "Sia": ("11.68", "4.41", "1.47", "1.03", "5.89"),
         "Gavel": ("14.46", "5.92", "2.11", "1.31", "3.36")}
#: The paper's definitions first: the latency ratio and the fragments counted from the waiting queue (a job
#: enters it when its profile ends, section 3.1), then the same counted from submission (any job not running).
METRICS = [("makespan_s", "makespan (h)", 3600.0, "{:.2f}"), ("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"),
           ("avg_wait_s", "avg wait (h)", 3600.0, "{:.2f}"),
           ("latency_ratio_max", "max LR (waiting queue)", 1.0, "{:.2f}"),
           ("latency_ratio_submit_max", "max LR (from submission)", 1.0, "{:.2f}"),
           ("fragments_waiting_per_round", "fragments/round (waiting queue)", 1.0, "{:.2f}"),
           ("fragments_per_round", "fragments/round (any job not running)", 1.0, "{:.2f}"),
           ("raqlr", "RAQLR", 1.0, "{:.3f}"), ("restarts_per_job", "restarts/job", 1.0, "{:.1f}"), RESTART_METRIC]
#: Which column each of the paper's figures stands under (its definitions: the waiting queue's).
PAPER_KEYS = ("makespan_s", "avg_jct_s", "avg_wait_s", "latency_ratio_max", "fragments_waiting_per_round")


def paper_row(name: str, figures: tuple[str, ...]) -> list[str]:
    """The paper's figures under the columns of their definitions, "-" elsewhere."""
    by_key = dict(zip(PAPER_KEYS, figures, strict=True))
    return [f"{name}, paper", "-", *(by_key.get(k, "-") for k, *_ in METRICS)]


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/hops_table3.json``: ``summary`` (mean ± std over the seeds per row, with
    the paper's figure under each scheduler's name)."""
    records = queue_records(data)
    header, rows = sc.group_rows(records, metrics=METRICS)
    out = []
    for row in rows:
        out.append(row)
        paper = PAPER.get(row[0].split(" ")[0])
        if paper is not None and row[0] in ("Hops", "Sia (bootstrap)", "Gavel", "Gavel (Hops paper)"):
            out.append(paper_row(row[0].split(" ")[0], paper))
    return {"summary": sc.table(header, out)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=3, name="hops_table3")
    args = p.parse_args()
    specs = [sc.spec(policy, CLUSTER, f"hops-table3:seed={w}", settings=settings, seed=w, tuned=False, tag=tag,
                     ordering=None if policy == "hops" else "latency-ratio", extract=restart_cost)
             for w in range(1, args.workloads + 1) for tag, policy, settings in ROWS]
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    sc.finish("hops_table3", args, records, tables)


if __name__ == "__main__":
    main()
