"""Shared pieces of the PAL (SC'24) experiments: run specs as run configurations, run in parallel.

Every experiment is a list of run specs (plain dicts) fanned out over processes by
:func:`dlsched.sim.run.run_many`; each spec becomes a :class:`~dlsched.sim.config.RunConfig`
(:func:`config_of`) and the parent turns each run's records into a small dict of metrics (and, on request,
time series).

Variability. ``variability="world"`` uses the simulator's default draw (world option ``gpu_speeds=medians``:
every simulated GPU is a profiled GPU, scored by the median of its runs). ``variability="runs"`` reproduces
how PAL's simulator draws scores (``gpu_speeds=single-runs``): per class, single benchmark runs sampled from the
measured file (stragglers included, up to 3.6x for ResNet-50 on Longhorn). In both cases the policy sees only
the profile the engine hands it (``ClusterView.gpu_scores``), and bins it itself.

Result files. :func:`write_json` starts every file with the provenance of
:func:`dlsched.sim.about.provenance` (commit, dirty, dlsched version) and moves each run's resolved
configuration (``config``, added by :func:`metrics_of`) to a top-level ``configs`` list (``configs[i]`` is the
configuration of ``runs[i]``). Each experiment exposes ``tables(data)``, its printed tables rendered from that
file alone, which ``experiments/make_results.py`` uses to regenerate ``docs/results.md``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
#: PAL's six placements, in the order of its figure 11; "Tiresias" is packed-sticky, "Gandiva" packed.
PLACEMENTS: tuple[str, ...] = ("packed-sticky", "packed", "random-sticky", "random", "pm-first", "pal")
PAPER_NAMES = {"packed-sticky": "Tiresias", "packed": "Gandiva", "random-sticky": "Random-Sticky",
               "random": "Random", "pm-first": "PM-First", "pal": "PAL"}
ROUND_S = 360.0
#: ``variability`` modes: ``runs`` (PAL's published simulator, gpu_speeds=single-runs), ``medians`` (per-GPU
#: medians, no straggler episodes), ``episodes`` (medians plus episodes), ``world`` (the default world).
VARIABILITY_MODES: tuple[str, ...] = ("runs", "medians", "episodes", "world")
WORLD_EPISODES = {"medians": "off", "episodes": "on"}


def config_of(spec: dict[str, Any]):
    """The run configuration of a spec.

    Keys: ``cluster``, ``trace``, ``ordering``, ``placement``, ``policy`` (default ``fifo``), ``seed``,
    ``round_s`` (default 360 s), ``settings`` (policy tunables), ``world`` (world options such as
    ``locality_penalty``), ``variability`` (one of :data:`VARIABILITY_MODES`), ``jobs_window`` ((lo, hi) job index range,
    by submission order, for the averages), ``max_time_s``.
    """
    from dlsched.sim.config import RunConfig

    world = dict(spec.get("world") or {})
    mode = spec.get("variability", "world")
    if mode == "runs":
        world["gpu_speeds"] = "single-runs"
    elif mode in WORLD_EPISODES:
        world["straggler_episodes"] = WORLD_EPISODES[mode]
    window = spec.get("jobs_window")
    return RunConfig(cluster=spec["cluster"], trace=spec["trace"], policy=spec.get("policy", "fifo"),
                     ordering=spec.get("ordering"), placement=spec.get("placement"), seed=int(spec.get("seed", 0)),
                     round_s=float(spec.get("round_s", ROUND_S)), settings=spec.get("settings") or {}, world=world,
                     max_time_s=spec.get("max_time_s"), summary_jobs=tuple(window) if window else None)


def metrics_of(spec: dict[str, Any], records: Any) -> dict[str, Any]:
    """A spec's result: the spec (without ``series``), the averages over its jobs window, the same over
    multi-GPU jobs (``multi``), policy time per round, and with ``series`` the GPUs in use and the waits."""
    from dlsched.sim.run import window_jobs

    out = {k: v for k, v in spec.items() if k != "series"}
    out.update(_metrics(records.summary))
    jobs = window_jobs(records.jobs, records.config.summary_jobs)
    out["multi"] = _metrics(_summary([j for j in jobs if j.requested_gpus > 1], records))
    policy_s = np.array([r.policy_s for r in records.rounds], dtype=float)
    out["policy_median_s"] = float(np.median(policy_s)) if len(policy_s) else None
    out["policy_max_s"] = float(policy_s.max()) if len(policy_s) else None
    out["rounds"] = len(records.rounds)
    out["wall_s"] = records.wall_s
    out["config"] = records.config_record()
    if spec.get("series"):
        # Step function: keep the rounds where the count changes (and the last one).
        pts = [[round(r.time_s), r.allocated_gpus] for r in records.rounds]
        out["gpus_in_use"] = [p for i, p in enumerate(pts) if i == 0 or i == len(pts) - 1 or p[1] != pts[i - 1][1]]
        out["waits"] = [[j.job_id, round(j.submit_s, 1), round(j.wait_s, 1)] for j in window_jobs(records.jobs, None)]
    return out


def _summary(jobs: list, records: Any) -> dict[str, Any]:
    from dlsched.sim.metrics import summarize

    return summarize(jobs, records.rounds, num_gpus=records.num_gpus, sim_wall_s=0.0)


def _metrics(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: summary[k] for k in ("jobs", "completed", "avg_jct_s", "p99_jct_s", "avg_wait_s", "makespan_s")}


def run_all(specs: list[dict[str, Any]], *, workers: int | None = None,
            progress: Callable[[int, int, dict], None] | None = None) -> list[dict[str, Any]]:
    """Run specs in a process pool (``workers`` defaults to the CPU count); results in spec order."""
    from dlsched.progress import progress_bar
    from dlsched.sim.about import code_state
    from dlsched.sim.run import run_many

    code_state()  # the code as it is at the start is what the runs run, whatever happens to the checkout later
    workers = workers or int(os.environ.get("DLSCHED_WORKERS", os.cpu_count() or 1))
    results: list[dict[str, Any] | None] = [None] * len(specs)
    done = 0

    def finished(i: int, records: Any) -> None:
        nonlocal done
        done += 1
        advance()
        results[i] = metrics_of(specs[i], records)
        if progress:
            progress(done, len(specs), results[i])  # type: ignore[arg-type]

    with progress_bar(len(specs), "runs") as advance:
        run_many([config_of(s) for s in specs], workers, on_result=finished)
    return results  # type: ignore[return-value]


def stderr_progress(done: int, total: int, res: dict) -> None:
    print(f"  [{done}/{total}] {res.get('trace')} {res.get('ordering') or res.get('policy')}@{res.get('placement')} "
          f"seed={res.get('seed')} avg_jct={_h(res.get('avg_jct_s'))} ({res.get('wall_s', 0):.1f}s)",
          file=sys.stderr, flush=True)


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x / 3600:.2f}h"


def geomean(xs: Iterable[float]) -> float:
    arr = np.asarray([x for x in xs if x is not None and x > 0], dtype=float)
    return float(np.exp(np.log(arr).mean())) if len(arr) else math.nan


def write_json(name: str, payload: dict[str, Any], *, indent: int | None = 1) -> Path:
    """Write ``experiments/results/NAME``: provenance, then ``payload``; the ``config`` of each of
    ``payload["runs"]`` moves to the top-level ``configs`` list, in the same order."""
    from dlsched.outputs import atomic_file
    from dlsched.sim.about import provenance

    runs = payload.get("runs")
    if isinstance(runs, list):
        configs = [r.get("config") for r in runs]
        payload = {**payload, "runs": [{k: v for k, v in r.items() if k != "config"} for r in runs]}
        payload = {**provenance(configs), **payload}
    else:
        payload = {**provenance(), **payload}
    path = RESULTS / name
    text = json.dumps(payload, indent=indent, separators=None if indent else (",", ":"), default=str)
    with atomic_file(path) as tmp:
        tmp.write_text(text + "\n")
    return path


def table(rows: list[list[str]], header: list[str]) -> str:
    """A GitHub-markdown table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    def fmt(r: list) -> str:
        return "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(header), sep, *(fmt(r) for r in rows)])


#: Keys of a run's result that are outcomes or name the placement, not the situation it ran in.
_OUTCOME_KEYS = frozenset({"jobs", "completed", "avg_jct_s", "p99_jct_s", "avg_wait_s", "makespan_s", "multi",
                           "policy_median_s", "policy_max_s", "rounds", "wall_s", "config", "placement", "variant",
                           "settings", "gpus_in_use", "waits"})


def pal_vs_pm_first(runs: list[dict[str, Any]]) -> str:
    """A sentence saying in how many paired runs (same situation: workload, draw, seed, ordering, penalty, ...)
    PAL's average JCT differs from PM-First's, and by how much at most."""
    pairs: dict[str, dict[str, float]] = {}
    for r in runs:
        name = r.get("variant", r["placement"])
        if name in ("pal", "pm-first") and r.get("avg_jct_s") is not None:
            situation = json.dumps({k: v for k, v in r.items() if k not in _OUTCOME_KEYS}, sort_keys=True,
                                   default=str)
            pairs.setdefault(situation, {})[name] = r["avg_jct_s"]
    both = [p for p in pairs.values() if len(p) == 2]
    diff = [p["pal"] / p["pm-first"] - 1 for p in both if p["pal"] != p["pm-first"]]
    if not diff:
        return f"PAL's average JCT equals PM-First's in all {len(both)} paired runs."
    lower = sum(d < 0 for d in diff)
    return (f"PAL's average JCT differs from PM-First's in {len(diff)} of {len(both)} paired runs (all but the "
            f"placement equal), by at most {100 * max(abs(d) for d in diff):.2g}%; PAL is the lower in {lower} of "
            f"them.")
