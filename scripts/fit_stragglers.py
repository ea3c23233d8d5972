#!/usr/bin/env python
"""Fit the straggler-episode process of each GPU-variability family from PAL's single benchmark runs.

Writes ``src/dlsched/world/params/stragglers.json`` (committed; the measured files never are), which
:mod:`dlsched.world.stragglers` reads to play episodes in simulated time.

What the runs show. In PAL's measurement files one row is one benchmark run on one GPU; the four GPUs of a
node run together, so rows sharing a node and a start time ``ts`` form a *session*. A run's slowdown is its
``perf`` over the median ``perf`` of its own GPU's runs (1.0 = that GPU's usual speed), so a GPU that is slow
in every run is not counted: that is the per-GPU median the world already plays. A session is an *episode*
when the median slowdown of its GPUs exceeds ``--threshold`` (1.5). On Longhorn ResNet-50 (the only file in
which any run exceeds 1.5x its GPU's median) every such run belongs to one of 5 sessions in which all 4 GPUs
of the node were 1.7x to 3.6x slow at once, and each of the 5 nodes ran at its usual speed in its next
session, about half an hour later: the slowness is a transient state of a node, not a property of a GPU.

What is fitted, per family:

* ``fraction_in_episode``: episode sessions / sessions, the chance that a node is in an episode at a random
  time (sessions start at times unrelated to episodes);
* ``length_s``: the data bracket each episode's length: at least the slow session's run time (the run was
  slow throughout: its run time is 2.5x to 4x the usual), at most the time from its start to the start of the
  node's next session. The process draws lengths uniformly between the mean lower and the mean upper bound;
* ``mean_gap_s``: the mean time between episodes on one node, from the two above (an alternating process
  spends ``L / (gap + L)`` of its time in episodes);
* ``factor``: per class, a lognormal fitted (mean and sd of the log) to every GPU's slowdown in the episode
  sessions; each GPU of a node in an episode gets its own draw, so a gang is gated by its slowest GPU as in
  the data. Classes whose own runs show no episode get none (their files are listed with their session
  counts, and the number of episodes class A's rate would have predicted in them).

Families whose files carry no start times (Frontera, Lonestar6) cannot show sessions; their runs never
exceed the threshold (counts recorded), so they get no episodes. ``testbed32`` is 32 Frontera GPUs.

Usage: ``python scripts/fit_stragglers.py [--data-dir DIR] [--threshold 1.5] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.catalog import FAMILIES, TESTBED
from dlsched.catalog.gpu_variability import AGGREGATED_DIR
from dlsched.datadir import data_dir as default_data_dir

OUT = Path(__file__).resolve().parents[1] / "src" / "dlsched" / "world" / "params" / "stragglers.json"
#: Benchmark -> the classes it profiles (as the catalog maps them).
CLASSES_OF = {"resnet": ["classA"], "bert": ["classB", "classC"], "pagerank": ["classD"]}


def run_slowdowns(path: Path) -> pd.DataFrame:
    """Every run of a file with its node key, start time (if any) and slowdown against its GPU's median."""
    d = pd.read_csv(path)
    d["slowdown"] = d["perf"] / d.groupby("uuid")["perf"].transform("median")
    d["node_key"] = d["cabinet"].astype(str) + "-" + d["node"].astype(str)
    return d


def sessions(d: pd.DataFrame) -> pd.DataFrame:
    """One row per (node, start time): GPUs, median slowdown, run time, and the start of the node's next one."""
    s = d.groupby(["node_key", "ts"]).agg(gpus=("slowdown", "size"), slowdown=("slowdown", "median"),
                                          run_s=("train_time", "max") if "train_time" in d else ("ts", "size"))
    s = s.reset_index().sort_values(["node_key", "ts"])
    s["next_ts"] = s.groupby("node_key")["ts"].shift(-1)
    s["prev_ts"] = s.groupby("node_key")["ts"].shift(1)
    return s


def fit_file(path: Path, name: str, threshold: float) -> dict:
    d = run_slowdowns(path)
    out: dict = {"file": name, "runs": len(d), "runs_over_threshold": int((d["slowdown"] > threshold).sum()),
                 "max_run_slowdown": round(float(d["slowdown"].max()), 4)}
    if "ts" not in d:
        out["sessions"] = None
        return out
    s = sessions(d)
    ep = s[s["slowdown"] > threshold]
    out["sessions"] = len(s)
    out["episodes"] = []
    for _, e in ep.iterrows():
        runs = d[(d["node_key"] == e["node_key"]) & (d["ts"] == e["ts"])]
        out["episodes"].append({
            "node": e["node_key"], "ts": int(e["ts"]), "gpu_slowdowns": [round(float(x), 4) for x in runs["slowdown"]],
            "length_low_s": round(float(e["run_s"]), 1),
            "length_high_s": None if pd.isna(e["next_ts"]) else float(e["next_ts"] - e["ts"]),
            # time since the node's previous session started (None: its first session in the file)
            "since_previous_s": None if pd.isna(e["prev_ts"]) else float(e["ts"] - e["prev_ts"])})
    return out


def fit_family(name: str, root: Path, threshold: float) -> dict:
    files: dict = {}
    for bench in FAMILIES[name].benchmarks:
        path = root / AGGREGATED_DIR / bench.file
        if path.is_file() and bench.name in CLASSES_OF:
            files[bench.name] = fit_file(path, bench.file, threshold)
    fam: dict = {"files": files, "classes": {}}
    fitted = {b: f for b, f in files.items() if f.get("episodes")}
    if not fitted:
        fam.update(fraction_in_episode=0.0, mean_gap_s=None, length_s=None)
        return fam
    # one process per node; its frequency and length from the file(s) that show episodes
    eps = [e for f in fitted.values() for e in f["episodes"]]
    n_sessions = sum(f["sessions"] for f in fitted.values())
    frac = len(eps) / n_sessions
    lo = float(np.mean([e["length_low_s"] for e in eps]))
    hi = float(np.mean([e["length_high_s"] for e in eps if e["length_high_s"] is not None]))
    mean_len = 0.5 * (lo + hi)
    fam.update(fraction_in_episode=frac, episode_sessions=len(eps), sessions=n_sessions,
               length_s={"low": round(lo, 1), "high": round(hi, 1)},
               mean_gap_s=round(mean_len * (1.0 - frac) / frac, 1))
    for bench, f in files.items():
        for cls in CLASSES_OF[bench]:
            if f.get("episodes"):
                x = np.log([v for e in f["episodes"] for v in e["gpu_slowdowns"]])
                fam["classes"][cls] = {"log_mean": round(float(x.mean()), 5), "log_sd": round(float(x.std(ddof=1)), 5),
                                       "min": round(float(np.exp(x.min())), 4), "max": round(float(np.exp(x.max())), 4),
                                       "gpu_runs": len(x)}
            elif f.get("sessions"):
                fam["classes"][cls] = {"none_in_sessions": f["sessions"],
                                       "expected_at_fitted_rate": round(f["sessions"] * frac, 2)}
    return fam


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--threshold", type=float, default=1.5, help="median GPU slowdown of an episode session")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    root = Path(args.data_dir) if args.data_dir else default_data_dir()
    if root is None or not (root / AGGREGATED_DIR).is_dir():
        print(f"error: {AGGREGATED_DIR} not found under {root} (set DLSCHED_DATA)", file=sys.stderr)
        return 2
    fams = {name: fit_family(name, root, args.threshold) for name in FAMILIES if name != TESTBED}
    fams[TESTBED] = {"same_as": "frontera", **{k: v for k, v in fams["frontera"].items() if k != "files"}}
    payload = {"threshold": args.threshold, "source": "pal/aggregated_data (hal-uw/blox-pal da726cab)",
               "families": fams}
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    for name, f in fams.items():
        print(f"{name}: fraction in episode {f['fraction_in_episode']:.4f}, length {f.get('length_s')}, "
              f"mean gap {f.get('mean_gap_s')} s, classes {f.get('classes')}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
