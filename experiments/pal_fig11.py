"""PAL figure 11: average JCT of six placements on the 8 Sia-Philly workloads, 64 GPUs, FIFO.

    python experiments/pal_fig11.py [--seeds 4] [--variability runs,medians,episodes] [--workers N]

``pal-64`` (16 nodes x 4 V100, Longhorn variability), traces ``pal-philly:1..8``, FIFO ordering with rigid
gangs, 360 s rounds, PAL's per-model locality penalties (the world's table; PAL's L x V matrix uses the same
table). Each (workload, placement) runs once per variability draw (``--seeds``); a workload's average JCT
is the mean over draws, normalised to packed-sticky (the paper's "Tiresias"); the summary row is the
geometric mean over the eight workloads. ``pal@1.7`` is PAL with the constant L x V penalty of 1.7 that
PAL's code uses in its matrix while the world keeps the per-model table. Results: a markdown table on
stdout, everything in ``experiments/results/pal_fig11.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

import numpy as np
from pal_common import (
    PAPER_NAMES,
    PLACEMENTS,
    geomean,
    pal_vs_pm_first,
    run_all,
    stderr_progress,
    table,
    write_json,
)

PAPER = {"pm-first": 0.60, "pal": 0.57}  # average JCT relative to Tiresias (40% and 43% lower)
PAPER_MAKESPAN = {"pm-first": 0.56, "pal": 0.53}
VARIANTS = (*PLACEMENTS, "pal@1.7")


def specs(seeds: int, modes: list[str], workloads: list[int]) -> list[dict]:
    out = []
    for mode in modes:
        for seed in range(seeds):
            for w in workloads:
                for v in VARIANTS:
                    placement, _, lx = v.partition("@")
                    out.append(dict(cluster="pal-64", trace=f"pal-philly:{w}", policy="fifo", placement=placement,
                                    variant=v, seed=seed, variability=mode,
                                    settings={"l_across": lx} if lx else {}))
    return out


def summarise(results: list[dict], modes: list[str], workloads: list[int]) -> dict:
    jct: dict = defaultdict(list)
    mk: dict = defaultdict(list)
    for r in results:
        jct[(r["variability"], r["trace"], r["variant"])].append(r["avg_jct_s"])
        mk[(r["variability"], r["trace"], r["variant"])].append(r["makespan_s"])
    out: dict = {}
    for mode in modes:
        rows = {}
        for w in workloads:
            t = f"pal-philly:{w}"
            base = np.mean(jct[(mode, t, "packed-sticky")])
            rows[t] = {v: float(np.mean(jct[(mode, t, v)]) / base) for v in VARIANTS}
            rows[t]["tiresias_avg_jct_h"] = float(base / 3600)
        gm = {v: geomean(rows[f"pal-philly:{w}"][v] for w in workloads) for v in VARIANTS}
        gm_mk = {v: geomean(np.mean(mk[(mode, f"pal-philly:{w}", v)]) / np.mean(mk[(mode, f"pal-philly:{w}", "packed-sticky")])
                            for w in workloads) for v in VARIANTS}
        per_seed = {}
        seeds = sorted({r["seed"] for r in results})
        for s in seeds:
            by = {(r["trace"], r["variant"]): r["avg_jct_s"] for r in results if r["variability"] == mode and r["seed"] == s}
            per_seed[s] = {v: geomean(by[(f"pal-philly:{w}", v)] / by[(f"pal-philly:{w}", "packed-sticky")]
                                      for w in workloads) for v in VARIANTS}
        out[mode] = {"workloads": rows, "geomean_avg_jct": gm, "geomean_makespan": gm_mk, "per_seed_geomean": per_seed}
    return out


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/pal_fig11.json``: ``table`` (per workload under the first draw, geomeans
    under every draw, the paper's), ``gains`` (PM-First's and PAL's against Tiresias), ``baselines`` (which baselines beat Tiresias), ``per_draw`` (geomeans of
    each variability draw) and ``pal_vs_pm_first``."""
    summary = data["summary"]
    modes = list(summary)
    first = modes[0]
    header = [f"workload ({first} draw)", "Tiresias avg JCT (h)", *[PAPER_NAMES.get(v, v) for v in VARIANTS[1:]]]
    rows = [[t, f"{r['tiresias_avg_jct_h']:.2f}", *[f"{r[v]:.3f}" for v in VARIANTS[1:]]]
            for t, r in summary[first]["workloads"].items()]
    for what, key, paper in (("avg JCT", "geomean_avg_jct", PAPER), ("makespan", "geomean_makespan", PAPER_MAKESPAN)):
        for mode in modes:
            rows.append([f"{what} geomean, {mode} draw", "", *[f"{summary[mode][key][v]:.3f}" for v in VARIANTS[1:]]])
        rows.append([f"paper {what}", "", *[f"{paper[v]:.2f}" if v in paper else "" for v in VARIANTS[1:]]])
    lines = []
    for mode in modes:
        gm = summary[mode]["geomean_avg_jct"]
        worse = [PAPER_NAMES[v] for v in ("packed", "random-sticky", "random") if gm[v] > 1]
        better = [PAPER_NAMES[v] for v in ("packed", "random-sticky", "random") if gm[v] <= 1]
        slower = sum(r["packed"] > 1 for r in summary[mode]["workloads"].values())
        lines.append(f"* {mode} draw: geomean above Tiresias's (worse): {', '.join(worse) or 'none'}; at or below "
                     f"(better): {', '.join(better) or 'none'}. Gandiva is slower than Tiresias on {slower} of "
                     f"{len(summary[mode]['workloads'])} workloads.")
    gains = "\n".join(
        f"* {mode} draw: PM-First and PAL cut the geomean average JCT by "
        f"{100 * (1 - summary[mode]['geomean_avg_jct']['pm-first']):.0f}% and "
        f"{100 * (1 - summary[mode]['geomean_avg_jct']['pal']):.0f}% against Tiresias (paper: 40% and 43%), and the "
        f"geomean makespan by {100 * (1 - summary[mode]['geomean_makespan']['pm-first']):.0f}% and "
        f"{100 * (1 - summary[mode]['geomean_makespan']['pal']):.0f}% (paper: 44% and 47%)." for mode in modes)
    per_draw = "\n".join(
        f"* {mode} draw, per-draw geomeans: " + "; ".join(
            f"draw {k}: PM-First {v['pm-first']:.3f}, PAL {v['pal']:.3f}" for k, v in summary[mode]["per_seed_geomean"].items())
        for mode in modes)
    return {"table": table(rows, header), "gains": gains, "baselines": "\n".join(lines), "per_draw": per_draw,
            "pal_vs_pm_first": pal_vs_pm_first(data["runs"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4, help="variability draws per run")
    ap.add_argument("--variability", default="runs,world",
                    help="comma list of: runs (gpu_speeds=single-runs, reproduces PAL's published simulator), "
                         "medians (per-GPU medians, no episodes), episodes (medians plus straggler episodes), "
                         "world (the default world: medians plus episodes)")
    ap.add_argument("--workloads", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.variability.split(",") if m.strip()]
    workloads = [int(w) for w in args.workloads.split(",")]
    t0 = time.perf_counter()
    results = run_all(specs(args.seeds, modes, workloads), workers=args.workers, progress=stderr_progress)
    wall = time.perf_counter() - t0
    summary = summarise(results, modes, workloads)
    path = write_json("pal_fig11.json", {"args": vars(args), "wall_s": wall, "summary": summary, "runs": results})
    print(f"\n### average JCT normalised to Tiresias (packed-sticky), mean over {args.seeds} draws\n")
    for text in tables(json.loads(path.read_text())).values():
        print(text + "\n")
    print(f"\n{len(results)} runs in {wall:.0f} s; wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
