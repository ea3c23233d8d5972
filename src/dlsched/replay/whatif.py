"""``dlsched whatif``: the service's own jobs replayed in a world fitted to their reports, under other policies.

The steps are the three commands' (``trace export``, ``world fit``, then ``simulate`` per policy and seed):
the window's finished jobs become a trace (:mod:`dlsched.replay.export`), a world is fitted to their
reports (:mod:`dlsched.replay.fit`), and every policy (or ``--variant`` row) runs on the cluster the
service ran, at the service's round length, through the same :func:`~dlsched.cli.run_options.build_config`
and :func:`~dlsched.sim.run.run_many` that ``dlsched compare`` uses. Beside the rows stands the measured
row (what the service's jobs did) and the **fidelity** row: the policy the service actually ran, replayed
in the fitted world, against the measurement (average JCT, makespan, and each job's JCT error), so that
a reader sees how far the other rows can be trusted.

A policy that cannot run the exported jobs is a row marked with the reason, not a missing row; a replay in
which jobs never finish names them. Nothing here writes to the service's database (see
:mod:`dlsched.replay.history`).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dlsched.core import InputError, JobSpec
from dlsched.replay.at import initial_state, select_at
from dlsched.replay.export import Selection, export_specs, select_jobs, stints
from dlsched.replay.fit import fit_world
from dlsched.replay.history import History
from dlsched.sim.initial import unplaceable

#: The columns of a what-if row (the simulator's summary keys; times in seconds).
ROW_KEYS = ("jobs", "completed", "avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s",
            "utilization", "restarts_per_job", "ftf_max", "ftf_unfair_frac")


@dataclass
class WhatIfResult:
    """What :func:`whatif` returns: the measured row, one row per policy (mean over seeds with ``<key>_std``),
    the fidelity of the replay of the policy the service ran, and notes (jobs left out, marked rows)."""

    measured: dict[str, Any]
    rows: list[dict[str, Any]]
    fidelity: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: With ``at``: the state the replay started from (time, running jobs and their GPUs, queued jobs, the
    #: jobs finished before it and left out); empty otherwise.
    at: dict[str, Any] = field(default_factory=dict)
    world: dict[str, Any] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)
    runs: list[Any] = field(default_factory=list, repr=False)

    def tables(self) -> dict[str, Any]:
        """The tables as JSON-ready data (what ``--format json`` prints and ``--out`` keeps)."""
        out = {"measured": self.measured, "rows": self.rows, "fidelity": self.fidelity, "notes": self.notes}
        if self.at:
            out["at"] = self.at
        return out


def cluster_file(name: str, folder: Path) -> tuple[Path, Any]:
    """The service's cluster as a cluster file the simulator reads, and the cluster built. The nodes are
    written in the order of their names, as the service numbers its GPUs (docs/service.md, "A round"), so a
    policy that takes the first free GPUs takes the same ones in the replay."""
    from dlsched.clusters import ClusterFile, NodeGroup
    from dlsched.runtime.workload import load_cluster

    built = load_cluster(name)
    nodes = [NodeGroup(gpu_type=n.gpu_type, count=1, gpus_per_node=n.num_gpus)
             for n in sorted(built.nodes, key=lambda n: n.name)]
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(ClusterFile(name=built.name, nodes=nodes).model_dump(
        mode="json", exclude_defaults=True)))
    return path, built


def replay_specs(specs: Sequence[JobSpec], world: dict[str, Any]) -> list[JobSpec]:
    """The exported trace for the fitted world: a job that reported its steps plays its fitted model (its
    measured duration dropped); one that reported nothing plays its model of the time it held its GPUs,
    rigidly, at the count it ran (:func:`dlsched.replay.fit.silent_model`)."""
    from dlsched.core import Adaptivity

    out = []
    for s in specs:
        info = world["jobs"].get(s.job_id, {})
        if info.get("reported"):
            out.append(dataclasses.replace(s, model=info["model"], duration_s=None))
        elif info:
            count = int(info["gpus"])
            out.append(dataclasses.replace(s, model=info["model"], duration_s=None, adaptivity=Adaptivity.RIGID,
                                           num_gpus=count, min_gpus=count, max_gpus=count, gpu_counts=(),
                                           batch_size=count, per_gpu_batch=False))
        else:
            out.append(s)
    return out


def _jct_stats(jcts: list[float]) -> dict[str, float | None]:
    import numpy as np

    if not jcts:
        return {"avg_jct_s": None, "p50_jct_s": None, "p99_jct_s": None}
    return {"avg_jct_s": float(np.mean(jcts)), "p50_jct_s": float(np.percentile(jcts, 50)),
            "p99_jct_s": float(np.percentile(jcts, 99))}


def measured_row(history: History, selection: Selection, num_gpus: int,
                 node_types: dict[str, str] | None = None) -> dict[str, Any]:
    """What the service's jobs did, in the simulator's terms (JCT from submission to finish), with each job's
    JCT and the GPU type it held longest (``node_types``: node name -> type) for the fidelity row."""
    node_types = node_types or {}
    jobs = selection.jobs
    jct = [j["finished_s"] - j["submitted_s"] for j in jobs]
    end = max(j["finished_s"] for j in jobs)
    makespan = end - selection.t0
    waits = [(j["started_s"] - j["submitted_s"]) if j["started_s"] is not None else 0.0 for j in jobs]
    held = {j["id"]: stints(j, history.events.get(j["id"], []), node_types) for j in jobs}
    used = sum(s.gpus * (s.end_s - s.start_s) for ran in held.values() for s in ran)
    return {"policy": "measured", "jobs": len(jobs), "completed": len(jobs), **_jct_stats(jct),
            "makespan_s": makespan, "avg_wait_s": statistics.fmean(waits),
            "utilization": used / (num_gpus * makespan) if makespan > 0 and num_gpus else None,
            "restarts_per_job": statistics.fmean(j["restarts"] for j in jobs), "ftf_max": None,
            "ftf_unfair_frac": None, "job_jct_s": {j["id"]: j["finished_s"] - j["submitted_s"] for j in jobs},
            "job_gpu_type": {k: _longest_type({(s.gpu_type or ""): s.gpus * (s.end_s - s.start_s) for s in ran})
                             for k, ran in held.items()}}


def _longest_type(gpu_s: dict[str, float]) -> str | None:
    """The GPU type a job held longest (GPU-seconds), None when it held none."""
    held = {t: v for t, v in gpu_s.items() if t and v > 0}
    return max(held, key=lambda t: (held[t], t)) if held else None


def _round_s(history: History, nominal: float | None) -> float:
    """The service's round as it ran: the mean time between rounds, never below the nominal length."""
    times = [r["time_s"] for r in history.rounds]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    base = nominal if nominal is not None else (statistics.median(gaps) if gaps else 60.0)
    return max(base, statistics.fmean(gaps)) if gaps else base


def _round_offset_s(history: History, t0: float, round_s: float) -> float:
    """The phase of the service's rounds against the window's first submission: seconds from it to the
    first round at or after it, modulo the round (0 when no round is recorded after it)."""
    after = [r["time_s"] for r in history.rounds if r["time_s"] >= t0]
    return (min(after) - t0) % round_s if after else 0.0


def _rows_spec(policies: Sequence[str], variants: Sequence[str]) -> list[Any]:
    from dlsched.cli.variants import Variant, check_names, parse_variant

    rows = [Variant(p, {"policy": p}, names_row=False) for p in policies]
    rows += [parse_variant(v) for v in variants]
    if not rows:
        raise InputError("name at least one policy (--policies sia,fifo) or --variant", field="policies")
    check_names(rows)
    return rows


def whatif(state: str | Path | None = None, *, policies: Sequence[str] | str = ("sia", "pollux", "fifo", "hops"),
           server: str | None = None, token: str | None = None, since: str | float | None = None,
           until: str | float | None = None, user: str | None = None, seeds: int = 1,
           settings: Sequence[str] = (), variants: Sequence[str] = (), cluster: str | None = None,
           ran: str | None = None, by: str = "command", type_factors: str = "catalog", workers: int | None = None,
           history: History | None = None, at: str | float | None = None) -> WhatIfResult:
    """Replay the service's finished jobs (of ``state``, or of the service at ``server``) under each policy
    in a world fitted to their reports; see the module docstring. ``settings`` and ``variants`` are what
    ``compare``'s ``--set`` and ``--variant`` take; ``cluster`` and ``ran`` (the policy the service ran)
    default to what the service recorded; ``by`` and ``type_factors`` are :func:`~dlsched.replay.fit.fit_world`'s.
    The replay runs on the service's clock: its round length, its rounds' phase against the first submission
    (``round_offset_s``) and completions seen at the round after the last step (``completion_at_round``).
    ``at`` (the forms of ``since``) starts the replay from the cluster's state then (:mod:`dlsched.replay.at`)."""
    from dlsched.cli.run_options import build_config
    from dlsched.replay.export import parse_time
    from dlsched.replay.history import load_history
    from dlsched.sim.run import policy_label, prepare, run_many
    from dlsched.sim.spread import seed_row

    if isinstance(policies, str):
        policies = [p.strip() for p in policies.split(",") if p.strip()]
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise InputError(f"expected a whole number of at least 1, got {seeds!r}", field="seeds")
    if history is None:
        history = load_history(Path(state) if state is not None else None, server, token)
    service = history.service
    cluster_name = cluster or service.get("cluster")
    if not cluster_name:
        raise InputError("the service did not record its cluster (a state from before dlsched recorded it): "
                         "give --cluster", field="cluster")
    ran_own = not ran or ran == service.get("policy")  # the service's policy: with the stages it swapped in
    ran = ran or service.get("policy")
    if not ran:
        raise InputError("the service did not record its policy: give --ran POLICY", field="ran")
    selection = select_jobs(history, since=parse_time(since, "since"), until=parse_time(until, "until"), user=user)
    at_s = parse_time(at, "at")
    finished_before: list[str] = []
    if at_s is not None:
        selection, finished_before = select_at(selection, at_s)
    notes = [f"{k} left out ({v})" for k, v in selection.left_out.items() if k not in finished_before]
    if finished_before:
        notes.append(f"{len(finished_before)} jobs finished before --at, left out of every row (the measured one "
                     f"too): {', '.join(finished_before)}")
    rows_spec = _rows_spec(list(policies), list(variants))
    with tempfile.TemporaryDirectory(prefix="dlsched-whatif-") as tmp:
        folder = Path(tmp)
        cluster_path, built = cluster_file(cluster_name, folder)
        specs = export_specs(history, selection, built)
        world = fit_world(history, selection, built, by=by, type_factors=type_factors)
        silent = [k for k, v in world["jobs"].items() if not v["reported"]]
        if silent:
            notes.append(f"{', '.join(silent)} reported nothing (a script that does not use dlsched.train): "
                         "replayed for the time they held their GPUs, at the count they ran")
        from dlsched.traces.schema import write_trace

        replayed = replay_specs(specs, world)
        trace = write_trace(replayed, folder / "trace.csv")
        at_info: dict[str, Any] = {}
        initial, start = None, None
        if at_s is not None:
            start, at_info = initial_state(history, selection, at_s, built, world, replayed)
            at_info["finished_before"] = finished_before
            notes.extend(at_info.pop("notes"))
            notes.append(f"--at: {len(at_info['running'])} jobs start the replay on the GPUs they held then, "
                         f"{len(at_info['queued'])} queued, the rest arrive as recorded")
            if start is not None:
                initial = folder / "initial.json"
                initial.write_text(json.dumps(start.model_dump(mode="json")))
        sets = list(settings) + ["world.variability=false"]
        if world["models"]:
            (folder / "profiles.json").write_text(json.dumps({"models": world["models"]}))
            sets.append(f"world.profiles={folder / 'profiles.json'}")
        round_s = _round_s(history, service.get("round_s"))
        offset = _round_offset_s(history, selection.t0, round_s)
        fidelity_row = _fidelity_spec(ran, service if ran_own else {})
        all_rows = [*rows_spec, fidelity_row]
        configs, labels, marked = [], [], []
        for spec in all_rows:
            own = {k: v for k, v in spec.fields.items() if k != "seed"}
            # the service's clock: its round, its rounds' phase, completions seen at the next round
            flags: dict[str, Any] = {"cluster": str(cluster_path), "trace": str(trace), "round_s": str(round_s),
                                     "round_offset_s": str(offset), "completion_at_round": "true",
                                     "initial_state": None if initial is None else str(initial), **own}
            if spec.names_row:
                flags["label"] = spec.name
            reps = [build_config(None, [*sets, *spec.sets], **{**flags, "seed": str(s)}) for s in range(seeds)]
            try:
                prepared = prepare(reps[0])
            except InputError as exc:
                if spec is fidelity_row:
                    raise
                marked.append({"policy": spec.name, "error": f"cannot run the exported jobs: {exc}"})
                continue
            if initial is not None and start is not None:
                queued = unplaceable(start, replayed, rigid=prepared.scheduler.traits.rigid)
                if queued:
                    notes.append(f"{spec.name if spec is not fidelity_row else ran + ' (replayed)'}: "
                                 f"{', '.join(queued)} held another GPU count at --at than this rigid policy "
                                 "runs them at: they start the replay queued, with their progress")
            configs.extend(reps)
            labels.append(spec.name if spec is not fidelity_row else "fidelity")
        runs = run_many(configs, workers)
    measured = measured_row(history, selection, built.num_gpus, {n.name: n.gpu_type for n in built.nodes})
    rows: list[dict[str, Any]] = []
    fidelity: dict[str, Any] = {}
    for i, label in enumerate(labels):
        group = runs[i * seeds:(i + 1) * seeds]
        row = {k: v for k, v in seed_row([r.summary for r in group]).items() if k in ROW_KEYS or
               k.removesuffix("_std") in ROW_KEYS or k == "runs"}
        row["policy"] = policy_label(group[0].config) if label != "fidelity" else f"{ran} (replayed)"
        unfinished = sorted({j.job_id for r in group for j in r.jobs if j.finish_s is None})
        if unfinished:
            row["error"] = f"{len(unfinished)} jobs did not finish in the replay: {', '.join(unfinished[:8])}"
        if label == "fidelity":
            fidelity = _fidelity(measured, row, group)
            _measured_ftf(measured, group)
        else:
            rows.append(row)
    rows.extend(marked)
    for r in rows:
        if r.get("error"):
            notes.append(f"{r['policy']}: {r['error']}")
    return WhatIfResult(measured={k: v for k, v in measured.items() if not k.startswith("job_")}, rows=rows,
                        fidelity=fidelity, notes=notes, world=world, at=at_info,
                        trace=[{"job_id": s.job_id, "model": s.model, "num_gpus": s.num_gpus,
                                "adaptivity": str(s.adaptivity), "submit_time_s": s.submit_time_s} for s in specs],
                        runs=[r for i, r in enumerate(runs) if labels[i // seeds] != "fidelity"])


def _fidelity_spec(ran: str, service: dict[str, Any]) -> Any:
    from dlsched.cli.variants import Variant

    sets = [f"{k}={v}" for k, v in (service.get("settings") or {}).items()]
    stages = {k: v for k, v in (service.get("stages") or {}).items() if isinstance(v, str)}
    return Variant("fidelity", {"policy": ran, **stages}, sets=sets, names_row=False)


def _fidelity(measured: dict[str, Any], row: dict[str, Any], group: Sequence[Any]) -> dict[str, Any]:
    """The replay of the policy the service ran against the measurement. Per job: its JCT measured and
    replayed (mean over seeds) and the GPU type it held longest in each, so that a large error says whether
    the replay ran the job where the service did (a step-time or start-up misfit) or elsewhere (a placement
    that diverged: ``other_type`` lists those jobs)."""
    def rel(sim: float | None, real: float | None) -> float | None:
        return None if sim is None or not real else sim / real - 1.0

    per_job: dict[str, list[float]] = {}
    replayed_gpu_s: dict[str, dict[str, float]] = {}
    for run in group:
        for j in run.jobs:
            if j.finish_s is not None:
                per_job.setdefault(j.job_id, []).append(j.finish_s - j.submit_s)
            mine = replayed_gpu_s.setdefault(j.job_id, {})
            for t, v in j.gpu_s_by_type.items():
                mine[t] = mine.get(t, 0.0) + v
    errors = {k: statistics.fmean(v) / measured["job_jct_s"][k] - 1.0 for k, v in per_job.items()
              if measured["job_jct_s"].get(k)}
    jobs = {k: {"measured_jct_s": measured["job_jct_s"][k], "replayed_jct_s": statistics.fmean(per_job[k]),
                "rel_err": errors[k], "measured_gpu_type": measured["job_gpu_type"].get(k),
                "replayed_gpu_type": _longest_type(replayed_gpu_s.get(k, {}))} for k in sorted(errors)}
    other = [k for k, v in jobs.items() if v["measured_gpu_type"] and v["replayed_gpu_type"]
             and v["measured_gpu_type"] != v["replayed_gpu_type"]]
    worst = max(errors, key=lambda k: abs(errors[k])) if errors else None
    return {"policy": row["policy"], "measured_avg_jct_s": measured["avg_jct_s"],
            "replayed_avg_jct_s": row.get("avg_jct_s"), "avg_jct_rel_err": rel(row.get("avg_jct_s"), measured["avg_jct_s"]),
            "measured_makespan_s": measured["makespan_s"], "replayed_makespan_s": row.get("makespan_s"),
            "makespan_rel_err": rel(row.get("makespan_s"), measured["makespan_s"]),
            "job_jct_rel_err": errors, "jobs": jobs, "other_type": other,
            "job_jct_median_abs_err": statistics.median(abs(e) for e in errors.values()) if errors else None,
            "job_jct_worst": {"job": worst, **jobs[worst]} if worst else None,
            "error": row.get("error")}


def _measured_ftf(measured: dict[str, Any], group: Sequence[Any]) -> None:
    """Finish-time fairness of the measured jobs against the fitted world's isolated run times (each
    replayed job's JCT over its rho is its isolated time)."""
    isolated: dict[str, float] = {}
    for j in group[0].jobs:
        if j.finish_s is not None and j.ftf:
            isolated[j.job_id] = (j.finish_s - j.submit_s) / j.ftf
    rho = [measured["job_jct_s"][k] / v for k, v in isolated.items() if k in measured["job_jct_s"] and v > 0]
    if rho:
        measured["ftf_max"] = max(rho)
        measured["ftf_unfair_frac"] = sum(1 for r in rho if r > 1.0) / len(rho)
