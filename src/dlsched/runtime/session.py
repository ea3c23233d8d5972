"""``dlsched run`` end to end: connect to Ray, build the scheduler as the simulator does, run, summarise."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from dlsched.core import Cluster, InputError
from dlsched.runtime.driver import RoundHook, RuntimeOptions, RuntimeResult, RuntimeRun
from dlsched.runtime.worker import node_resources
from dlsched.runtime.workload import load_cluster, load_trace


def connect(cluster: Cluster, address: str | None) -> bool:
    """Join the Ray cluster at ``address``, or start Ray here carrying every node's resources (the nodes
    then share this machine); True if this call started Ray. A Ray already initialised is used as it is."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "warning"}
    if address is not None:
        kwargs["address"] = address
    else:
        total: Counter[str] = Counter()
        for res in node_resources(cluster):
            total.update(res)
        # a new Ray of our own, even if another one (without these resources) runs on this machine
        kwargs.update(address="local", resources=dict(total))
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise InputError(f"cannot reach the Ray cluster: {exc}", field="address") from None
    return True


def run(cluster_name: str, trace_name: str, policy: str, *, settings: dict[str, str] | None = None,
        seed: int = 0, address: str | None = None, options: RuntimeOptions | None = None,
        on_round: RoundHook | None = None) -> tuple[dict[str, Any], RuntimeResult]:
    """Run a runtime trace under a scheduler preset; returns the summary (the keys ``simulate`` prints)
    and the full result."""
    from dlsched.policies import build_scheduler
    from dlsched.version import __version__

    try:
        import ray  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise InputError("the runtime needs Ray and PyTorch: pip install 'dlsched[runtime]'") from None
    cluster = load_cluster(cluster_name)
    trace = load_trace(trace_name)
    for job in trace.jobs:
        if job.gpus > cluster.max_gpus_single_type():
            raise InputError(f"job {job.job_id} asks for {job.gpus} GPUs; the largest GPU type of "
                             f"{cluster.name} has {cluster.max_gpus_single_type()}", field="gpus")
    scheduler = build_scheduler(policy, settings=dict(settings or {}), seed=seed)
    if scheduler.traits.needs_oracle:
        raise InputError(f"'{policy}' as configured asks for the simulator's oracle, which a real cluster does "
                         f"not have", field="policy")
    opts = options or RuntimeOptions()
    started = connect(cluster, address)
    import ray

    try:
        result = RuntimeRun(cluster, trace, scheduler, opts, on_round=on_round).run()
    finally:
        if started:
            ray.shutdown()
    summary = {"policy": policy, "cluster": cluster.name, "trace": trace_name, "seed": seed,
               "calibration": "runtime", **result.summary, "scheduler": scheduler.describe(),
               "dlsched_version": __version__, "seed_values": [seed], "world_seed_values": [],
               "trace_seed_values": [], "seeds_varied": [], "settings": dict(settings or {}), "world_options": {},
               "window": None, "gpu_emulation": "none: real GPUs" if result.real_gpus else "emulated: steps stretched by "
               "the measured relative speed of each GPU type", "checkpoint_dir": str(Path(opts.checkpoint_dir))}
    return summary, result


#: What ``dlsched run --out`` writes: ``simulate --out``'s tables and JSON files (a runtime run has no
#: simulated segments for ``report.html``), and every report and observation the jobs made.
RUN_FILES: tuple[str, ...] = ("jobs.csv", "rounds.csv", "summary.json", "config.json", "reports.json")


def write_run_outputs(out_dir: str | Path, summary: dict[str, Any], result: RuntimeResult,
                      config: dict[str, Any], *, force: bool = False) -> Path:
    """Write a runtime run's result files into ``out_dir``, all or none (as ``simulate --out`` does).

    ``reports.json`` holds, per job, every round report its workers returned and every step-time and
    gradient observation it made: a run's own profile, from which :mod:`dlsched.runtime.fit` fits a world.
    """
    import dataclasses
    import json

    from dlsched.outputs import staged_dir
    from dlsched.sim.metrics import jobs_frame, rounds_frame

    def dump(path: Path, payload: Any) -> None:
        path.write_text(json.dumps(payload, indent=2, default=str) + "\n")

    with staged_dir(out_dir, force=force) as stage:
        jobs_frame(result.jobs).to_csv(stage.path("jobs.csv"), index=False)
        rounds_frame(result.rounds).to_csv(stage.path("rounds.csv"), index=False)
        dump(stage.path("summary.json"), summary)
        dump(stage.path("config.json"), config)
        dump(stage.path("reports.json"), {
            "reports": result.reports, "failures": result.failures,
            "throughput_obs": {k: [dataclasses.asdict(o) for o in v] for k, v in result.throughput_obs.items()},
            "gradient_obs": {k: [dataclasses.asdict(o) for o in v] for k, v in result.gradient_obs.items()}})
        return stage.folder


def config_record(cluster_name: str, trace_name: str, policy: str, *, settings: dict[str, str], seed: int,
                  address: str | None, options: RuntimeOptions, summary: dict[str, Any]) -> dict[str, Any]:
    """``config.json`` of a runtime run: everything the command was given, with the trace's jobs written
    out (a trace file may change after the run) and, for people, the version and the scheduler as built."""
    return {"dlsched_version": summary["dlsched_version"], "scheduler": summary["scheduler"],
            "cluster": cluster_name, "trace": trace_name,
            "trace_jobs": load_trace(trace_name).model_dump(mode="json")["jobs"], "policy": policy,
            "settings": dict(settings), "seed": seed, "address": address, "round_s": options.round_s,
            "round_start": options.round_start,
            "max_time_s": options.max_time_s, "checkpoint_dir": str(options.checkpoint_dir),
            "checkpoint_every": options.checkpoint_every, "gpu_emulation": summary["gpu_emulation"]}
