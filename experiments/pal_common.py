"""Shared pieces of the PAL (SC'24) experiments: one simulation as a picklable task, run in parallel.

Every experiment is a list of run specs (plain dicts) fanned out over processes with
``concurrent.futures``; each worker builds the cluster, trace, scheduler and world itself and returns a small
dict of metrics (and, on request, time series), so the parent never holds simulation state.

Variability. ``variability="world"`` uses the simulator's own draw (``world/variability.py``: every
simulated GPU is a profiled GPU, scored by the median of its runs). ``variability="runs"`` reproduces how
PAL's simulator draws scores: per class, single benchmark runs sampled from the measured file (stragglers
included, up to 3.6x for ResNet-50 on Longhorn), see :func:`dlsched.estimators.pm_scores.sample_runs`. In both
cases the policy sees only the profile the engine hands it (``ClusterView.gpu_scores``), and bins it itself.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
#: PAL's six placements, in the order of its figure 11; "Tiresias" is packed-sticky, "Gandiva" packed.
PLACEMENTS: tuple[str, ...] = ("packed-sticky", "packed", "random-sticky", "random", "pm-first", "pal")
PAPER_NAMES = {"packed-sticky": "Tiresias", "packed": "Gandiva", "random-sticky": "Random-Sticky",
               "random": "Random", "pm-first": "PM-First", "pal": "PAL"}
ROUND_S = 360.0


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one simulation described by ``spec`` and return its metrics (worker entry point).

    Keys: ``cluster``, ``trace``, ``ordering``, ``placement``, ``policy`` (default ``fifo``), ``seed``,
    ``round_s``, ``settings`` (``--set`` pairs: world, engine and policy keys), ``variability``
    (``world`` or ``runs``), ``jobs_window`` ((lo, hi) job index range, by submission order, for the averages),
    ``series`` (also return GPUs in use per round and wait per job), ``max_time_s``.
    """
    from dlsched.clusters import load_cluster
    from dlsched.estimators.pm_scores import sample_runs
    from dlsched.policies import build_scheduler
    from dlsched.sim.engine import Engine, SimConfig
    from dlsched.sim.runner import load_jobs, split_settings
    from dlsched.world.base import World
    from dlsched.world.variability import GpuSpeeds

    t0 = time.perf_counter()
    cluster = load_cluster(spec["cluster"])
    specs, _ = load_jobs(spec["trace"], None)
    settings = dict(spec.get("settings") or {})
    world_cfg, engine_kwargs, policy_settings = split_settings(settings)
    seed = int(spec.get("seed", 0))
    scheduler = build_scheduler(spec.get("policy", "fifo"), ordering=spec.get("ordering"),
                                placement=spec.get("placement"), settings=policy_settings, seed=seed)
    world = World(cluster, world_cfg, seed=seed)
    if spec.get("variability", "world") == "runs" and cluster.variability is not None:
        prof = sample_runs(cluster.variability, cluster.num_gpus, seed=seed)
        world.speeds = GpuSpeeds(prof.scores, cluster.num_gpus, family=cluster.variability, origin="runs")
    if spec.get("max_time_s") is not None:
        engine_kwargs["max_time_s"] = float(spec["max_time_s"])
    engine = Engine(cluster, specs, scheduler, world,
                    SimConfig(round_s=float(spec.get("round_s", ROUND_S)), seed=seed, **engine_kwargs))
    result = engine.run()
    # One record per job, by id (defensive: older engines listed finished jobs twice).
    jobs = list({j.job_id: j for j in result.jobs}.values())
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, _num(jobs[i].job_id)))
    jobs = [jobs[i] for i in order]
    out = {k: v for k, v in spec.items() if k != "series"}
    out.update(_metrics(jobs, spec.get("jobs_window")))
    multi = [j for j in _window(jobs, spec.get("jobs_window")) if j.requested_gpus > 1]
    out["multi"] = _metrics(multi, None)
    policy_s = np.array([r.policy_s for r in result.rounds], dtype=float)
    out["policy_median_s"] = float(np.median(policy_s)) if len(policy_s) else None
    out["policy_max_s"] = float(policy_s.max()) if len(policy_s) else None
    out["rounds"] = len(result.rounds)
    out["wall_s"] = time.perf_counter() - t0
    if spec.get("series"):
        # Step function: keep the rounds where the count changes (and the last one).
        pts = [[round(r.time_s), r.allocated_gpus] for r in result.rounds]
        out["gpus_in_use"] = [p for i, p in enumerate(pts) if i == 0 or i == len(pts) - 1 or p[1] != pts[i - 1][1]]
        out["waits"] = [[j.job_id, round(j.submit_s, 1), round(j.wait_s, 1)] for j in jobs]
    return out


def _num(job_id: str) -> float:
    try:
        return float(job_id)
    except ValueError:
        return math.inf


def _window(jobs: list, window: Iterable[int] | None) -> list:
    if window is None:
        return jobs
    lo, hi = window
    return jobs[lo:hi]


def _metrics(jobs: list, window: Iterable[int] | None) -> dict[str, Any]:
    sel = _window(jobs, window)
    done = [j for j in sel if j.finish_s is not None]
    jct = np.array([j.finish_s - j.submit_s for j in done], dtype=float)
    out: dict[str, Any] = {"jobs": len(sel), "completed": len(done)}
    out["avg_jct_s"] = float(jct.mean()) if len(jct) else None
    out["p99_jct_s"] = float(np.percentile(jct, 99)) if len(jct) else None
    out["avg_wait_s"] = float(np.mean([j.wait_s for j in sel])) if sel else None
    if done:
        out["makespan_s"] = float(max(j.finish_s for j in done) - min(j.submit_s for j in sel))
    else:
        out["makespan_s"] = None
    return out


def run_all(specs: list[dict[str, Any]], *, workers: int | None = None,
            progress: Callable[[int, int, dict], None] | None = None) -> list[dict[str, Any]]:
    """Run specs in a process pool (``workers`` defaults to the CPU count); results in spec order."""
    workers = workers or int(os.environ.get("DLSCHED_WORKERS", os.cpu_count() or 1))
    results: list[dict[str, Any] | None] = [None] * len(specs)
    if workers <= 1:
        for i, s in enumerate(specs):
            results[i] = run_spec(s)
            if progress:
                progress(i + 1, len(specs), results[i])  # type: ignore[arg-type]
        return results  # type: ignore[return-value]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(run_spec, s): i for i, s in enumerate(specs)}
        for done, fut in enumerate(as_completed(futs), start=1):
            i = futs[fut]
            results[i] = fut.result()
            if progress:
                progress(done, len(specs), results[i])  # type: ignore[arg-type]
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


def write_json(name: str, payload: Any, *, indent: int | None = 1) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    text = json.dumps(payload, indent=indent, separators=None if indent else (",", ":"))
    path.write_text(text + "\n")
    return path


def table(rows: list[list[str]], header: list[str]) -> str:
    """A GitHub-markdown table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    def fmt(r: list) -> str:
        return "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(header), sep, *(fmt(r) for r in rows)])
