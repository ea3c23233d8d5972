"""Gimbal figure 12 for all three objectives in two sharing worlds, and the sensitivity of Gimbal's gains to
the pair table and to the isolation share of MPS limits.

Figure 12 adds Gimbal's mechanisms one at a time to each base scheduler, each step keeping the one before:
the base (conservative packing: equal-size jobs only), **unequal packing** (the base scheduler relaxed,
``relaxed=true``), **+LISS** (lossless input-sample stealing: Gimbal with ``share_restriction=false``) and
**+LGRR** (low-level GPU resource restriction, MPS share limits: Gimbal in full). The paper reports, against
the base: JCT 1.05x / 1.18x / 1.28x (Lucid), jobs meeting deadlines 1.04x / 1.11x / 1.13x (Gandiva), makespan
1.01x / 1.1x / 1.11x (Gavel). Here every step runs on ``gimbal-16`` with the first 100 jobs of
``gimbal-philly:seed=S`` for seeds 1..N (``--seeds``), under each sharing world (``world.sharing_world``:
``old-gpus``, the Lucid/Gavel/PAL pair table; ``h200``, pairs measured on an H200, where two compute-bound
jobs sharing a GPU do 0.92 of the work of one after the other). Seed S also seeds the world (the runtime
monitor's measurement noise).

The sensitivity table asks how much of each gain (Lucid+Gimbal over Lucid for JCT, Gavel+Gimbal over Gavel for
makespan, Gandiva+Gimbal over Gandiva for deadlines) depends on the pair table and on ``world.mps_isolation``
(the share of a pair's interference that disjoint share limits remove: 0, the default 0.5, 1). The base
schedulers run with no share limits, which the isolation share does not touch, so only the Gimbal runs are
repeated per isolation share.

Every number is a mean over seeds with its standard deviation; a gain is the mean (and standard deviation)
of the per-seed ratios. Writes ``experiments/results/gimbal_ablation.json`` with the provenance of
:func:`dlsched.sim.about.provenance` (commit, dirty, every run's configuration, including each run's
``data.sharing``: how every pair and curve among the trace's models was found).

    python experiments/gimbal_ablation.py [--seeds 5] [--workers 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from gimbal_e2e import summaries_by_label

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "gimbal_ablation.json"
WORLDS = ("old-gpus", "h200")
ISOLATIONS = (0.0, 0.5, 1.0)
DEFAULT_ISOLATION = 0.5
#: objective -> (base scheduler, summary metric, whether higher is better, how the paper's figure names it)
OBJECTIVES: dict[str, tuple[str, str, bool, str]] = {
    "jct": ("lucid", "avg_jct_s", False, "avg JCT (h)"),
    "makespan": ("gavel-packing", "makespan_s", False, "makespan (h)"),
    "deadline": ("gandiva", "deadline_met_frac", True, "jobs meeting deadlines"),
}
#: (step, coordination, settings) of figure 12, each adding to the one before.
STEPS: tuple[tuple[str, str | None, dict[str, str]], ...] = (
    ("base", None, {}),
    ("unequal packing", None, {"relaxed": "true"}),
    ("+LISS", "gimbal", {"share_restriction": "false"}),
    ("+LGRR", "gimbal", {}),
)
#: Figure 12 (section 7.4), against the base scheduler.
PAPER = {"jct": {"unequal packing": 1.05, "+LISS": 1.18, "+LGRR": 1.28},
         "deadline": {"unequal packing": 1.04, "+LISS": 1.11, "+LGRR": 1.13},
         "makespan": {"unequal packing": 1.01, "+LISS": 1.1, "+LGRR": 1.11}}
JOBS = 100


def _label(objective: str, world: str, isolation: float, step: str) -> str:
    return f"{objective} | {world} | iso={isolation:g} | {step}"


def configs(seeds: int) -> list[Any]:
    from dlsched.sim.config import RunConfig

    out = []
    for seed in range(1, seeds + 1):
        for world in WORLDS:
            for objective, (base, *_) in OBJECTIVES.items():
                for isolation in ISOLATIONS:
                    for step, coord, extra in STEPS:
                        # only Gimbal's share limits feel the isolation share: other steps run once
                        if isolation != DEFAULT_ISOLATION and step != "+LGRR":
                            continue
                        settings = dict(extra)
                        if coord is not None:
                            settings["objective"] = objective
                        out.append(RunConfig(
                            policy=base, coordination=coord, cluster="gimbal-16", jobs=JOBS,
                            trace=f"gimbal-philly:seed={seed}", settings=settings, seed=0, world_seed=seed,
                            world={"sharing_world": world, "mps_isolation": isolation},
                            label=_label(objective, world, isolation, step)))
    return out



def _value(objective: str, summary: dict[str, Any]) -> float:
    _, key, higher, _ = OBJECTIVES[objective]
    v = float(summary[key])
    return v if higher else v / 3600.0


def _gain(objective: str, base: dict[str, Any], run: dict[str, Any]) -> float:
    """The run's improvement over the base on one seed (>1 is better)."""
    _, key, higher, _ = OBJECTIVES[objective]
    b, x = float(base[key]), float(run[key])
    return x / b if higher else b / x


def _ms(values: list[float], digits: int = 2) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {sd:.{digits}f}"


def _gains(by: dict[str, list[dict[str, Any]]], objective: str, world: str, isolation: float,
           step: str) -> list[float]:
    base = by[_label(objective, world, DEFAULT_ISOLATION, "base")]
    runs = by[_label(objective, world, isolation, step)]
    return [_gain(objective, b, r) for b, r in zip(base, runs, strict=True)]


def _provenance_table(data: dict[str, Any]) -> str:
    lines = ["| sharing world | pairs measured | through a stand-in | by rule | MPS curves measured | by rule |",
             "|---|---|---|---|---|---|"]
    seen = set()
    for cfg in data["configs"]:
        sharing = cfg.get("data", {}).get("sharing")
        if not sharing or sharing["world"] in seen:
            continue
        seen.add(sharing["world"])
        p, c = sharing["pairs"], sharing["mps_curves"]
        lines.append(f"| {sharing['world']} | {p['measured']} | {p['stand-in']} | {p['rule']} | {c['measured']} "
                     f"| {c['rule']} |")
    return "\n".join(lines) + ("\n\nPairs among the models of `gimbal-philly:seed=1`'s first 100 jobs (each "
                               "unordered pair once), as the run recorded them in `data.sharing`.")


def tables(data: dict[str, Any]) -> dict[str, str]:
    """Figure 12 per objective, the sensitivity of the gains and the worlds' provenance, from a result file."""
    by = summaries_by_label(data)
    seeds = data.get("seeds", 1)
    foot = f"\n\n`gimbal-16`, first {JOBS} jobs of `gimbal-philly:seed=S`, seeds 1..{seeds}: mean ± standard deviation."
    out = {}
    for objective, (base_policy, _, _, what) in OBJECTIVES.items():
        head = "| step | " + " | ".join(f"{w}: {what} | {w}: vs {base_policy}" for w in WORLDS) + " | paper |"
        lines = [head, "|---|" + "---|---|" * len(WORLDS) + "---|"]
        for step, *_ in STEPS:
            cells = []
            for world in WORLDS:
                runs = by[_label(objective, world, DEFAULT_ISOLATION, step)]
                value = _ms([_value(objective, r) for r in runs], 3 if objective == "deadline" else 2)
                cells.append(f"{value} | {_ms(_gains(by, objective, world, DEFAULT_ISOLATION, step))}x")
            paper = f"{PAPER[objective][step]:g}x" if step in PAPER[objective] else ""
            lines.append(f"| {step if step != 'base' else base_policy} | " + " | ".join(cells) + f" | {paper} |")
        note = " Deadlines: the share of jobs meeting their deadline." if objective == "deadline" else ""
        out[f"fig12_{objective}"] = "\n".join(lines) + foot + note
    sens = ["| pair table | isolation share | JCT (Lucid+Gimbal vs Lucid) | makespan (Gavel+Gimbal vs Gavel) "
            "| deadlines met (Gandiva+Gimbal vs Gandiva) |", "|---|---|---|---|---|"]
    for world in WORLDS:
        for isolation in ISOLATIONS:
            cells = [f"{_ms(_gains(by, o, world, isolation, '+LGRR'))}x" for o in OBJECTIVES]
            sens.append(f"| {world} | {isolation:g} | " + " | ".join(cells) + " |")
    sens.append("| paper (figure 12) | | 1.28x | 1.11x | 1.13x |")
    out["sensitivity"] = "\n".join(sens) + foot
    out["worlds"] = _provenance_table(data)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5, help="trace seeds 1..N (default 5)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--out", type=Path, default=OUT, help=f"JSON result file (default {OUT.relative_to(ROOT)})")
    args = p.parse_args()
    if args.seeds < 1:
        p.error("--seeds must be at least 1")

    from dlsched.sim.about import provenance, write_run_results
    from dlsched.sim.run import run_many

    provenance()
    t0 = time.perf_counter()
    records = run_many(configs(args.seeds), workers=args.workers)
    payload = write_run_results(args.out, "gimbal_ablation", records, seeds=args.seeds)
    out = tables(payload)
    print(*(out[k] for k in out), sep="\n\n")
    per_seed = sum(r.wall_s for r in records) / args.seeds
    print(f"\n{len(records)} runs, {(time.perf_counter() - t0) / 60:.1f} min; {per_seed / 60:.1f} min of runs per seed")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
