"""``dlsched compare``: several schedulers on the same cluster and trace, in parallel, in one table."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from dlsched.cli import Format, FormatOpt, app, err, guard, print_summaries
from dlsched.cli.run_options import (
    ClusterOpt,
    ConfigOpt,
    DataDirOpt,
    JobsOpt,
    OrderingOpt,
    RoundOpt,
    SetOpt,
    TraceOpt,
    build_config,
)
from dlsched.core import InputError


@app.command()
def compare(
    policies: Annotated[str, typer.Option("--policies", help="Comma-separated scheduler names; a name may "
                                          "carry a placement as name@placement.")] = "fifo,tiresias,gandiva,gavel,sia",
    seeds: Annotated[int, typer.Option("--seeds", help="Runs per policy (seeds 0..N-1), averaged.")] = 1,
    config: ConfigOpt = None,
    cluster: ClusterOpt = None,
    trace: TraceOpt = None,
    ordering: OrderingOpt = None,
    set_: SetOpt = None,
    round_s: RoundOpt = None,
    jobs: JobsOpt = None,
    data_dir: DataDirOpt = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Worker processes (default: CPU count).")] = None,
    out_dir: Annotated[str, typer.Option("--out", help="Folder for the overlaid report and per-run tables.")]
    = "dlsched-compare",
    fmt: FormatOpt = Format.table,
) -> None:
    """Run several schedulers on the same cluster and trace, in parallel, and print one table."""

    def go() -> None:
        from dlsched.sim.metrics import average_summaries
        from dlsched.sim.output import write_outputs
        from dlsched.sim.run import prepare, run_many

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
        for name in names:
            pol, _, plc = name.partition("@")
            for s in range(seeds):
                configs.append(build_config(config, set_, cluster=cluster, trace=trace, policy=pol,
                                            ordering=ordering, placement=plc or None, seed=s, round_s=round_s,
                                            jobs=jobs, data_dir=data_dir))
        for cfg in configs[::seeds]:  # validate everything up front: bad input fails before any run
            prepare(cfg)
        t0 = time.perf_counter()
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} runs"),
                      TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as prog:
            task = prog.add_task("compare", total=len(configs))
            runs = run_many(configs, workers, on_result=lambda i, r: prog.advance(task))
        rows = []
        for i in range(0, len(runs), seeds):
            group = runs[i:i + seeds]
            avg = average_summaries([r.summary for r in group])
            avg["policy"], avg["seeds"] = group[0].label, seeds
            rows.append(avg)
        write_outputs(out_dir, runs, rows)
        err.print(f"{len(configs)} runs in {time.perf_counter() - t0:.1f} s; report: {out_dir}/report.html")
        print_summaries(rows, fmt)

    guard(go)
