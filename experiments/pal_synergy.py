"""PAL figures 14-17 and 19: Synergy-style traces on 256 GPUs, load 4 to 14 jobs/hour, FIFO / LAS / SRTF.

    python experiments/pal_synergy.py [--rates 4,6,8,10,12,14] [--orderings fifo,las,srtf] [--jobs 3000]
                                      [--placements ...] [--seeds 1] [--series-rates 4,8,10]

``pal-256`` (64 nodes x 4 V100, Longhorn variability), ``synergy:rate=R,jobs=N,seed=S`` traces, 360 s
rounds, a constant locality penalty of 1.7 for every job spanning nodes (the world) and in PAL's L x V matrix.
Averages cover jobs 2000 to 3000 (by arrival), as the paper's; with ``--jobs`` below 3000 the window is the
last third of the trace. "LAS" is Tiresias's discretised 2D-LAS ordering (``tiresias-2dlas``), the
paper's "Tiresias/LAS with two-level priority queuing". Also reported: the multi-GPU jobs of the window
alone. With ``--series-rates``, the packed-sticky ("Tiresias") and PAL runs at those rates also record GPUs
in use per round (figure 15) and per-job wait times (figure 19); plots go to ``experiments/results/``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

import numpy as np
from pal_common import PAPER_NAMES, PLACEMENTS, RESULTS, run_all, stderr_progress, table, write_json

ORDERING = {"fifo": "fifo", "las": "tiresias-2dlas", "srtf": "srtf"}
#: Paper (section V-C): PAL's average-JCT improvement over Tiresias.
PAPER = {"fifo": "4% (4 jobs/h) to 9% (12 jobs/h), then ~8%; multi-GPU jobs 5% to 31%, 22% above 12 jobs/h",
         "las": "up to 15%", "srtf": "up to 10%"}


def window(jobs: int) -> list[int]:
    return [2000, 3000] if jobs >= 3000 else [2 * jobs // 3, jobs]


def specs(args) -> list[dict]:
    out = []
    series = {float(r) for r in args.series_rates.split(",") if r.strip()}
    for seed in range(1, args.seeds + 1):
        for o in args.orderings.split(","):
            for rate in (float(r) for r in args.rates.split(",")):
                for p in args.placements.split(","):
                    # the truth's penalty (a world option), and PAL's own belief about it (a tunable)
                    settings = {"l_across": f"{args.penalty:g}"} if p == "pal" else {}
                    out.append(dict(cluster="pal-256", trace=f"synergy:rate={rate:g},jobs={args.jobs},seed={seed}",
                                    policy="fifo", ordering=ORDERING[o], sched=o, placement=p, rate=rate, seed=seed,
                                    variability=args.variability, settings=settings,
                                    world={"locality_penalty": args.penalty}, jobs_window=window(args.jobs),
                                    series=(rate in series and p in ("packed-sticky", "pal") and seed == 1)))
    # Longest runs first, so the pool's tail is short.
    return sorted(out, key=lambda s: (-s["rate"], s["sched"] != "las"))


def summarise(results: list[dict]) -> dict:
    agg: dict = defaultdict(list)
    multi: dict = defaultdict(list)
    for r in results:
        agg[(r["sched"], r["rate"], r["placement"])].append(r["avg_jct_s"])
        multi[(r["sched"], r["rate"], r["placement"])].append(r["multi"]["avg_jct_s"])
    out: dict = {}
    for (o, rate, p), v in agg.items():
        out.setdefault(o, {}).setdefault(f"{rate:g}", {})[p] = {
            "avg_jct_h": float(np.mean(v)) / 3600, "multi_avg_jct_h": float(np.nanmean(
                [x if x is not None else np.nan for x in multi[(o, rate, p)]])) / 3600}
    return out


def plot_series(results: list[dict], tag: str = "") -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dlsched.outputs import atomic_file

    written: list[str] = []
    runs = [r for r in results if r.get("gpus_in_use")]
    if not runs:
        return written
    by_sched = defaultdict(list)
    for r in runs:
        by_sched[r["sched"]].append(r)
    # Figure 15: GPUs in use over time (FIFO), Tiresias vs PAL per load.
    fifo = sorted(by_sched.get("fifo", []), key=lambda r: (r["rate"], r["placement"]))
    if fifo:
        rates = sorted({r["rate"] for r in fifo})
        fig, axes = plt.subplots(len(rates), 1, figsize=(8, 2.2 * len(rates)), squeeze=False, sharex=True)
        for ax, rate in zip(axes[:, 0], rates, strict=True):
            for r in fifo:
                if r["rate"] == rate:
                    t, g = np.asarray(r["gpus_in_use"]).T
                    ax.plot(t / 1e6, g, lw=0.7, drawstyle="steps-post", label=PAPER_NAMES[r["placement"]])
            ax.set_ylabel("GPUs in use")
            ax.set_title(f"{rate:g} jobs/hour (FIFO)", fontsize=9)
            ax.legend(fontsize=8)
        axes[-1, 0].set_xlabel("time (10^6 s)")
        fig.tight_layout()
        path = RESULTS / f"pal_fig15_gpus_in_use{tag}.png"
        with atomic_file(path) as tmp:
            fig.savefig(tmp, format="png")
        plt.close(fig)
        written.append(str(path))
    # Figure 19: wait time per job, per scheduler, Tiresias vs PAL (first series rate of each scheduler).
    scheds = [s for s in ("las", "srtf", "fifo") if s in by_sched]
    if scheds:
        fig, axes = plt.subplots(len(scheds), 1, figsize=(8, 2.4 * len(scheds)), squeeze=False)
        for ax, s in zip(axes[:, 0], scheds, strict=True):
            rate = sorted({r["rate"] for r in by_sched[s]})[len({r["rate"] for r in by_sched[s]}) // 2]
            for r in by_sched[s]:
                if r["rate"] == rate:
                    w = np.asarray([x[2] for x in r["waits"]], dtype=float)
                    ax.plot(np.arange(len(w)), w / 3600, lw=0.6, label=PAPER_NAMES[r["placement"]])
            ax.set_ylabel("wait (h)")
            ax.set_title(f"{s.upper()}, {rate:g} jobs/hour", fontsize=9)
            ax.legend(fontsize=8)
        axes[-1, 0].set_xlabel("job (arrival order)")
        fig.tight_layout()
        path = RESULTS / f"pal_fig19_wait_times{tag}.png"
        with atomic_file(path) as tmp:
            fig.savefig(tmp, format="png")
        plt.close(fig)
        written.append(str(path))
    return written


def _gain(cell: dict, key: str = "avg_jct_h", of: str = "pal") -> str:
    base = cell.get("packed-sticky", {}).get(key)
    mine = cell.get(of, {}).get(key)
    return f"{1 - mine / base:.1%}" if base and mine is not None and mine == mine else "-"


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/pal_synergy<tag>.json``: ``fifo`` (FIFO, every placement, hours; PM-First's
    and PAL's improvement over Tiresias, PAL's on multi-GPU jobs; Tiresias's average wait in minutes) and
    ``orderings`` (every ordering: Tiresias / PM-First / PAL and PAL's improvement)."""
    summary = data["summary"]
    runs = data["runs"]
    wait = {(r["sched"], f"{r['rate']:g}"): r["avg_wait_s"] for r in runs
            if r["placement"] == "packed-sticky" and r.get("avg_wait_s") is not None}
    out = {}
    if "fifo" in summary:
        cells = summary["fifo"]
        placements = [p for p in PLACEMENTS if any(p in c for c in cells.values())]
        rows = [[rate, *[f"{cells[rate][p]['avg_jct_h']:.2f}" if p in cells[rate] else "-" for p in placements],
                 _gain(cells[rate], of="pm-first"), _gain(cells[rate]), _gain(cells[rate], "multi_avg_jct_h"),
                 f"{wait[('fifo', rate)] / 60:.1f}" if ("fifo", rate) in wait else "-"]
                for rate in sorted(cells, key=float)]
        out["fifo"] = table(rows, ["jobs/h", *[PAPER_NAMES[p] for p in placements], "PM-First vs Tiresias",
                                   "PAL vs Tiresias", "PAL vs Tiresias, multi-GPU jobs", "Tiresias avg wait (min)"])
    rates = sorted({rate for cells in summary.values() for rate in cells}, key=float)
    header, rows = ["jobs/h"], []
    orderings = [o for o in ORDERING if o in summary] + [o for o in summary if o not in ORDERING]
    for o in orderings:
        header += [f"{o.upper()}: Tiresias / PM-First / PAL (h)", "PAL vs Tiresias"]
    for rate in rates:
        row = [rate]
        for o in orderings:
            cell = summary[o].get(rate, {})
            row += [" / ".join(f"{cell[p]['avg_jct_h']:.2f}" if p in cell else "-"
                               for p in ("packed-sticky", "pm-first", "pal")), _gain(cell)]
        rows.append(row)
    out["orderings"] = table(rows, header)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="4,6,8,10,12,14")
    ap.add_argument("--orderings", default="fifo,las,srtf")
    ap.add_argument("--placements", default=",".join(PLACEMENTS))
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--seeds", type=int, default=1, help="trace seeds (1..N); the variability draw follows")
    ap.add_argument("--penalty", type=float, default=1.7)
    ap.add_argument("--variability", default="runs", choices=("runs", "world"))
    ap.add_argument("--series-rates", default="4,8,10")
    ap.add_argument("--tag", default="", help="suffix for the result files (pal_synergy<tag>.json, ...)")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = run_all(specs(args), workers=args.workers, progress=stderr_progress)
    wall = time.perf_counter() - t0
    summary = summarise(results)
    plots = plot_series(results, args.tag)
    slim = [{k: v for k, v in r.items() if k not in ("gpus_in_use", "waits")} for r in results]
    series = [{k: r[k] for k in ("sched", "rate", "placement", "gpus_in_use", "waits", "config")} for r in results
              if r.get("gpus_in_use")]
    path = write_json(f"pal_synergy{args.tag}.json", {"args": vars(args), "wall_s": wall, "summary": summary,
                                                       "runs": slim})
    write_json(f"pal_synergy_series{args.tag}.json", {"args": vars(args), "runs": series}, indent=None)
    print(f"\n### Synergy: average JCT of jobs {window(args.jobs)} (hours)\n")
    for text in tables(json.loads(path.read_text())).values():
        print(text + "\n")
    for o in summary:
        print(f"paper ({o.upper()}): PAL vs Tiresias {PAPER[o]}")
    print(f"\n{len(results)} runs in {wall:.0f} s; wrote {path} {' '.join(plots)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
