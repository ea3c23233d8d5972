"""``dlsched trace``: check, summarise and convert traces from the command line.

The sub-app is mounted by the main CLI as ``dlsched trace``. A TRACE argument is anything
:func:`~dlsched.traces.resolve.resolve_trace` accepts (a named trace such as ``sia-philly:1``, a
``synthetic:...`` spec or a file path). Input problems print one line, ``error: <message>``, on stderr and
exit with status 2, so scripts can tell bad input from crashes.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from dlsched.cli.common import Format
from dlsched.cli.common import fail as _fail
from dlsched.core.errors import InputError
from dlsched.outputs import check_output_file
from dlsched.traces.resolve import resolve_trace
from dlsched.traces.schema import write_trace
from dlsched.traces.stats import trace_stats

app = typer.Typer(help="Validate, summarise and convert job traces.", no_args_is_help=True)

_TRACE_HELP = ("named trace (sia-philly:N, sia-saturn:N, sia-scale:rate_R:N, pollux:N, pal-philly:N, "
               "gavel:VC[:SEED], philly[:N], synthetic:rate=20,hours=8,seed=1, ...) or a trace file")


StatsFormat = Format


@app.command()
def validate(trace: str = typer.Argument(..., help=_TRACE_HELP),
             cluster: str | None = typer.Option(None, "--cluster", help="Also check that every job fits this "
                                                "cluster (preset name or cluster YAML).")) -> None:
    """Read TRACE, checking every row and that the simulator can run every job; print 'ok: N jobs' or the
    first problem as file:line."""
    from dlsched.sim.trace_check import check_runnable

    try:
        jobs, _ = resolve_trace(trace)
        if not jobs:
            raise InputError("the trace holds no jobs (only a header?)", source=trace)
        check_runnable(jobs, cluster)
    except InputError as exc:
        raise _fail(exc) from None
    typer.echo(f"ok: {len(jobs)} jobs")


@app.command()
def stats(trace: str = typer.Argument(..., help=_TRACE_HELP),
          format: StatsFormat = typer.Option(StatsFormat.table, "--format", "-f",  # noqa: A002
                                             help="table (human) or json (one object)")) -> None:
    """Summarise TRACE: jobs, span, arrival rate, GPU demand, models, adaptivity, GPU-hours."""
    try:
        jobs, name = resolve_trace(trace)
    except InputError as exc:
        raise _fail(exc) from None
    summary = trace_stats(jobs)
    if format is StatsFormat.json:
        typer.echo(json.dumps({"trace": name, **summary}))
        return
    table = Table(title=f"trace {name}", show_header=True)
    table.add_column("statistic")
    table.add_column("value", overflow="fold")
    for key, value in summary.items():
        if isinstance(value, dict):
            text = ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
        elif isinstance(value, float):
            text = f"{value:,.3f}".rstrip("0").rstrip(".")
        else:
            text = "-" if value is None else str(value)
        table.add_row(key, text)
    Console().print(table)


@app.command()
def convert(trace: str = typer.Argument(..., help=_TRACE_HELP),
            out: str = typer.Argument(..., help="output file: .csv (canonical) or .parquet (needs pyarrow)")
            ) -> None:
    """Write TRACE as a canonical trace file (written to a temporary file, then renamed into place).

    OUT may be a new file or a regular file to replace; a device, a directory or a symbolic link is refused
    and left as it is.
    """
    try:
        check_output_file(out, "output file")  # a bad target fails before the trace is read
        jobs, _ = resolve_trace(trace)
        write_trace(jobs, out)
    except InputError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        raise _fail(InputError(f"cannot write: {exc.strerror or exc}", source=str(out))) from None
    typer.echo(f"wrote {len(jobs)} jobs to {out}")


@app.command("export")
def export(out: str = typer.Argument(..., metavar="OUT.csv", help="the trace to write (.csv or .parquet)"),
           state: Path | None = typer.Option(None, "--state", help="The service's state folder (read-only)."),
           server: str | None = typer.Option(None, "--server", help="A running service's URL (admin token)."),
           token: str | None = typer.Option(None, "--token", envvar="DLSCHED_TOKEN", help="An admin's API token."),
           since: str | None = typer.Option(None, "--since", help="Only jobs submitted from then on (Unix s or "
                                            "ISO 8601)."),
           until: str | None = typer.Option(None, "--until", help="Only jobs submitted before then."),
           user: str | None = typer.Option(None, "--user", help="Only this user's jobs."),
           anonymize: bool = typer.Option(False, "--anonymize", help="User names as user-1, user-2, ..."),
           cluster: str | None = typer.Option(None, "--cluster", help="The cluster the service ran [default: "
                                              "what it recorded].")) -> None:
    """Write a service's finished jobs as a trace (docs/whatif.md): submit times, requests, and each job's
    measured time on its GPUs as duration_s; the service's database is only read."""
    from dlsched.replay.export import export_specs, parse_time, select_jobs
    from dlsched.replay.history import load_history
    from dlsched.runtime.workload import load_cluster

    try:
        check_output_file(out, "output file")
        history = load_history(state, server, token)
        name = cluster or history.service.get("cluster")
        selection = select_jobs(history, since=parse_time(since, "since"), until=parse_time(until, "until"),
                                user=user)
        specs = export_specs(history, selection, load_cluster(name) if name else None, anonymize=anonymize)
        write_trace(specs, out)
    except InputError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        raise _fail(InputError(f"cannot write: {exc.strerror or exc}", source=str(out))) from None
    left = f" ({len(selection.left_out)} unfinished or failed left out)" if selection.left_out else ""
    typer.echo(f"wrote {len(specs)} jobs to {out}{left}")
