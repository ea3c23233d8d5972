"""PAL figure 13: average JCT on the 8 Sia-Philly workloads as the locality penalty goes from 1.0 to 3.0.

    python experiments/pal_fig13.py [--penalties 1.0,1.5,2.0,2.5,3.0] [--seeds 2] [--variability runs]

As figure 11 (``pal-64``, FIFO, 360 s rounds), but every job whose GPUs span nodes pays one constant
penalty (``--set locality_penalty=X`` in the world) and PAL's L x V matrix assumes the same constant
(``l_across=X``). Reported per penalty: the geometric mean over workloads of each placement's average JCT
(hours, averaged over variability draws) and its improvement over packed-sticky ("Tiresias"). Results in
``experiments/results/pal_fig13.json``.
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
    VARIABILITY_MODES,
    geomean,
    pal_vs_pm_first,
    run_all,
    stderr_progress,
    table,
    write_json,
)

#: The paper's improvements over Tiresias at penalty 1.0 and 3.0 (section V-B1).
PAPER = {"pm-first": (0.30, 0.09), "pal": (0.30, 0.20)}


def specs(penalties: list[float], seeds: int, modes: list[str], workloads: list[int]) -> list[dict]:
    out = []
    for mode, pen in ((m, p) for m in modes for p in penalties):
        for seed in range(seeds):
            for w in workloads:
                for p in PLACEMENTS:
                    # the truth's penalty (a world option), and PAL's own belief about it (a tunable)
                    settings = {"l_across": f"{pen:g}"} if p == "pal" else {}
                    out.append(dict(cluster="pal-64", trace=f"pal-philly:{w}", policy="fifo", placement=p,
                                    seed=seed, variability=mode, penalty=pen, settings=settings,
                                    world={"locality_penalty": pen}))
    return out


def summarise(results: list[dict], penalties: list[float], workloads: list[int]) -> dict:
    """Per variability mode and penalty: geomean average JCT (hours) and geomean ratio to Tiresias."""
    out: dict = {}
    for mode in dict.fromkeys(r["variability"] for r in results):
        jct: dict = defaultdict(list)
        for r in results:
            if r["variability"] == mode:
                jct[(r["penalty"], r["trace"], r["placement"])].append(r["avg_jct_s"])
        per: dict = {}
        for pen in penalties:
            mean = {(t, p): float(np.mean(jct[(pen, t, p)])) for t in {f"pal-philly:{w}" for w in workloads}
                    for p in PLACEMENTS}
            gm_h = {p: geomean(mean[(f"pal-philly:{w}", p)] for w in workloads) / 3600 for p in PLACEMENTS}
            norm = {p: geomean(mean[(f"pal-philly:{w}", p)] / mean[(f"pal-philly:{w}", "packed-sticky")]
                               for w in workloads) for p in PLACEMENTS}
            per[f"{pen:g}"] = {"geomean_avg_jct_h": gm_h, "geomean_vs_tiresias": norm}
        out[mode] = per
    return out


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/pal_fig13.json``: ``table`` (per penalty: geomean average JCT in hours per
    placement, PM-First's and PAL's improvement over Tiresias, PAL's lead over PM-First in points, and
    Random-Sticky against Tiresias) and ``pal_vs_pm_first``."""
    header = ["world", "penalty", *[PAPER_NAMES[p] for p in PLACEMENTS], "PM-First vs Tiresias", "PAL vs Tiresias",
              "PAL lead over PM-First (points)", "Random-Sticky vs Tiresias"]
    rows = []
    for mode, per in data["summary"].items():
        for pen, s in per.items():
            norm = s["geomean_vs_tiresias"]
            rows.append([mode, pen, *[f"{s['geomean_avg_jct_h'][p]:.2f}" for p in PLACEMENTS],
                         f"{1 - norm['pm-first']:.0%}", f"{1 - norm['pal']:.0%}",
                         f"{100 * (norm['pm-first'] - norm['pal']):.1f}", f"{norm['random-sticky'] - 1:+.0%}"])
    rows.append(["paper", "1.0 -> 3.0", *[""] * len(PLACEMENTS),
                 f"{PAPER['pm-first'][0]:.0%} -> {PAPER['pm-first'][1]:.0%}",
                 f"{PAPER['pal'][0]:.0%} -> {PAPER['pal'][1]:.0%}", "", ""])
    return {"table": table(rows, header), "pal_vs_pm_first": pal_vs_pm_first(data["runs"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--penalties", default="1.0,1.5,2.0,2.5,3.0")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--variability", default="runs",
                    help="comma-separated, of: runs (gpu_speeds=single-runs, reproduces PAL's published simulator), medians (no "
                         "episodes), episodes (medians plus straggler episodes), world (the default world)")
    ap.add_argument("--workloads", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.variability.split(",") if m.strip()]
    if not modes or any(m not in VARIABILITY_MODES for m in modes):
        ap.error(f"--variability: each of {', '.join(VARIABILITY_MODES)}, got {args.variability!r}")
    penalties = [float(x) for x in args.penalties.split(",")]
    workloads = [int(w) for w in args.workloads.split(",")]
    t0 = time.perf_counter()
    results = run_all(specs(penalties, args.seeds, modes, workloads), workers=args.workers,
                      progress=stderr_progress)
    wall = time.perf_counter() - t0
    summary = summarise(results, penalties, workloads)
    path = write_json("pal_fig13.json", {"args": vars(args), "wall_s": wall, "summary": summary, "runs": results})
    print(f"\n### locality penalty sweep, variability = {args.variability} ({args.seeds} draws): geomean average "
          f"JCT (hours) and improvement over Tiresias (packed-sticky)\n")
    for text in tables(json.loads(path.read_text())).values():
        print(text + "\n")
    print(f"\n{len(results)} runs in {wall:.0f} s; wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
