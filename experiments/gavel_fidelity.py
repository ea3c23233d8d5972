"""Gavel as Gavel's code has it, against each deviation this toolkit used to make: table 3.3's Gavel+TunedJobs rows.

Philly workloads ``sia-philly:1..N@tuned`` on ``sia-hetero-64`` with Gavel's 360 s rounds, once with the
``gavel`` allocation's defaults (Gavel's code: raw throughputs profiled offline, proportional max-min
reference, equal-share isolated throughput and accumulated isolated time in finish-time fairness) and once
per deviation option, for each of Gavel's objectives. Prints average JCT (hours, mean ± std over workloads)
and writes, as JSON, the provenance of :func:`dlsched.sim.about.provenance` (commit, dirty, dlsched version,
every run's resolved configuration in ``configs``) and each run's summary (``runs[i]`` ran ``configs[i]``).

    python experiments/gavel_fidelity.py --workloads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

CLUSTER = "sia-hetero-64"
ROUND_S = 360.0
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "gavel_fidelity.json"
#: (objective, variant name, settings beyond the objective). The first variant of each objective is Gavel's.
VARIANTS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("max-sum-throughput", "gavel", {}),
    ("max-sum-throughput", "normalize_throughputs", {"normalize_throughputs": "on"}),
    ("max-sum-throughput", "throughputs=bootstrap", {"throughputs": "bootstrap"}),
    ("max-sum-throughput", "both (before)", {"normalize_throughputs": "on", "throughputs": "bootstrap"}),
    ("max-min", "gavel", {}),
    ("max-min", "maxmin_reference=max-min-lp", {"maxmin_reference": "max-min-lp"}),
    ("max-min", "throughputs=bootstrap", {"throughputs": "bootstrap"}),
    ("finish-time-fairness", "gavel", {}),
    ("finish-time-fairness", "ftf_isolated=max-min-lp", {"ftf_isolated": "max-min-lp"}),
    ("finish-time-fairness", "ftf_age=wall-clock", {"ftf_age": "wall-clock"}),
    ("finish-time-fairness", "throughputs=bootstrap", {"throughputs": "bootstrap"}),
    ("finish-time-fairness", "all three (before)",
     {"ftf_isolated": "max-min-lp", "ftf_age": "wall-clock", "throughputs": "bootstrap"}),
)



def configs(workloads: int) -> list[Any]:
    """One RunConfig per (variant, workload); the label names the variant."""
    from dlsched.sim.config import RunConfig

    return [RunConfig(policy="gavel", cluster=CLUSTER, trace=f"sia-philly:{w}@tuned", round_s=ROUND_S, seed=0,
                      trace_seed=0, settings={"objective": objective, **extra}, label=f"{objective} | {name}")
            for objective, name, extra in VARIANTS for w in range(1, workloads + 1)]


def table(runs: list[dict[str, Any]]) -> str:
    """Average JCT per variant (hours, mean ± std over workloads) and its change against Gavel's defaults."""
    by_label: dict[str, list[float]] = {}
    for r in runs:
        by_label.setdefault(r["config"]["label"], []).append(r["summary"]["avg_jct_s"] / 3600.0)
    lines = ["| objective | variant | avg JCT (h) | per workload | vs gavel |", "|---|---|---|---|---|"]
    base: dict[str, float] = {}
    for objective, name, _ in VARIANTS:
        xs = by_label[f"{objective} | {name}"]
        mean = statistics.fmean(xs)
        base.setdefault(objective, mean)
        std = statistics.stdev(xs) if len(xs) > 1 else 0.0
        change = "-" if name == "gavel" else f"{100 * (mean / base[objective] - 1):+.0f}%"
        lines.append(f"| {objective} | {name} | {mean:.2f} ± {std:.2f} | {' '.join(f'{x:.2f}' for x in xs)} "
                     f"| {change} |")
    return "\n".join(lines)


def tables(data: dict[str, Any]) -> dict[str, str]:
    """The experiment's table from its result file (``experiments/results/gavel_fidelity.json``)."""
    return {"table": table([{**run, "config": cfg} for run, cfg in zip(data["runs"], data["configs"], strict=True)])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", type=int, default=8, help="Philly workloads 1..N (default 8)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--out", type=Path, default=OUT, help=f"JSON result file (default {OUT.relative_to(ROOT)})")
    args = p.parse_args()

    from dlsched.sim.about import provenance, write_run_results
    from dlsched.sim.run import run_many

    provenance()  # the code as it is now, at the start: what the runs will run, whatever the checkout does later
    t0 = time.perf_counter()
    records = run_many(configs(args.workloads), workers=args.workers)
    payload = write_run_results(args.out, "gavel_fidelity", records, cluster=CLUSTER, round_s=ROUND_S,
                                workloads=args.workloads)
    print(tables(payload)["table"])
    print(f"\n{len(records)} runs, {(time.perf_counter() - t0) / 60:.1f} min")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
