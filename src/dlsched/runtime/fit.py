"""A simulator world fitted to what the runtime's jobs reported, and the runtime's trace simulated in it.

This is how the simulator is checked against the runtime (``experiments/runtime_fidelity.py``): the world
must learn the jobs from their reports alone, never from when they finished.

* Step times: every reported step time (rounds and Sia's single-GPU profiling) fits, per model, the
  plain Pollux form of :mod:`dlsched.world.throughput` (compute ``alpha_c + beta_c * b`` for a local batch
  ``b``; on ``K > 1`` workers an all-reduce ``alpha_r + beta_r * (K - 2)``, not overlapped, as the runtime
  all-reduces after the backward pass) times one speed factor per GPU type shared by all models, on log
  step time with a robust loss. The emulated nodes share one machine, so crossing nodes costs what staying
  in one does (``alpha_n = alpha_r``, ``beta_n = beta_r``).
* Per-round overhead: every round a runtime job's workers load data, model and checkpoint and form their
  process group before the first step, write checkpoints between steps, and Ray starts new workers when a
  job starts or moves; between rounds the driver collects reports, decides and launches. Two ways to carry
  this into the world (``overhead=``):

  - ``fixed`` (default): costs in time, as the runtime pays them. Per model, the median time its jobs held
    their GPUs without stepping in their first round (the round's wall-clock length, or in a job's last
    round the worker's own time, minus the time of the steps reported) is its ``restart_delay_s``, and the
    same median over its later rounds its ``round_overhead_s``, paid every round; the simulated round is
    as long as the real runs' rounds were on average (``round_s`` plus the driver's time between rounds).
    A job that lasts a round or two pays what the real one paid.
  - ``stretch``: that held time over the time of the steps, per model, stretches every fitted step time,
    with no restart delay and rounds of the nominal length. Right on average over long jobs; a job that
    lasts a round or two is made too short, since its real time is mostly the start-up.
* Gradient statistics: each job's median reported ``grad_sqr`` and ``grad_var`` (the noise of its initial
  batch) give its statistical efficiency, by which the simulated job chooses its batch as the real one did.
* Work: the job's own request, ``epochs * samples`` samples (target-loss jobs are refused: their work is
  known only by running them).
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlsched.core import InputError

#: Robust loss on log step time: a few rounds slowed by a busy machine do not drag the fit.
LOSS, F_SCALE = "soft_l1", 0.1
#: Largest speed factor between GPU types the fit may find.
MAX_TYPE_FACTOR = 50.0


def model_name(job_id: str) -> str:
    """The simulator's model name for one runtime job (each job is its own fitted model)."""
    return f"runtime-{job_id}"


def _observations(runs: Sequence[Mapping[str, Any]], job_model: Mapping[str, str]) -> dict[str, list[dict]]:
    """Every reported step time, grouped by the runtime model (mlp, resnet, transformer)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        for job_id, obs in run["throughput_obs"].items():
            out[job_model[job_id]].extend(o for o in obs if o["step_time_s"] > 0 and o["local_bsz"] > 0)
    return out


def fit_step_times(obs: Mapping[str, list[dict]]) -> tuple[dict[str, dict[str, float]], dict[str, float],
                                                              dict[str, Any]]:
    """Per model the step-time parameters on the reference type, per GPU type its time factor, and the
    fit's quality (median and 90th-percentile relative error per model)."""
    from scipy.optimize import least_squares

    models = sorted(m for m in obs if obs[m])
    if not models:
        raise InputError("no job reported a step time: nothing to fit")
    counts: dict[str, int] = defaultdict(int)
    for m in models:
        for o in obs[m]:
            counts[o["gpu_type"]] += 1
    types = sorted(counts)
    ref = max(types, key=lambda t: (counts[t], t))
    others = [t for t in types if t != ref]
    rows = [(m, o) for m in models for o in obs[m]]
    mi = np.array([models.index(m) for m, _ in rows])
    ti = np.array([types.index(o["gpu_type"]) for _, o in rows])
    b = np.array([float(o["local_bsz"]) for _, o in rows])
    k = np.array([float(o["num_gpus"]) for _, o in rows])
    y = np.log(np.array([float(o["step_time_s"]) for _, o in rows]))
    n_m = len(models)

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = x[: 4 * n_m].reshape(n_m, 4)
        factor = np.ones(len(types))
        for j, t in enumerate(others):
            factor[types.index(t)] = x[4 * n_m + j]
        return p, factor

    def predict(x: np.ndarray) -> np.ndarray:
        p, factor = unpack(x)
        compute = p[mi, 0] + p[mi, 1] * b
        sync = np.where(k > 1, np.maximum(p[mi, 2] + p[mi, 3] * (k - 2.0), 0.0), 0.0)
        return np.asarray(factor[ti] * (compute + sync))

    x0: list[float] = []
    for m in models:
        med = statistics.median(o["step_time_s"] / max(1.0, o["local_bsz"]) for o in obs[m])
        x0 += [med * 4.0, med * 0.5, med * 2.0, med * 0.1]
    x0 += [1.0] * len(others)
    lo = [0.0] * (4 * n_m) + [1.0 / MAX_TYPE_FACTOR] * len(others)
    hi = [np.inf] * (4 * n_m) + [MAX_TYPE_FACTOR] * len(others)
    fit = least_squares(lambda x: np.log(np.maximum(predict(x), 1e-12)) - y, np.array(x0), bounds=(lo, hi),
                        loss=LOSS, f_scale=F_SCALE, x_scale="jac")
    p, factor = unpack(fit.x)
    err = np.abs(predict(fit.x) / np.exp(y) - 1.0)
    quality = {m: {"rows": int((mi == i).sum()), "median_rel_err": float(np.median(err[mi == i])),
                   "p90_rel_err": float(np.quantile(err[mi == i], 0.9))} for i, m in enumerate(models)}
    params = {m: {"alpha_c": float(p[i, 0]), "beta_c": float(p[i, 1]), "alpha_r": float(p[i, 2]),
                  "beta_r": float(p[i, 3])} for i, m in enumerate(models)}
    return params, {t: float(factor[types.index(t)]) for t in types}, {"reference_type": ref, "models": quality}


#: Which real runs a simulated policy's world is fitted to (see :func:`fit_and_simulate`).
FIT_SCOPES = ("pooled", "per-run")

#: How the runtime's per-round costs enter the fitted world (see the module docstring).
OVERHEAD_MODES = ("fixed", "stretch")


def _held_and_stepped(report: Mapping[str, Any]) -> tuple[float, float]:
    """(time the job held its GPUs in a round, time of the steps it reported in it): the round's wall-clock
    length, or in the round a job finished, the worker's own time (the round goes on without it)."""
    held = float(report["wall_s"] if report["done"] else report["round_wall_s"])
    return held, report["steps"] * float(report["step_time_s"])


def _timed_rounds(runs: Sequence[Mapping[str, Any]], job_model: Mapping[str, str]
                  ) -> Iterator[tuple[str, Mapping[str, Any], float, float]]:
    """(model, report, time held, time stepped) of every round in which a job took steps."""
    for run in runs:
        for job_id, reports in run["reports"].items():
            for r in reports:
                if r["steps"] > 0 and "round_wall_s" in r:
                    yield (job_model[job_id], r, *_held_and_stepped(r))


def fixed_overheads(runs: Sequence[Mapping[str, Any]],
                    job_model: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Per model, the median time held without stepping in a job's first round (``restart_delay_s``) and
    in its later rounds (``round_overhead_s``)."""
    first: dict[str, list[float]] = defaultdict(list)
    later: dict[str, list[float]] = defaultdict(list)
    for model, r, held, stepped in _timed_rounds(runs, job_model):
        (first if r["resumed_step"] == 0 else later)[model].append(max(0.0, held - stepped))
    out = {}
    for m in sorted(set(first) | set(later)):
        start = statistics.median(first[m]) if first[m] else statistics.median(later[m])
        out[m] = {"restart_delay_s": start,
                  "round_overhead_s": statistics.median(later[m]) if later[m] else 0.0}
    return out


def mean_round_s(runs: Sequence[Mapping[str, Any]], nominal_s: float) -> float:
    """The real runs' average round length (the time between round starts), ``nominal_s`` when no run
    has two rounds: the driver's own time between rounds is time every job waits."""
    gaps = [b - a for run in runs for a, b in zip(run.get("round_starts_s", [])[:-1],
                                                   run.get("round_starts_s", [])[1:], strict=True)]
    return max(nominal_s, statistics.fmean(gaps)) if gaps else nominal_s


def round_overheads(runs: Sequence[Mapping[str, Any]], job_model: Mapping[str, str]) -> dict[str, float]:
    """Per model, the time its jobs held their GPUs over the time of the steps they took: the round's
    wall-clock length, or in the round a job finished, the worker's own time for the round (the round
    goes on without it)."""
    wall: dict[str, float] = defaultdict(float)
    busy: dict[str, float] = defaultdict(float)
    for model, _, held, stepped in _timed_rounds(runs, job_model):
        wall[model] += held
        busy[model] += stepped
    return {m: max(1.0, wall[m] / busy[m]) for m in busy if busy[m] > 0}


def gradient_stats(runs: Sequence[Mapping[str, Any]], job_id: str) -> tuple[float, float]:
    """The median of a job's reported (grad_sqr, grad_var)."""
    sqr = [o["grad_sqr"] for run in runs for o in run["gradient_obs"].get(job_id, []) if o["grad_sqr"] > 0]
    var = [o["grad_var"] for run in runs for o in run["gradient_obs"].get(job_id, []) if o["grad_var"] >= 0]
    if not sqr or not var:
        raise InputError(f"job {job_id} reported no gradient statistics: nothing to fit its efficiency from",
                         field="job_id")
    return float(statistics.median(sqr)), float(statistics.median(var))


def fit_profiles(jobs: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]],
                 overhead_mode: str = "fixed") -> dict[str, Any]:
    """The profiles file (:mod:`dlsched.world.fitted`) of a runtime trace's jobs, from the runs' reports,
    with a ``fit`` section saying how well the step times were fitted and what was found."""
    if overhead_mode not in OVERHEAD_MODES:
        raise InputError(f"unknown overhead mode '{overhead_mode}' (known: {', '.join(OVERHEAD_MODES)})",
                         field="overhead")
    job_model = {j["job_id"]: j["model"] for j in jobs}
    params, factor, quality = fit_step_times(_observations(runs, job_model))
    fixed = fixed_overheads(runs, job_model) if overhead_mode == "fixed" else {}
    overhead = round_overheads(runs, job_model) if overhead_mode == "stretch" else {}
    models: dict[str, Any] = {}
    for j in jobs:
        if j.get("epochs") is None:
            raise InputError(f"job {j['job_id']} stops at a target loss; the simulator can play only jobs whose "
                             f"work is known in advance (give epochs)", field="epochs")
        arch = j["model"]
        if arch not in params:
            raise InputError(f"job {j['job_id']}: no {arch} job reported a step time", field="model")
        stretch = overhead.get(arch, 1.0)
        p = params[arch]
        sqr, var = gradient_stats(runs, j["job_id"])
        step_time = {}
        for gpu, f in factor.items():
            scale = f * stretch
            step_time[gpu] = {"alpha_c": p["alpha_c"] * scale, "beta_c": p["beta_c"] * scale,
                              "alpha_r": p["alpha_r"] * scale, "beta_r": p["beta_r"] * scale,
                              "alpha_n": p["alpha_r"] * scale, "beta_n": p["beta_r"] * scale,
                              "max_local_bsz": int(j["max_batch"])}
        models[model_name(j["job_id"])] = {
            "work": "samples", "target_samples": float(j["samples"]) * float(j["epochs"]),
            "init_batch": int(j["init_batch"]), "max_batch": int(j["max_batch"]), "grad_sqr": sqr,
            "grad_var": var, "step_time": step_time,
            "restart_delay_s": fixed.get(arch, {}).get("restart_delay_s", 0.0),
            "round_overhead_s": fixed.get(arch, {}).get("round_overhead_s", 0.0)}
    return {"_source": "fitted by dlsched.runtime.fit to the step times, gradient statistics and round timings "
                       "the runtime's jobs reported",
            "fit": {**quality, "type_factor": factor, "overhead_mode": overhead_mode, "round_overhead": overhead,
                    "fixed_overhead": fixed, "models": quality["models"], "step_params": params},
            "models": models}


def trace_rows(jobs: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The runtime trace as the simulator's jobs: the request each job makes in the runtime
    (:meth:`dlsched.runtime.workload.RuntimeJob.job_spec`), with its fitted model."""
    from dlsched.runtime.workload import RuntimeJob

    out = []
    for j in jobs:
        spec = RuntimeJob.model_validate(j).job_spec()
        out.append(spec.__class__(**{**_spec_fields(spec), "model": model_name(spec.job_id), "origin": None}))
    return out


def _spec_fields(spec: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.init}


def simulate_fitted(jobs: Sequence[Mapping[str, Any]], profiles: Mapping[str, Any], policy: str, round_s: float,
                    folder: Path, *, profile_batches: int, profile_steps: int) -> dict[str, Any]:
    """The runtime trace simulated on ``ray-local-4`` under ``policy`` in the fitted world."""
    import json

    import yaml

    from dlsched.runtime.workload import RAY_LOCAL_4
    from dlsched.sim.config import RunConfig
    from dlsched.sim.run import simulate
    from dlsched.traces.schema import write_trace

    cluster = folder / "ray-local-4.yaml"
    cluster.write_text(yaml.safe_dump(RAY_LOCAL_4.model_dump(mode="json", exclude_defaults=True)))
    trace = write_trace(trace_rows(jobs), folder / "trace.csv")
    world = folder / "profiles.json"
    world.write_text(json.dumps({"models": profiles["models"]}))
    config = RunConfig(cluster=str(cluster), trace=str(trace), policy=policy, round_s=round_s,
                       world={"profiles": str(world), "variability": False, "profile_batches": profile_batches,
                              "profile_steps": profile_steps})
    records = simulate(config)
    return {"summary": {k: records.summary[k] for k in ("jobs", "completed", "avg_jct_s", "makespan_s",
                                                         "restarts_per_job") if k in records.summary},
            "jobs": [{"job_id": r.job_id, "start_s": r.start_s, "finish_s": r.finish_s, "restarts": r.restarts}
                     for r in records.jobs],
            "config": records.config_record()}


def fit_and_simulate(trace: Mapping[str, Any], real: Mapping[str, Mapping[str, Any]], policies: Sequence[str],
                     round_s: float, *, profile_batches: int = 3, profile_steps: int = 2,
                     overhead_mode: str = "fixed", fit_scope: str = "pooled") -> dict[str, Any]:
    """Fit a world to the real runs' reports, simulate the trace under each policy in it and compare
    average JCT and makespan with the real runs (a policy without a real run is simulated only: its row has
    no real value). ``round_s`` is the runtime's nominal round; under ``overhead_mode="fixed"`` the
    simulated round is the real runs' average (``sim_round_s`` in the result).

    ``fit_scope``: ``pooled`` fits one world to every run's reports; ``per-run`` simulates each policy in a
    world fitted to its own run's reports only (the machine as it was during that run: on a shared machine
    two runs may see different loads), falling back to the pooled world for a policy without a real run."""
    if fit_scope not in FIT_SCOPES:
        raise InputError(f"unknown fit scope '{fit_scope}' (known: {', '.join(FIT_SCOPES)})", field="fit_scope")
    jobs = trace["jobs"]
    profiles = fit_profiles(jobs, list(real.values()), overhead_mode)
    if overhead_mode == "fixed":
        round_s = mean_round_s(list(real.values()), round_s)
    own = {p: fit_profiles(jobs, [real[p]], overhead_mode) for p in policies if p in real} \
        if fit_scope == "per-run" else {}
    simulated: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dlsched-fit-") as tmp:
        for policy in policies:
            folder = Path(tmp) / policy
            folder.mkdir()
            simulated[policy] = simulate_fitted(jobs, own.get(policy, profiles), policy, round_s, folder,
                                                profile_batches=profile_batches, profile_steps=profile_steps)
    rows = []
    for policy in policies:
        for metric in ("avg_jct_s", "makespan_s"):
            r = real[policy]["summary"][metric] if policy in real else None
            s = simulated[policy]["summary"][metric]
            ok = r is not None and s is not None and r > 0 and math.isfinite(r) and math.isfinite(s)
            rows.append({"policy": policy, "metric": metric, "real": r, "simulated": s,
                         "rel_diff": (s - r) / r if ok else None})
    for sim in simulated.values():
        # the profiles file was temporary; its models are recorded with the result
        sim["config"]["world"]["profiles"] = "the fitted profiles recorded with this result"

    return {"profiles": profiles, "simulated": simulated, "comparison": rows, "sim_round_s": round_s,
            "fit_scope": fit_scope, "profiles_per_run": own}
