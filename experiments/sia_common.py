"""Shared runner for the Sia (thesis chapter 3) experiments: cached, parallel runs and result tables.

Each experiment is a list of run specs (plain dicts: ``policy``, ``cluster``, ``trace``, ``round_s``,
``settings``, ``seed``); every spec runs in a worker process through :func:`dlsched.sim.runner.run` and its
summary is cached as JSON under ``experiments/results/sia/`` (file name = a hash of the spec), so re-running an
experiment skips finished runs. Sia and Pollux use 60 s rounds, Gavel 360 s (thesis, section 3.4.3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "sia"
#: Round length per scheduler (thesis, section 3.4.3 "default parameters").
ROUND_S = {"sia": 60.0, "pollux": 60.0, "gavel": 360.0}
#: Gavel and other rigid schedulers run TunedJobs (thesis, section 3.4.3).
TUNED = {"gavel"}
NAMES = {"sia": "Sia", "pollux": "Pollux", "gavel": "Gavel+TJ"}
MAX_WORKERS = 2

# Named traces read the measured data from ../shared/data relative to the working directory; make the scripts
# work from any directory by pointing DLSCHED_DATA at the checkout's sibling when it is not set.
_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if "DLSCHED_DATA" not in os.environ and _DATA.is_dir():
    os.environ["DLSCHED_DATA"] = str(_DATA)


def spec(policy: str, cluster: str, trace: str, *, settings: dict[str, str] | None = None,
         round_s: float | None = None, seed: int = 0, tuned: bool | None = None,
         tag: str = "") -> dict[str, Any]:
    """One run; Gavel gets TunedJobs (``@tuned``) and 360 s rounds unless told otherwise."""
    tuned = policy in TUNED if tuned is None else tuned
    if tuned and not trace.endswith("@tuned"):
        trace = f"{trace}@tuned"
    return {"policy": policy, "cluster": cluster, "trace": trace,
            "round_s": float(round_s if round_s is not None else ROUND_S.get(policy, 60.0)),
            "settings": {k: str(v) for k, v in (settings or {}).items()}, "seed": seed, "tag": tag}


def key(s: dict[str, Any]) -> str:
    body = json.dumps({k: v for k, v in s.items() if k != "tag"}, sort_keys=True)
    return hashlib.sha1(body.encode()).hexdigest()[:16]


def cache_path(s: dict[str, Any]) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{s['policy']}-{s['trace']}")
    return RESULTS / f"{safe}-{key(s)}.json"


def run_one(s: dict[str, Any]) -> dict[str, Any]:
    """Worker entry point: run one spec, cache and return its summary (plus the spec and wall time)."""
    import importlib

    from dlsched.sim.runner import RunConfig, run

    t0 = time.perf_counter()
    if s.get("runner"):  # "module:function" taking the spec and returning a summary dict (sia_gpt.py)
        mod, _, fn = s["runner"].partition(":")
        summary = dict(getattr(importlib.import_module(mod), fn)(s))
    else:
        cfg = RunConfig(cluster=s["cluster"], trace=s["trace"], policy=s["policy"], settings=s["settings"],
                        seed=s["seed"], round_s=s["round_s"])
        out = run(cfg)
        summary = dict(out.summary)
        summary.update(contention(out.result.rounds))
    summary["wall_s"] = time.perf_counter() - t0
    rec = {"spec": s, "summary": _jsonable(summary)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = cache_path(s)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(rec, indent=1) + "\n")
    os.replace(tmp, path)
    return rec


def contention(rounds: list) -> dict[str, float | None]:
    """Jobs contending for GPUs (active jobs per round, thesis table 3.3 "Contention"): average and max."""
    act = [r.active_jobs for r in rounds if r.active_jobs > 0]
    return {"contention_avg": sum(act) / len(act) if act else None,
            "contention_max": float(max(act)) if act else None}


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item"):
        return x.item()
    return x


def load_cached(s: dict[str, Any]) -> dict[str, Any] | None:
    path = cache_path(s)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
    return None


def run_all(specs: list[dict[str, Any]], workers: int = MAX_WORKERS, force: bool = False) -> list[dict | None]:
    """Run the specs not already cached (at most ``workers`` processes); records in spec order.

    A run that raises is reported on stderr and its slot is ``None``.
    """
    out: list[dict | None] = [None if force else load_cached(s) for s in specs]
    for s, r in zip(specs, out, strict=True):  # a cached run may come from another experiment: use our tag
        if r is not None:
            r["spec"] = {**r["spec"], "tag": s["tag"]}
    todo = [i for i, r in enumerate(out) if r is None]
    cached = len(specs) - len(todo)
    print(f"{len(specs)} runs: {cached} cached, {len(todo)} to run ({workers} workers)", file=sys.stderr)
    if not todo:
        return out
    t0 = time.perf_counter()
    workers = max(1, min(workers, MAX_WORKERS, len(todo)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(run_one, specs[i]): i for i in todo}
        for n, fut in enumerate(as_completed(futs), start=1):
            i = futs[fut]
            s = specs[i]
            try:
                out[i] = fut.result()
                sm = out[i]["summary"]  # type: ignore[index]
                print(f"  [{n}/{len(todo)}] {s['policy']} {s['trace']} {s['tag']} avg_jct={hours(sm['avg_jct_s'])} "
                      f"({sm['wall_s']:.0f}s, total {time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
            except Exception as exc:  # noqa: BLE001 - report and keep the other runs
                print(f"  [{n}/{len(todo)}] FAILED {s['policy']} {s['trace']} {s['tag']}: {exc!r}",
                      file=sys.stderr, flush=True)
    return out


def hours(x: float | None) -> str:
    return "-" if x is None else f"{x / 3600:.2f}h"


def mean_std(xs: Iterable[float | None], scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    vals = [x / scale for x in xs if x is not None]
    if not vals:
        return "-"
    m = sum(vals) / len(vals)
    if len(vals) == 1:
        return fmt.format(m)
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    return f"{fmt.format(m)} ± {fmt.format(sd)}"


def mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


#: The metrics of the thesis's tables: (summary key, column name, scale, format).
METRICS = [("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"), ("p99_jct_s", "p99 JCT (h)", 3600.0, "{:.1f}"),
           ("makespan_s", "makespan (h)", 3600.0, "{:.1f}"),
           ("gpu_hours_per_job", "GPU-h/job", 1.0, "{:.2f}"), ("restarts_per_job", "restarts/job", 1.0, "{:.1f}")]


def group_rows(records: list[dict | None], group: str = "tag",
               metrics: list[tuple[str, str, float, str]] = METRICS) -> tuple[list[str], list[list[str]]]:
    """One row per distinct ``spec[group]`` (in first-seen order): mean ± std over its runs."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        if r is None:
            continue
        groups.setdefault(str(r["spec"][group]), []).append(r["summary"])
    header = [group, "runs", *(m[1] for m in metrics)]
    rows = []
    for g, sums in groups.items():
        row = [g, str(len(sums))]
        for k, _, scale, fmt in metrics:
            row.append(mean_std([s.get(k) for s in sums], scale, fmt))
        rows.append(row)
    return header, rows


def table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-markdown table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]

    def fmt(r: list) -> str:
        return "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(header), sep, *(fmt(r) for r in rows)])


def parser(description: str, default_workloads: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--workloads", type=int, default=default_workloads,
                   help=f"number of workloads per trace family (default {default_workloads})")
    p.add_argument("--workers", type=int, default=MAX_WORKERS, help="worker processes (at most 2)")
    p.add_argument("--force", action="store_true", help="re-run even cached runs")
    p.add_argument("--json", type=Path, default=None, help="also write the table rows here")
    return p


def total_wall(records: list[dict | None]) -> float:
    return sum(r["summary"].get("wall_s", 0.0) for r in records if r is not None)


def write_json(path: Path | None, payload: Any) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_jsonable(payload), indent=1) + "\n")
