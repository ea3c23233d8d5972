"""Gimbal section 7.2 and 7.3 in both sharing worlds: Lucid against Lucid+Gimbal (average JCT and queueing time)
against Slurm, Gavel's packing policy against Gavel+Gimbal (makespan), and Gandiva with packing (``gandiva``)
against Gandiva+Gimbal (jobs meeting their deadline), on ``gimbal-32``.

Every row runs ``gimbal-philly:seed=S`` (150 jobs) and ``gimbal-alibaba:seed=S`` (300 jobs) for trace seeds 1..N
(``--seeds``, default 5) in each sharing world (``world.sharing_world``: ``old-gpus``, the Lucid/Gavel/PAL pair
table; ``h200``, pairs measured on an H200), with the world seeded by the trace seed (``world_seed=S``: the
monitor's measurement noise and so the trials' costs vary with the seed). The rows: ``slurm``, ``lucid``
(conservative packing), ``lucid --coordinator gimbal`` (the base scheduler relaxed, Gimbal coordinating for
JCT), ``gavel-packing``, ``gavel-packing --coordinator gimbal --set objective=makespan`` (Gimbal's makespan
objective, equation 5) and the same with ``--set makespan_goal=work`` (row ``gavel-packing+gimbal work``: a
separate objective of dlsched's, each set's remaining GPU work over its GPU-weighted speed; not a reading of
equation 5, and the paper has no figure for it), ``gandiva`` and ``gandiva --coordinator gimbal --set
objective=deadline``. Figure 12's ablation is ``experiments/gimbal_ablation.py`` (five seeds, both worlds).

Every number is a mean over seeds with its standard deviation; a gain is the mean (and standard deviation)
of the per-seed ratios. After the tables, one line per world says whether Lucid+Gimbal's mean JCT gain over
Lucid reaches :data:`TARGET_JCT_X` and, where not, what the result file measured: the world's pair speeds
among the traces' models (``pairs``, from the world the runs used) and how much of the jobs' GPU time ran
packed (``shared_gpu_frac``, per run).

Prints the tables and writes, as JSON, the provenance of :func:`dlsched.sim.about.provenance` (commit,
dirty, dlsched version, every run's resolved configuration in ``configs``), each run's summary, the share
of each run's GPU time spent packed, and per world every pair's summed speed with its provenance.

    python experiments/gimbal_e2e.py [--seeds 5] [--workers 1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "gimbal_e2e.json"
WORLDS = ("old-gpus", "h200")
SOURCES = ("philly", "alibaba")
#: Issue 27's bar for Lucid+Gimbal's mean JCT gain over Lucid in a sharing world.
TARGET_JCT_X = 1.15
#: Paper numbers (section 7.2 and 7.3) for the tables.
PAPER = {"philly": {"jct_x": 1.28, "wait_x": 1.87, "makespan_x": 1.12},
         "alibaba": {"jct_x": 1.26, "wait_x": 1.51, "makespan_x": 1.1}}
PAPER_DEADLINES = {"philly": "90 vs 110 of 150", "alibaba": "177 vs 233 of 300"}
#: (label, policy, coordination, settings) of the end-to-end runs.
E2E: tuple[tuple[str, str, str | None, dict[str, str]], ...] = (
    ("slurm", "slurm", None, {}),
    ("lucid", "lucid", None, {}),
    ("lucid+gimbal", "lucid", "gimbal", {}),
    ("gavel-packing", "gavel-packing", None, {}),
    ("gavel-packing+gimbal", "gavel-packing", "gimbal", {"objective": "makespan"}),
    ("gavel-packing+gimbal work", "gavel-packing", "gimbal", {"objective": "makespan", "makespan_goal": "work"}),
    ("gandiva", "gandiva", None, {}),
    ("gandiva+gimbal", "gandiva", "gimbal", {"objective": "deadline"}),
)
DEADLINE_ROWS = ("slurm", "gandiva", "gandiva+gimbal")
#: The end-to-end rows of the JCT table (Lucid's objective) and of the makespan table (Gavel's).
JCT_ROWS = ("slurm", "lucid", "lucid+gimbal")
MAKESPAN_ROWS = ("slurm", "gavel-packing", "gavel-packing+gimbal", "gavel-packing+gimbal work")
#: How the makespan table names its Gimbal rows: which objective each ran, so the paper's figure (equation 5's)
#: stands beside equation 5's row only.
MAKESPAN_NAMES = {"gavel-packing+gimbal": "gavel-packing+gimbal (eq. 5)",
                  "gavel-packing+gimbal work": "gavel-packing+gimbal, makespan_goal=work (not eq. 5)"}


def label(world: str, source: str, row: str) -> str:
    """A run's label: the row, the trace and the sharing world it ran in."""
    return f"e2e | {world} | {source} | {row}"


def configs(seeds: int) -> list[Any]:
    from dlsched.sim.config import RunConfig

    out = []
    for world in WORLDS:
        for source in SOURCES:
            for seed in range(1, seeds + 1):
                for row, policy, coord, extra in E2E:
                    out.append(RunConfig(policy=policy, coordination=coord, cluster="gimbal-32",
                                         trace=f"gimbal-{source}:seed={seed}", settings=extra, seed=0,
                                         world_seed=seed, world={"sharing_world": world},
                                         label=label(world, source, row)))
    return out


def summaries_by_label(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A result file's run summaries grouped by their configuration's label (the Gimbal experiments' rows)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for run, cfg in zip(data["runs"], data["configs"], strict=True):
        out.setdefault(cfg["label"], []).append(run["summary"])
    return out


def shared_frac(jobs: list[Any]) -> float:
    """Share of a run's job GPU-seconds spent on a GPU another job held at the same time (packed)."""
    gpu_s = sum(j.gpu_s for j in jobs)
    return sum(j.shared_gpu_s for j in jobs) / gpu_s if gpu_s > 0 else 0.0


def pair_sums(data_configs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per sharing world, every pair among the models the runs packed (each unordered pair once): the two
    jobs' speeds summed (1 is the work of running one after the other) and how the pair was found. Read from
    the world itself (:func:`dlsched.world.sharing_worlds.sharing_world`), for the pairs the runs' ``data.sharing``
    named."""
    from dlsched.catalog.colocation import canonical
    from dlsched.world.sharing_worlds import sharing_world

    pairs: dict[str, set[str]] = {}
    kinds: dict[str, dict[str, str]] = {}
    for cfg in data_configs:
        sharing = cfg.get("data", {}).get("sharing")
        if sharing:
            pairs.setdefault(sharing["world"], set()).update(sharing["pair_kinds"])
            kinds.setdefault(sharing["world"], {}).update(sharing["pair_kinds"])
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for world, names in sorted(pairs.items()):
        table = sharing_world(world).model.table
        out[world] = {}
        for name in sorted(names):
            a, b = name.split("+")
            speed = table.pair(canonical(a), canonical(b))
            out[world][name] = {"sum": speed.speed_a + speed.speed_b, "kind": kinds[world][name]}
    return out


def _ms(values: list[float], digits: int = 2) -> str:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "n/a"
    sd = statistics.stdev(finite) if len(finite) > 1 else 0.0
    return f"{statistics.fmean(finite):.{digits}f} ± {sd:.{digits}f}"


def _ratios(num: list[dict[str, Any]], den: list[dict[str, Any]], key: str) -> list[float]:
    """Per seed, ``num``'s ``key`` over ``den``'s (NaN where ``den``'s is 0)."""
    return [float(n[key]) / float(d[key]) if float(d[key]) else math.nan for n, d in zip(num, den, strict=True)]


def _hours(rows: list[dict[str, Any]], key: str) -> str:
    return _ms([float(r[key]) / 3600 for r in rows])


def _cells(by: dict[str, list[dict[str, Any]]], base_row: str, rows_of_table: tuple[str, ...]) -> Iterator[
        tuple[str, str, str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """(world, trace source, row, the base row's runs, the row's runs) for every line of a table, in order."""
    for world in WORLDS:
        for source in SOURCES:
            base = by[label(world, source, base_row)]
            for row in rows_of_table:
                yield world, source, row, base, by[label(world, source, row)]


def _jct_table(by: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = ["| world | trace | scheduler | avg JCT (h) | avg queueing (h) | makespan (h) | JCT vs Lucid "
             "| queueing vs Lucid | paper (JCT, queueing) |", "|---|---|---|---|---|---|---|---|---|"]
    for world, source, row, base, rows in _cells(by, "lucid", JCT_ROWS):
        paper = (f"{PAPER[source]['jct_x']:g}x, {PAPER[source]['wait_x']:g}x" if row == "lucid+gimbal"
                 else "")
        lines.append(f"| {world} | {source} | {row} | {_hours(rows, 'avg_jct_s')} | "
                     f"{_hours(rows, 'avg_wait_s')} | {_hours(rows, 'makespan_s')} | "
                     f"{_ms(_ratios(base, rows, 'avg_jct_s'))}x | {_ms(_ratios(base, rows, 'avg_wait_s'))}x "
                     f"| {paper} |")
    return lines


def _makespan_table(by: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = ["| world | trace | scheduler | makespan (h) | avg JCT (h) | makespan vs Gavel | paper |",
             "|---|---|---|---|---|---|---|"]
    for world, source, row, base, rows in _cells(by, "gavel-packing", MAKESPAN_ROWS):
        paper = f"{PAPER[source]['makespan_x']:g}x" if row == "gavel-packing+gimbal" else ""
        lines.append(f"| {world} | {source} | {MAKESPAN_NAMES.get(row, row)} | {_hours(rows, 'makespan_s')} "
                     f"| {_hours(rows, 'avg_jct_s')} | {_ms(_ratios(base, rows, 'makespan_s'))}x | {paper} |")
    return lines


def _deadline_table(by: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = ["| world | trace | scheduler | jobs meeting deadlines | share | vs Gandiva | paper |",
             "|---|---|---|---|---|---|---|"]
    for world, source, row, base, rows in _cells(by, "gandiva", DEADLINE_ROWS):
        count = _ms([float(r["deadline_met_frac"]) * float(r["jobs"]) for r in rows], 1)
        share = _ms([float(r["deadline_met_frac"]) for r in rows], 3)
        paper = PAPER_DEADLINES[source] if row == "gandiva+gimbal" else ""
        lines.append(f"| {world} | {source} | {row} | {count} | {share} | "
                     f"{_ms(_ratios(rows, base, 'deadline_met_frac'))}x | {paper} |")
    return lines


def jct_gains(data: dict[str, Any], world: str, source: str) -> list[float]:
    """Lucid+Gimbal's per-seed JCT gain over Lucid (Lucid's average JCT over Lucid+Gimbal's)."""
    by = summaries_by_label(data)
    return _ratios(by[label(world, source, "lucid")], by[label(world, source, "lucid+gimbal")], "avg_jct_s")


def _shared(data: dict[str, Any], world: str, row: str) -> float:
    """Mean share of the jobs' GPU time spent packed, over both traces and every seed of ``row`` in ``world``."""
    want = {label(world, source, row) for source in SOURCES}
    return statistics.fmean(f for f, cfg in zip(data["shared_gpu_frac"], data["configs"], strict=True)
                            if cfg["label"] in want)


def verdict(data: dict[str, Any], world: str) -> str:
    """Whether Lucid+Gimbal's mean JCT gain over Lucid reaches :data:`TARGET_JCT_X` in ``world`` on every
    trace and, where it does not, the measured reason: the world's pair speeds among the traces' models and
    the share of GPU time that ran packed."""
    gains = {s: statistics.fmean(jct_gains(data, world, s)) for s in SOURCES}
    said = " and ".join(f"{gains[s]:.2f}x on {s}" for s in SOURCES)
    head = f"**{world}**: Lucid+Gimbal's mean JCT gain over Lucid is {said}"
    short = [s for s in SOURCES if gains[s] < TARGET_JCT_X]
    if not short:
        return f"{head}: it reaches {TARGET_JCT_X:g}x on both traces."
    pairs = data["pairs"][world]
    sums = [p["sum"] for p in pairs.values()]
    measured = sorted(p["sum"] for p in pairs.values() if p["kind"] == "measured")
    below = sum(1 for v in sums if v < 1)
    median = statistics.median(sums)
    where = "both traces" if len(short) == len(SOURCES) else short[0]
    text = (f"{head}, below {TARGET_JCT_X:g}x on {where}. Of the {len(sums)} pairs among the traces' models, "
            f"{below} sum to less than 1 (median {median:.2f}")
    if len(measured) == 1:
        text += f"; the one measured pair {measured[0]:.2f}"
    elif measured:
        text += f"; the {len(measured)} measured pairs {measured[0]:.2f}-{measured[-1]:.2f}"
    text += ")"
    if median < 1:
        text += (", so packing two jobs on a GPU does less work than running them one after the other: a "
                 "relaxed packing Gimbal calibrates starts from a loss.")
    else:
        text += ", so packing gains work in this world."
    text += (f" Jobs ran packed for {_shared(data, world, 'lucid+gimbal'):.1%} of their GPU time under "
             f"Lucid+Gimbal ({_shared(data, world, 'lucid'):.1%} under Lucid): Gimbal's calibration acts on that "
             "share of the work only.")
    return text


def tables(data: dict[str, Any]) -> dict[str, str]:
    """The end-to-end tables and the per-world verdict from a result file (``experiments/results/gimbal_e2e.json``)."""
    by = summaries_by_label(data)
    seeds = data.get("seeds", 1)
    foot = (f"\n\n`gimbal-32`, trace seeds 1..{seeds} (the world seeded by the trace seed): mean ± standard "
            "deviation; a gain is the mean ± standard deviation of the per-seed ratios.")
    return {"e2e": "\n".join(_jct_table(by)) + foot,
            "makespan": "\n".join(_makespan_table(by)) + foot + " The paper's figures are Gimbal's makespan "
                        "objective, equation 5 (a set's longest remaining time: `makespan_goal=longest`, the "
                        "default). `makespan_goal=work` (the time a set needs to clear its remaining GPU work) is a "
                        "separate, named objective of dlsched's, not a reading of equation 5; the paper has no "
                        "figure for it.",
            "deadline": "\n".join(_deadline_table(by)) + foot,
            "verdict": "\n\n".join(verdict(data, w) for w in WORLDS)}


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
    payload = write_run_results(args.out, "gimbal_e2e", records, seeds=args.seeds,
                                shared_gpu_frac=[shared_frac(r.jobs) for r in records],
                                pairs=pair_sums([r.config_record() for r in records]))
    out = tables(payload)
    print(out["e2e"], "", out["makespan"], "", out["deadline"], "", out["verdict"], sep="\n")
    print(f"\n{len(records)} runs, {(time.perf_counter() - t0) / 60:.1f} min")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
