"""``dlsched simulate``: one scheduler on one cluster and trace, or the replay of a saved run."""

from __future__ import annotations

import os
import time
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from dlsched.cli.common import Format, FormatOpt, WideOpt, app, err, guard, note, print_summaries, warn
from dlsched.cli.plugin_options import PluginOpt, load_plugin_options
from dlsched.cli.report import FiguresOpt, figure_formats
from dlsched.cli.run_options import (
    AdmissionOpt,
    AllocationOpt,
    ClusterOpt,
    ConfigOpt,
    CoordinationOpt,
    DataDirOpt,
    ForceOpt,
    JobsOpt,
    MaxTimeOpt,
    OrderingOpt,
    PlacementOpt,
    QuotasOpt,
    RoundOpt,
    SeedOpt,
    SetOpt,
    TraceOpt,
    TraceSeedOpt,
    WindowEndOpt,
    WindowStartOpt,
    WorldSeedOpt,
    build_config,
)


class LazyProgress:
    """A progress bar on stderr that appears only for runs longer than a second."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.t0 = time.perf_counter()
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, sim_t: float, done: int, total: int) -> None:
        if self.progress is None:
            if time.perf_counter() - self.t0 < 1.0 or not err.is_terminal and not _force_progress():
                return
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                                     "{task.total} jobs"), TextColumn("sim {task.fields[sim_h]:.1f} h"),
                                     TimeElapsedColumn(), console=err, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.description, total=total, sim_h=0.0)
        assert self.task is not None
        self.progress.update(self.task, completed=done, sim_h=sim_t / 3600.0)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _force_progress() -> bool:
    return os.environ.get("DLSCHED_PROGRESS", "") == "1"


@app.command()
def simulate(
    config: ConfigOpt = None,
    cluster: ClusterOpt = None,
    trace: TraceOpt = None,
    policy: Annotated[str | None, typer.Option("--policy", help="Scheduler name (see 'dlsched policies') "
                                               "[default: fifo].")] = None,
    admission: AdmissionOpt = None,
    ordering: OrderingOpt = None,
    allocation: AllocationOpt = None,
    placement: PlacementOpt = None,
    coordination: CoordinationOpt = None,
    quotas: QuotasOpt = None,
    set_: SetOpt = None,
    seed: SeedOpt = None,
    world_seed: WorldSeedOpt = None,
    trace_seed: TraceSeedOpt = None,
    round_s: RoundOpt = None,
    jobs: JobsOpt = None,
    max_time_s: MaxTimeOpt = None,
    window_start: WindowStartOpt = None,
    window_end: WindowEndOpt = None,
    data_dir: DataDirOpt = None,
    out_dir: Annotated[str | None, typer.Option("--out", help="Write jobs.csv, rounds.csv, summary.json, "
                                                "config.json (replay it with --config) and report.html "
                                                "here.")] = None,
    force: ForceOpt = False,
    figures: FiguresOpt = None,
    plugin: PluginOpt = None,
    wide: WideOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Simulate one scheduler on one cluster and trace."""

    def go() -> None:
        load_plugin_options(plugin)  # before any name is looked up
        from dlsched.sim.about import describe_runs, header_line, row_fields
        from dlsched.sim.output import check_out_dir, write_outputs
        from dlsched.sim.run import data_notice
        from dlsched.sim.run import simulate as run_simulation
        from dlsched.sim.sanity import restart_warning

        formats = figure_formats(figures, out_dir)
        if out_dir is not None:  # a bad folder fails now, not after the simulation
            check_out_dir(out_dir, force=force)
        cfg = build_config(config, set_, cluster=cluster, trace=trace, policy=policy, admission=admission,
                           ordering=ordering, allocation=allocation, placement=placement,
                           coordination=coordination, seed=seed, world_seed=world_seed, trace_seed=trace_seed,
                           round_s=round_s, jobs=jobs, max_time_s=max_time_s, data_dir=data_dir, quotas=quotas,
                           window_start=window_start, window_end=window_end)
        bar = LazyProgress(cfg.policy)
        try:
            records = run_simulation(cfg, on_progress=bar)
        finally:
            bar.close()
        for line in (data_notice(records.data), restart_warning(records.summary), *records.notices):
            if line:
                warn(line)
        summary = {**records.summary, **row_fields([records])}
        if out_dir is not None:
            folder = write_outputs(out_dir, [records], summary, force=force, figures=formats)
            note(f"wrote {folder}/ (jobs.csv, rounds.csv, summary.json, config.json, report.html)")
        print_summaries([summary], fmt, header=header_line(describe_runs([records])), wide=wide)

    guard(go)
