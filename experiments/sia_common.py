"""Shared runner for the Sia (thesis chapter 3) experiments: cached, parallel runs and result tables.

Each experiment is a list of run specs: a :class:`~dlsched.sim.config.RunConfig`, a ``tag`` naming the row it
belongs to, and optionally an ``extract`` function that adds experiment-specific numbers to the summary from
the run's records. Runs go through :func:`dlsched.sim.run.run_many` (at most two worker processes) and each
summary is cached as JSON under ``experiments/results/sia/`` (file name = a hash of the configuration), so
re-running an experiment skips finished runs. Round lengths are the schedulers' own (60 s for Sia and Pollux,
360 s for Gavel, thesis section 3.4.3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "sia"
#: Gavel and other rigid schedulers run TunedJobs (thesis, section 3.4.3).
TUNED = {"gavel", "shockwave", "themis"}
NAMES = {"sia": "Sia", "pollux": "Pollux", "gavel": "Gavel+TJ", "shockwave": "Shockwave+TJ", "themis": "Themis+TJ"}
MAX_WORKERS = 2

# Named traces read the measured data from ../shared/data relative to the working directory; make the scripts
# work from any directory by pointing DLSCHED_DATA at the checkout's sibling when it is not set.
_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if "DLSCHED_DATA" not in os.environ and _DATA.is_dir():
    os.environ["DLSCHED_DATA"] = str(_DATA)

#: Adds numbers to a run's summary from its records (runs in this process, after the run).
Extract = Callable[[Any], dict[str, Any]]


def spec(policy: str, cluster: str, trace: str, *, settings: dict[str, Any] | None = None,
         round_s: float | None = None, seed: int = 0, tuned: bool | None = None, tag: str = "",
         extract: Extract | None = None, **fields: Any) -> dict[str, Any]:
    """One run; Gavel gets TunedJobs (``@tuned``) unless told otherwise. ``fields`` are more RunConfig fields."""
    from dlsched.sim.config import RunConfig

    tuned = policy in TUNED if tuned is None else tuned
    if tuned and not trace.endswith("@tuned"):
        trace = f"{trace}@tuned"
    config = RunConfig(policy=policy, cluster=cluster, trace=trace, round_s=round_s, settings=settings or {},
                       seed=seed, trace_seed=seed, **fields)
    return {"config": config, "tag": tag, "extract": extract}


def key(s: dict[str, Any]) -> str:
    extract = s.get("extract")
    body = s["config"].model_dump_json() + (f"|{extract.__module__}.{extract.__qualname__}" if extract else "")
    return hashlib.sha1(body.encode()).hexdigest()[:16]


def cache_path(s: dict[str, Any]) -> Path:
    cfg = s["config"]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{cfg.policy}-{cfg.trace}")
    return RESULTS / f"{safe}-{key(s)}.json"


def _record(s: dict[str, Any], records: Any) -> dict[str, Any]:
    """The cached form of one finished run: its spec (as JSON) and summary."""
    summary = dict(records.summary)
    summary.update(contention(records.rounds))
    if s.get("extract"):
        summary.update(s["extract"](records))
    summary["wall_s"] = records.wall_s
    return {"spec": {"tag": s["tag"], "config": records.config.model_dump(mode="json")},
            "summary": _jsonable(summary)}


def _save(s: dict[str, Any], rec: dict[str, Any]) -> None:
    from dlsched.outputs import atomic_file

    with atomic_file(cache_path(s)) as tmp:
        tmp.write_text(json.dumps(rec, indent=1) + "\n")


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
    from dlsched.progress import progress_bar
    from dlsched.sim.run import run_many

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
    finished = 0

    def report(j: int, result: Any) -> None:
        nonlocal finished
        finished += 1
        i = todo[j]
        s, cfg = specs[i], specs[i]["config"]
        where = f"[{finished}/{len(todo)}] {cfg.policy} {cfg.trace} {s['tag']}"
        if isinstance(result, BaseException):
            print(f"  {where} FAILED: {result!r}", file=sys.stderr, flush=True)
            return
        out[i] = rec = _record(s, result)
        _save(s, rec)
        print(f"  {where} avg_jct={hours(rec['summary']['avg_jct_s'])} ({rec['summary']['wall_s']:.0f}s, "
              f"total {time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)

    with progress_bar(len(todo), "runs") as advance:
        def step(j: int, result: Any) -> None:
            report(j, result)
            advance()

        run_many([specs[i]["config"] for i in todo], max(1, min(workers, MAX_WORKERS)), on_result=step,
                 return_exceptions=True)
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
    p.add_argument("--json", type=_json_target, default=None, help="also write the table rows here")
    return p


def _json_target(text: str) -> Path:
    """``--json``: checked when the arguments are read, so a bad path fails before hours of runs."""
    from dlsched.core import InputError
    from dlsched.outputs import check_output_file

    try:
        return check_output_file(text, "--json")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def total_wall(records: list[dict | None]) -> float:
    return sum(r["summary"].get("wall_s", 0.0) for r in records if r is not None)


def write_json(path: Path | None, payload: Any) -> None:
    from dlsched.outputs import atomic_file

    if path is not None:
        with atomic_file(path) as tmp:
            tmp.write_text(json.dumps(_jsonable(payload), indent=1) + "\n")
