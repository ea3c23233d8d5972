"""``dlsched compare``: several schedulers on the same cluster and trace, in parallel, in one table."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from dlsched.cli.common import Format, FormatOpt, WideOpt, app, guard, note, print_summaries, warn
from dlsched.cli.plugin_options import PluginOpt, load_plugin_options
from dlsched.cli.report import FiguresOpt, figure_formats
from dlsched.cli.run_options import (
    ClusterOpt,
    ConfigOpt,
    DataDirOpt,
    ForceOpt,
    JobsOpt,
    OrderingOpt,
    RoundOpt,
    SetOpt,
    TraceOpt,
    build_config,
)
from dlsched.core import InputError
from dlsched.progress import progress_bar


@app.command()
def compare(
    policies: Annotated[str, typer.Option("--policies", help="Comma-separated scheduler names; a name may "
                                          "carry a placement as name@placement.")] = "fifo,tiresias,fifo-packed,gavel,sia",
    seeds: Annotated[int, typer.Option("--seeds", help="Runs per policy, averaged: seeds 0..N-1 of the scheduler "
                                       "and world, and for a generated trace (synthetic, synergy, @tuned) its "
                                       "seed, seed+1, ... as well.")] = 1,
    config: ConfigOpt = None,
    cluster: ClusterOpt = None,
    trace: TraceOpt = None,
    ordering: OrderingOpt = None,
    set_: SetOpt = None,
    round_s: RoundOpt = None,
    jobs: JobsOpt = None,
    data_dir: DataDirOpt = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Worker processes (default: CPU count).")] = None,
    out_dir: Annotated[str | None, typer.Option("--out", help="Write the overlaid report.html, summary.json, "
                                                "config.json and per-run tables here (default: nothing is "
                                                "written).")] = None,
    force: ForceOpt = False,
    figures: FiguresOpt = None,
    plugin: PluginOpt = None,
    wide: WideOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run several schedulers on the same cluster and trace, in parallel, and print one table."""

    def go() -> None:
        load_plugin_options(plugin)  # before any name is looked up
        from dlsched.sim.about import describe_runs, header_line, row_fields
        from dlsched.sim.metrics import average_summaries
        from dlsched.sim.output import check_out_dir, write_outputs
        from dlsched.sim.run import data_notice, prepare, run_many
        from dlsched.sim.run_jobs import with_trace_seed_offset
        from dlsched.sim.sanity import restart_outliers

        formats = figure_formats(figures, out_dir)
        if out_dir is not None:  # a bad folder fails now, not after the simulations
            check_out_dir(out_dir, force=force)
        if seeds < 1:
            raise InputError(f"--seeds must be at least 1, got {seeds}", field="seeds")
        if workers is not None and workers < 1:
            raise InputError(f"--workers must be at least 1, got {workers}", field="workers")
        names = [p.strip() for p in policies.split(",") if p.strip()]
        if not names:
            raise InputError("--policies is empty", field="policies")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InputError(f"names {', '.join(repeated)} more than once; list each run once (for repeats "
                             f"with other seeds use --seeds)", field="policies")
        configs = []
        trace_varied = False
        for name in names:
            pol, _, plc = name.partition("@")
            for s in range(seeds):
                cfg = build_config(config, set_, cluster=cluster, trace=trace, policy=pol, ordering=ordering,
                                   placement=plc or None, seed=s, round_s=round_s, jobs=jobs, data_dir=data_dir)
                if seeds > 1:
                    moved = with_trace_seed_offset(cfg, s)
                    trace_varied = moved is not None
                    cfg = moved or cfg
                configs.append(cfg)
        for cfg in configs[::seeds]:  # validate everything up front: bad input fails before any run
            prepare(cfg)
        if seeds > 1:
            what = "the scheduler, world and trace seeds" if trace_varied else (
                "the scheduler and world seeds (the trace is fixed: a file or a named trace)")
            note(f"--seeds {seeds}: each policy runs {seeds} times, varying {what}")
        t0 = time.perf_counter()
        with progress_bar(len(configs), "compare") as advance:
            runs = run_many(configs, workers, on_result=lambda i, r: advance())
        for notice in dict.fromkeys(n for r in runs if (n := data_notice(r.data))):
            warn(notice)
        rows = []
        for i in range(0, len(runs), seeds):
            group = runs[i:i + seeds]
            avg = average_summaries([r.summary for r in group])
            avg.update(policy=group[0].label, seed=group[0].config.seed, seeds=seeds, **row_fields(group))
            rows.append(avg)
        for line in restart_outliers(rows):
            warn(line)
        took = f"{len(configs)} runs in {time.perf_counter() - t0:.1f} s"
        if out_dir is not None:
            folder = write_outputs(out_dir, runs, rows, force=force, figures=formats)
            note(f"{took}; wrote {folder}/ (report.html, summary.json, config.json, per-run tables)")
        else:
            note(f"{took}; give --out DIR to keep the report and per-run tables")
        print_summaries(rows, fmt, header=header_line(describe_runs(runs)), wide=wide)

    guard(go)
