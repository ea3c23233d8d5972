"""A simulator world fitted to what a service's jobs reported, and to nothing that says when they finished.

From each job's ``progress`` reports (docs/service.md, the worker protocol) and its ``placed`` events:

* **step time** per GPU type and count: every reported mean step time, with its local batch, world size and
  GPU type, fits the plain Pollux step-time form per job (or per distinct command, ``by="command"``) times
  one speed factor per GPU type shared by all jobs: :func:`dlsched.runtime.fit.fit_step_times`, the fit
  ``dlsched run``'s fidelity check uses. The factors are the catalog's relative speeds by default
  (``type_factors="catalog"``: what an emulated cluster stretches each step by; a free factor per type
  soaks up the machine's load and the GPU count, see :func:`_catalog_factors`), or fitted too (``fitted``). Per distinct command (the default) pools the jobs of one training
  code (the spec's ``model``, else the command itself): a job seen on one GPU type alone tells nothing of
  the others, and the pool's jobs, placed on several, do; a type no job ran on takes the packaged relative
  speed. A report that covers only an incarnation's first step is left out
  of this fit when later ones exist (that step warms up: it belongs to the start-up cost);
* **start-up cost** per incarnation: from its placement (the ``placed`` event, when the service launched
  the workers) to the start of its first reported step (the first report's time less the steps it covers at
  the incarnation's steady step time); the job's median is its ``restart_delay_s``, paid at every start;
* **statistical efficiency**: the median reported ``grad_sqr`` and ``grad_var``
  (:func:`dlsched.runtime.fit.gradient_stats`), by which the simulated job picks its batch;
* **profile length**: from each ``profiling`` event to the last ``profiled`` event after it (the service
  profiles a job on one GPU of each type at once, for its ``--profile-s`` of steps after their start-up, and
  the job waits for the last); the job's median is its model's ``profile_s``, what a replayed profile lasts.
  A history without profiles (a service that ran a policy that does not profile) leaves the world's own
  profile, the start-up and a few steps, which is shorter;
* **work**: the samples the job reported it had seen (``samples_seen`` of its last report), whatever its
  batch, as ``work: samples``.

The fit's error per job (median and 90th percentile of |predicted / reported step time - 1|) goes with it.
A job that reported nothing (a script that does not use ``dlsched.train``) keeps the time it held its GPUs,
by GPU count and type, and is marked ``reported: false``: this is the only number here that comes from a
finish time, and the replay plays it (:func:`silent_model`) rigidly at the count it ran, as long as it ran,
on any GPU type. Nothing else reads
``finished_s`` or a ``succeeded`` event (``tests/whatif`` perturbs both and checks the fitted world is
unchanged).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from dlsched.core import InputError
from dlsched.replay.export import Selection, command_model, held_by_count, node_types_of, stints
from dlsched.replay.history import History
from dlsched.runtime import fit as runtime_fit
from dlsched.service.spec import JobSubmission

#: How a fit groups jobs into one step-time model.
FIT_BY = ("command", "job")
#: Where the GPU types' speed factors come from: the packaged relative speeds (``catalog``, what an
#: emulated cluster such as ``ray-local-4`` stretches each step by) or fitted to the reports (``fitted``).
TYPE_FACTORS = ("catalog", "fitted")


def model_name(job_id: str) -> str:
    """The fitted world's model of one service job."""
    return f"svc-{job_id}"


def _progress(history: History, job_id: str) -> list[dict[str, Any]]:
    return [r for r in history.telemetry.get(job_id, []) if r.get("type") == "progress"
            and isinstance(r.get("step_time_s"), int | float) and r["step_time_s"] > 0
            and isinstance(r.get("last_step"), int) and isinstance(r.get("first_step"), int)]


def _steady(reports: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """An incarnation's reports without a first report that covers its first step alone (when later exist),
    each timed by the wall clock (:func:`_wall_step_s`)."""
    by_inc: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in reports:
        by_inc[r.get("incarnation")].append(r)
    out = []
    for rs in by_inc.values():
        rs = sorted(rs, key=lambda r: r["first_step"])
        timed = [{**r, "step_time_s": _wall_step_s(prev, r) or r["step_time_s"]}
                 for prev, r in zip([None, *rs[:-1]], rs, strict=True)]
        if len(timed) > 1 and timed[0]["last_step"] == timed[0]["first_step"]:
            timed = timed[1:]
        out.extend(timed)
    return out


def _wall_step_s(prev: dict[str, Any] | None, r: dict[str, Any]) -> float | None:
    """Wall seconds per step between an incarnation's previous report and this one, None without a previous
    one. What the job took per step, where the reported ``step_time_s`` times the training step alone: the
    exchange of control values after it, data loading, checkpoints and reports are in the wall clock (a
    2-GPU MLP on ray-local-4 reported 8.3 ms per step and took 10 ms)."""
    if prev is None or not isinstance(prev.get("time"), int | float) or not isinstance(r.get("time"), int | float):
        return None
    steps = r["last_step"] - prev["last_step"]
    took = float(r["time"]) - float(prev["time"])
    return took / steps if steps > 0 and took > 0 else None


def _observation(r: dict[str, Any], fallback_type: str | None) -> dict[str, Any] | None:
    gtype = r.get("gpu_type") or fallback_type
    local = r.get("local_bsz") or r.get("batch_size")
    if not gtype or not local or not r.get("world_size"):
        return None
    return {"step_time_s": float(r["step_time_s"]), "local_bsz": int(local), "num_gpus": int(r["world_size"]),
            "gpu_type": str(gtype)}


def startup_costs(history: History, job: dict[str, Any]) -> list[float]:
    """Seconds from each incarnation's placement to the start of its first reported step."""
    placed = {int(e.get("data", {}).get("incarnation", -1)): float(e["time_s"])
              for e in history.events.get(job["id"], []) if e["kind"] == "placed"}
    reports = _progress(history, job["id"])
    out = []
    for inc, launch in sorted(placed.items()):
        mine = sorted((r for r in reports if r.get("incarnation") == inc), key=lambda r: r["first_step"])
        if not mine:
            continue
        first = mine[0]
        steady = statistics.median(r["step_time_s"] for r in (mine[1:] or mine))
        covered = first["last_step"] - first["first_step"] + 1
        out.append(max(0.0, float(first["time"]) - launch - covered * steady))
    return out


def profile_lengths(history: History, job: dict[str, Any]) -> list[float]:
    """Seconds from each of the job's ``profiling`` events to the last ``profiled`` event after it."""
    evs = sorted(history.events.get(job["id"], []), key=lambda e: e["time_s"])
    out = []
    for i, e in enumerate(evs):
        if e["kind"] != "profiling":
            continue
        ends = []
        for x in evs[i + 1:]:
            if x["kind"] == "profiled":
                ends.append(float(x["time_s"]))
            elif x["kind"] in ("profiling", "placed", "failed", "cancelled"):
                break
        if ends:
            out.append(max(ends) - float(e["time_s"]))
    return out


def fit_world(history: History, selection: Selection, cluster: Any | None = None, *,
              by: str = "command", type_factors: str = "catalog") -> dict[str, Any]:
    """The fitted world: a profiles file (``models``, :mod:`dlsched.world.fitted`) for the jobs that reported
    their steps, and ``jobs``: per job what was fitted or, for a job that reported nothing, the time it held
    its GPUs, with the fit's error (see the module docstring). ``type_factors`` says whether the GPU types'
    speed factors are the catalog's relative speeds or fitted (see :func:`_catalog_factors`)."""
    if by not in FIT_BY:
        raise InputError(f"unknown grouping '{by}' (known: {', '.join(FIT_BY)})", field="by")
    if type_factors not in TYPE_FACTORS:
        raise InputError(f"unknown type factors '{type_factors}' (known: {', '.join(TYPE_FACTORS)})",
                         field="type_factors")
    types = node_types_of(history, cluster)
    group: dict[str, str] = {}
    obs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for j in selection.jobs:
        sub = JobSubmission.model_validate(j["submission"])
        key = model_name(j["id"]) if by == "job" else (sub.model or command_model(sub))
        rows = [o for r in _steady(_progress(history, j["id"])) if (o := _observation(r, j.get("gpu_type")))]
        if rows:
            group[j["id"]] = key
            obs[key].extend(rows)
    jobs: dict[str, dict[str, Any]] = {}
    models: dict[str, Any] = {}
    params: dict[str, dict[str, float]] = {}
    factor: dict[str, float] = {}
    quality: dict[str, Any] = {"models": {}}
    if obs and type_factors == "catalog" and cluster is not None:
        params, factor, quality = _fit_at_catalog_speeds(obs, cluster)
    elif obs:
        params, factor, quality = runtime_fit.fit_step_times(obs)
        factor = _all_types(factor, quality["reference_type"], cluster)
    round_s = float(history.service.get("round_s") or 0.0)
    for j in sorted(selection.jobs, key=lambda j: j["submitted_s"]):
        sub = JobSubmission.model_validate(j["submission"])
        held = held_by_count(stints(j, history.events.get(j["id"], []), types))
        if j["id"] not in group:
            if not held:
                continue
            (count, _), _ = max(held.items(), key=lambda kv: kv[1])
            # the service saw its end at the first round after it: on average half a round late
            ran_s = max(sum(held.values()) - 0.5 * round_s, 0.5 * sum(held.values()))
            # with no reported job there are no fitted types: the silent job runs alike on every type there is
            every = {t: 1.0 for t in cluster.type_names} if cluster is not None else {"t4": 1.0}
            models[model_name(j["id"])] = silent_model(ran_s, count, factor or every)
            _add_profile(models[model_name(j["id"])], history, j)
            jobs[j["id"]] = {"reported": False, "model": model_name(j["id"]), "gpus": count,
                             "why": "reported no step times (a script that does not use dlsched.train): "
                                    "replayed for the time it held its GPUs, on any GPU type",
                             "held_s": {f"{k}x{t}": v for (k, t), v in sorted(held.items())}}
            continue
        key = group[j["id"]]
        models[model_name(j["id"])], notes = _model(history, j, sub, params[key], factor)
        costs = startup_costs(history, j)
        models[model_name(j["id"])]["restart_delay_s"] = statistics.median(costs) if costs else 0.0
        _add_profile(models[model_name(j["id"])], history, j)
        jobs[j["id"]] = {"reported": True, "model": model_name(j["id"]), "fit_group": key,
                         "step_time_error": quality["models"][key], "startup_s": costs,
                         "samples": models[model_name(j["id"])]["target_samples"], "notes": notes}
    return {"_source": "fitted by dlsched.replay.fit to the step times, gradient statistics and start-up times "
                       "a dlsched service's jobs reported; no completion time enters it",
            "fit": {"by": by, "type_factors": quality.get("type_factors", "fitted") if obs else type_factors,
                    "type_factor": factor, "reference_type": quality.get("reference_type"),
                    "step_params": params},
            "models": models, "jobs": jobs}


#: Steps a silent job's model divides its held time into (any number works; this keeps steps short).
SILENT_STEPS = 1000


def silent_model(held_s: float, gpus: int, types: dict[str, Any]) -> dict[str, Any]:
    """A job that reported nothing, as a model that runs for ``held_s`` on ``gpus`` GPUs of any type: nothing
    says how its speed depends on the type, so it is taken to be the same on all (start-up included)."""
    step = max(held_s, 1e-3) / SILENT_STEPS
    params = {"alpha_c": step, "beta_c": 0.0, "alpha_r": 0.0, "beta_r": 0.0, "alpha_n": 0.0, "beta_n": 0.0,
              "max_local_bsz": 1}
    return {"work": "samples", "target_samples": float(SILENT_STEPS * gpus), "init_batch": gpus,
            "max_batch": gpus, "grad_sqr": 1.0, "grad_var": 0.0, "step_time": {t: params for t in types},
            "restart_delay_s": 0.0, "round_overhead_s": 0.0}


def _catalog_factors(cluster: Any) -> dict[str, float]:
    """Each GPU type's step-time factor against the cluster's fastest type: the packaged relative speeds,
    which are what an emulated cluster stretches every step by (:mod:`dlsched.runtime.emulation`).

    Why not fit them: a service's jobs seldom run one configuration on two types, so a free factor per type
    soaks up what differs between the runs it compares (the GPU count, and above all how loaded the machine
    was: on ``ray-local-4`` a job alone on an idle machine against one among six measured a100 ~10x faster
    than t4, where the emulation stretches t4 2.9x)."""
    from dlsched.runtime.emulation import slowdowns

    return dict(slowdowns(cluster))


def _fit_at_catalog_speeds(obs: dict[str, list[dict[str, Any]]], cluster: Any
                           ) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, Any]]:
    """:func:`dlsched.runtime.fit.fit_step_times` with the types' factors fixed to the catalog's: every step
    time is brought to the fastest type (divided by its type's factor) and fitted as one type."""
    factor = _catalog_factors(cluster)
    reference = min(factor, key=lambda t: (factor[t], t))
    scaled = {m: [{**o, "step_time_s": o["step_time_s"] / factor.get(o["gpu_type"], 1.0), "gpu_type": reference}
                  for o in rows] for m, rows in obs.items()}
    params, _, quality = runtime_fit.fit_step_times(scaled)
    return params, factor, {**quality, "reference_type": reference, "type_factors": "catalog"}


def _all_types(factor: dict[str, float], reference: str, cluster: Any | None) -> dict[str, float]:
    """The fitted type factors, and for a type of the cluster no job ran on, the packaged relative speed."""
    if cluster is None:
        return factor
    from dlsched.world.base import World, WorldConfig

    speed = World(cluster, WorldConfig(variability=False)).throughput.relative_speed
    out = dict(factor)
    for t in cluster.type_names:
        if t not in out:
            out[t] = factor[reference] * speed(reference) / speed(t)
    return out


def _model(history: History, job: dict[str, Any], sub: JobSubmission, p: dict[str, float],
           factor: dict[str, float]) -> tuple[dict[str, Any], list[str]]:
    """One job's profiles-file model from its fitted step-time parameters and its own reports."""
    notes: list[str] = []
    reports = _progress(history, job["id"])
    seen = max((int(r.get("samples_seen") or 0) for r in reports), default=0)
    if seen <= 0:
        seen = max(int(r["last_step"]) for r in reports) * int(reports[-1].get("batch_size") or 1)
        notes.append("no samples_seen reported: work is steps times the batch")
    low, high, counts = sub.gpu_bounds()
    init = sub.batch_size or int(reports[0].get("batch_size") or 1)
    if sub.adaptivity == "per-gpu-batch":
        init *= counts[(len(counts) - 1) // 2] if counts else low
    top = max(init, sub.max_batch_size or init)
    try:
        sqr, var = runtime_fit.gradient_stats([{"gradient_obs": {job["id"]: [
            {"grad_sqr": r["grad_sqr"], "grad_var": r["grad_var"]} for r in reports
            if isinstance(r.get("grad_sqr"), int | float) and isinstance(r.get("grad_var"), int | float)]}}],
            job["id"])
    except InputError:
        sqr, var = 1.0, 1e6
        notes.append("no gradient statistics reported: every batch size taken as equally efficient")
    step_time = {gpu: {"alpha_c": p["alpha_c"] * f, "beta_c": p["beta_c"] * f, "alpha_r": p["alpha_r"] * f,
                       "beta_r": p["beta_r"] * f, "alpha_n": p["alpha_r"] * f, "beta_n": p["beta_r"] * f,
                       "max_local_bsz": int(top)} for gpu, f in factor.items()}
    return ({"work": "samples", "target_samples": float(seen), "init_batch": int(init), "max_batch": int(top),
             "grad_sqr": sqr, "grad_var": var, "step_time": step_time, "restart_delay_s": 0.0,
             "round_overhead_s": 0.0}, notes)


def _add_profile(model: dict[str, Any], history: History, job: dict[str, Any]) -> None:
    """The job's median measured profile length as its model's ``profile_s`` (nothing when never profiled)."""
    lengths = [v for v in profile_lengths(history, job) if v > 0]
    if lengths:
        model["profile_s"] = statistics.median(lengths)
