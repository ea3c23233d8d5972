"""The ``dlsched`` command.

stdout carries only the result (a table or JSON); progress bars and log lines go to stderr, so the output
can be piped. Bad input ends with one ``error:`` line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dlsched.cli_common import Format
from dlsched.cli_common import fail as _fail
from dlsched.core import InputError
from dlsched.sim.invariants import PolicyError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Schedule deep-learning training jobs on shared, heterogeneous GPU clusters.")
#: piped output gets the whole table rather than rich's default 80 columns
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 220)
err = Console(stderr=True)




def _guard(fn):
    """Turn input errors into one line and exit 2; policy invariant violations into exit 1."""
    try:
        return fn()
    except InputError as exc:
        raise _fail(str(exc)) from None
    except PolicyError as exc:
        raise _fail(f"invariant violated: {exc}", 1) from None


class _LazyProgress:
    """A progress bar on stderr that appears only for runs longer than a second."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.t0 = time.perf_counter()
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, sim_t: float, done: int, total: int) -> None:
        if self.progress is None:
            if time.perf_counter() - self.t0 < 1.0 or not err.is_terminal and not _force_progress():
                return
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                                     "{task.total} jobs"), TextColumn("sim {task.fields[sim_h]:.1f} h"),
                                     TimeElapsedColumn(), console=err, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.description, total=total, sim_h=0.0)
        self.progress.update(self.task, completed=done, sim_h=sim_t / 3600.0)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _force_progress() -> bool:
    import os

    return os.environ.get("DLSCHED_PROGRESS", "") == "1"


def _print_summaries(rows: list[dict[str, Any]], fmt: Format) -> None:
    if fmt is Format.json:
        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
        return
    table = Table(title=None, show_lines=False)
    cols = [("policy", "policy", None), ("jobs", "jobs", None), ("done", "completed", None),
            ("avg JCT h", "avg_jct_s", 3600), ("p99 JCT h", "p99_jct_s", 3600), ("makespan h", "makespan_s", 3600),
            ("avg wait h", "avg_wait_s", 3600), ("GPU-h/job", "gpu_hours_per_job", 1),
            ("util", "utilization", 1), ("restarts/job", "restarts_per_job", 1), ("FTF max", "ftf_max", 1),
            ("unfair", "ftf_unfair_frac", 1), ("LR max", "latency_ratio_max", 1),
            ("frag/round", "fragments_per_round", 1), ("policy ms p50", "policy_time_median_s", 1e-3),
            ("wall s", "sim_wall_s", 1)]
    for title, _, _ in cols:
        table.add_column(title, justify="left" if title == "policy" else "right")
    for row in rows:
        cells = []
        for _, key, scale in cols:
            v = row.get(key)
            if v is None:
                cells.append("-")
            elif scale is None:
                cells.append(str(v) if not isinstance(v, float) else f"{v:g}")
            else:
                cells.append(f"{v / scale:.2f}")
        table.add_row(*cells)
    out.print(table)


def _config(cluster, trace, policy, ordering, placement, settings, seed, round_s, jobs):
    from dlsched.sim.runner import RunConfig, parse_settings

    return RunConfig(cluster=cluster, trace=trace, policy=policy, ordering=ordering, placement=placement,
                     settings=parse_settings(settings), seed=seed, round_s=round_s, jobs=jobs)


ClusterOpt = Annotated[str, typer.Option("--cluster", help="Preset name or cluster YAML file.")]
TraceOpt = Annotated[str, typer.Option("--trace", help="Named trace (sia-philly:1, pal-philly:1, "
                                       "synthetic:rate=20,hours=8,seed=1, ...) or a trace file.")]
OrderingOpt = Annotated[str | None, typer.Option("--ordering", help="Override the policy's ordering stage.")]
PlacementOpt = Annotated[str | None, typer.Option("--placement", help="Override the policy's placement stage.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Tunable key=value (policy, world or engine); "
                                                   "repeatable.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for every random choice of the run.")]
RoundOpt = Annotated[float, typer.Option("--round-s", help="Scheduling round length in seconds.")]
JobsOpt = Annotated[int | None, typer.Option("--jobs", help="Use only the first N jobs of the trace.")]
FormatOpt = Annotated[Format, typer.Option("--format", help="table (human) or json (one object per line).")]


@app.command()
def simulate(
    cluster: ClusterOpt = "sia-hetero-64",
    trace: TraceOpt = "synthetic:rate=20,hours=8,seed=1",
    policy: Annotated[str, typer.Option("--policy", help="Scheduler name (see 'dlsched policies').")] = "fifo",
    ordering: OrderingOpt = None,
    placement: PlacementOpt = None,
    set_: SetOpt = None,
    seed: SeedOpt = 0,
    round_s: RoundOpt = 60.0,
    jobs: JobsOpt = None,
    out_dir: Annotated[str | None, typer.Option("--out", help="Write jobs.csv, rounds.csv, summary.json, "
                                                "config.json and report.html here.")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Simulate one scheduler on one cluster and trace."""
    from dlsched.sim import runner

    def go():
        cfg = _config(cluster, trace, policy, ordering, placement, set_, seed, round_s, jobs)
        bar = _LazyProgress(f"{cfg.policy}")
        engine, trace_name = runner.prepare(cfg, on_progress=bar)
        try:
            result = engine.run()
        finally:
            bar.close()
        from dlsched.sim.metrics import summarize

        summary = summarize(result.jobs, result.rounds, num_gpus=result.num_gpus, sim_wall_s=result.sim_wall_s)
        label = runner.policy_label(cfg)
        summary = {"policy": label, "cluster": cfg.cluster, "trace": trace_name, "seed": cfg.seed, **summary}
        output = runner.RunOutput(config=cfg, result=result, summary=summary, label=label)
        if out_dir is not None:
            runner.write_outputs(out_dir, [output], summary)
            err.print(f"wrote {out_dir}/ (jobs.csv, rounds.csv, summary.json, config.json, report.html)")
        _print_summaries([summary], fmt)

    _guard(go)


def _run_one(cfg_json: str) -> Any:
    """Worker-process entry point for ``compare``."""
    from dlsched.sim.runner import RunConfig, run

    return run(RunConfig.model_validate_json(cfg_json))


@app.command()
def compare(
    policies: Annotated[str, typer.Option("--policies", help="Comma-separated scheduler names; a name may "
                                          "carry a placement as name@placement.")] = "fifo,tiresias,gandiva,gavel,sia",
    seeds: Annotated[int, typer.Option("--seeds", help="Runs per policy (seeds 0..N-1), averaged.")] = 1,
    cluster: ClusterOpt = "sia-hetero-64",
    trace: TraceOpt = "synthetic:rate=20,hours=8,seed=1",
    ordering: OrderingOpt = None,
    set_: SetOpt = None,
    round_s: RoundOpt = 60.0,
    jobs: JobsOpt = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Worker processes (default: CPU count).")] = None,
    out_dir: Annotated[str, typer.Option("--out", help="Folder for the overlaid report and per-run tables.")]
    = "dlsched-compare",
    fmt: FormatOpt = Format.table,
) -> None:
    """Run several schedulers on the same cluster and trace, in parallel, and print one table."""
    from dlsched.sim import runner
    from dlsched.sim.metrics import average_summaries

    def go():
        if seeds < 1:
            raise InputError(f"--seeds must be at least 1, got {seeds}", field="seeds")
        names = [p.strip() for p in policies.split(",") if p.strip()]
        if not names:
            raise InputError("--policies is empty", field="policies")
        configs = []
        for name in names:
            pol, _, plc = name.partition("@")
            for s in range(seeds):
                configs.append(_config(cluster, trace, pol, ordering, plc or None, set_, s, round_s, jobs))
        for cfg in configs[::seeds]:  # validate everything up front: bad input fails before any run
            runner.prepare(cfg)
        n_workers = max(1, min(workers or _cpu_count(), len(configs)))
        t0 = time.perf_counter()
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} runs"),
                      TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as prog:
            task = prog.add_task("compare", total=len(configs))
            if n_workers == 1:
                outputs = []
                for cfg in configs:
                    outputs.append(runner.run(cfg))
                    prog.advance(task)
            else:
                with ProcessPoolExecutor(max_workers=n_workers) as pool:
                    futures = [pool.submit(_run_one, cfg.model_dump_json()) for cfg in configs]
                    outputs = []
                    for f in futures:
                        outputs.append(f.result())
                        prog.advance(task)
        rows = []
        for i in range(0, len(outputs), seeds):
            group = outputs[i:i + seeds]
            avg = average_summaries([o.summary for o in group])
            avg["policy"], avg["seeds"] = group[0].label, seeds
            rows.append(avg)
        runner.write_outputs(out_dir, outputs, rows)
        err.print(f"{len(configs)} runs in {time.perf_counter() - t0:.1f} s; report: {out_dir}/report.html")
        _print_summaries(rows, fmt)

    _guard(go)


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@app.command()
def clusters(fmt: FormatOpt = Format.table) -> None:
    """List the cluster presets."""
    from dlsched.clusters import preset_descriptions

    rows = [{"name": n, "gpus": c.num_gpus, "layout": c.describe(), "variability": c.variability, "description": d}
            for n, d, c in preset_descriptions()]
    if fmt is Format.json:
        for r in rows:
            sys.stdout.write(json.dumps(r) + "\n")
        return
    table = Table()
    for col in ("name", "gpus", "layout", "variability", "description"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], str(r["gpus"]), r["layout"], r["variability"] or "-", r["description"])
    out.print(table)


@app.command()
def policies(fmt: FormatOpt = Format.table) -> None:
    """List every registered scheduler with its stages, tunables and defaults."""
    from dlsched.policies import SCHEDULERS, scheduler_tunables
    from dlsched.policies.registry import ORDERINGS, PLACEMENTS

    rows = []
    for name, entry in sorted(SCHEDULERS.items()):
        rows.append({"name": name, "description": entry.description, "ordering": entry.ordering,
                     "allocation": entry.allocation, "placement": entry.placement,
                     "tunables": {k: _jsonable(v) for k, v in scheduler_tunables(name).items()}})
    if fmt is Format.json:
        for r in rows:
            sys.stdout.write(json.dumps(r) + "\n")
        return
    table = Table(title="schedulers")
    for col in ("name", "stages", "tunables (defaults)", "description"):
        table.add_column(col)
    for r in rows:
        stages = " / ".join(x for x in (r["ordering"], r["allocation"], r["placement"]) if x) or "-"
        tun = ", ".join(f"{k}={v}" for k, v in r["tunables"].items()) or "-"
        table.add_row(r["name"], stages, tun, r["description"])
    out.print(table)
    out.print("orderings: " + ", ".join(sorted(ORDERINGS)))
    out.print("placements: " + ", ".join(sorted(PLACEMENTS)))
    out.print("world settings (--set): locality_penalty, variability, restart_delay_scale, default_restart_delay_s; "
              "engine: max_time_s, stall_rounds")


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    return v


def _mount_subapps() -> None:
    from dlsched.traces.cli import app as trace_app

    app.add_typer(trace_app, name="trace", help="Validate, summarise and convert traces.")
    from dlsched.estimators.variability_cli import app as variability_app
    app.add_typer(variability_app, name="variability", help="Show and fit PAL's per-GPU PM-score bins.")


_mount_subapps()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    app()


if __name__ == "__main__":
    main()
