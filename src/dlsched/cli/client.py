"""The service's client commands: ``dlsched submit``, ``jobs``, ``show``, ``cancel``, ``logs``.

They talk to a running ``dlsched serve`` over its HTTP API, named by ``--server``/``DLSCHED_SERVER`` and
authenticated by ``--token``/``DLSCHED_TOKEN``. Whatever goes wrong (no server, a refused token, an unknown
job, a bad spec) ends as one ``error:`` line and exit code 2, like every other dlsched command. The requests
themselves are :class:`dlsched.Client`'s (:mod:`dlsched.client`), the Python client a script uses too.

``submit`` checks the spec here first (the same model the server checks with), so a typo is reported
against the file before anything is sent; it also makes ``working_dir`` absolute, relative to the spec
file's folder (the folder itself when the spec gives none), and checks that it exists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dlsched.cli.common import Format, FormatOpt, app, cell, guard, note, out, printable
from dlsched.client import Client
from dlsched.core import InputError
from dlsched.service.spec_file import load_spec

ServerOpt = Annotated[str | None, typer.Option("--server", envvar="DLSCHED_SERVER", show_envvar=True,
                                               help="URL of the dlsched service (http://HOST:PORT).")]
TokenOpt = Annotated[str | None, typer.Option("--token", envvar="DLSCHED_TOKEN", show_envvar=True,
                                              help="Your API token (from 'dlsched serve user add').")]
JobIdArg = Annotated[str, typer.Argument(help="The job's id (job-<n>).", metavar="ID")]


def connect(server: str | None, token: str | None) -> Client:
    """The service's Python client for a command: a retry is announced on stderr."""
    return Client(server, token, on_retry=note)


def _log_text(text: str) -> str:
    """A job's log text with every non-printable character but newline and tab escaped (:func:`printable`):
    the job wrote it, and it must not drive the reader's terminal."""
    return "\n".join("\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n"))


def _when(value: str | None) -> str:
    """An ISO 8601 timestamp, shortened for a table (UTC, to the second)."""
    if not value:
        return "-"
    return value.replace("T", " ")[:19] + "Z"


@app.command("submit")
def submit(
    spec: Annotated[Path, typer.Argument(help="The job spec (YAML).", metavar="SPEC.yaml")],
    server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table,
) -> None:
    """Submit a job to the service; prints its id (json: the whole job).

    A submission the service did not answer (it is down, restarting, or answered 5xx) is retried for up to
    60 s (DLSCHED_SUBMIT_RETRY_S) with the same Idempotency-Key, so it is stored once whatever happened."""

    def go() -> None:
        body = load_spec(spec)
        # one key for every try of this submission: a retry after a lost answer returns the job it stored
        job = connect(server, token).submit(body).raw
        if fmt is Format.json:
            sys.stdout.write(json.dumps(job) + "\n")
        else:
            sys.stdout.write(f"{printable(job['id'])}\n")

    guard(go)


JOB_COLUMNS = ("id", "user", "name", "status", "reason", "gpus", "gpu_type", "submitted", "started", "finished")


@app.command("jobs")
def jobs(
    all_: Annotated[bool, typer.Option("--all", help="Finished jobs too.")] = False,
    status: Annotated[list[str] | None, typer.Option("--status", help="Only jobs in this status "
                                                     "(repeatable).")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user's jobs (an admin's filter).")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only jobs submitted at or after this time "
                                              "(ISO 8601).")] = None,
    server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table,
) -> None:
    """Your jobs on the service (an admin's: everyone's), unfinished ones unless --all or --status."""

    def go() -> None:
        rows = [j.raw for j in connect(server, token).jobs(all=all_, status=status or (), user=user, since=since)]
        if fmt is Format.json:
            sys.stdout.write(json.dumps(rows) + "\n")
            return
        table = Table()
        for column in JOB_COLUMNS:
            table.add_column(column, justify="right" if column == "gpus" else "left")
        for row in rows:  # every cell escaped: names, reasons and messages are the users' and the jobs' text
            table.add_row(*[cell(_when(row.get(c)) if c in ("submitted", "started", "finished")
                                 else ("-" if row.get(c) is None else row.get(c))) for c in JOB_COLUMNS])
        out.print(table)
        if not rows:
            note("no jobs" if all_ else "no unfinished jobs (--all shows finished ones)")

    guard(go)


@app.command("show")
def show(job_id: JobIdArg, server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table) -> None:
    """One job: its spec, placement, progress counters and events."""

    def go() -> None:
        job = connect(server, token).show(job_id).raw
        if fmt is Format.json:
            sys.stdout.write(json.dumps(job) + "\n")
            return
        lines = [f"{c}: {_when(job.get(c)) if c in ('submitted', 'started', 'finished') else job.get(c)}"
                 for c in JOB_COLUMNS]
        lines += [f"{c}: {job.get(c)}" for c in ("placement", "batch_size", "progress", "steps_done", "restarts",
                                                 "failures", "preemptions", "cancel_requested", "message")]
        if job.get("reason_detail"):  # why it waits (the reason column of 'dlsched jobs') and its next step
            lines.append(f"why: {job.get('reason')}: {job['reason_detail']}")
        lines.append(f"command: {job['spec']['command']}")
        # every field on a line of its own, escaped: a job's text cannot forge a line or drive the terminal
        lines = [printable(line) for line in lines]
        lines.append("events:")
        lines += [f"  {printable(_when(e['time']))}  {printable(e['kind'])}: {printable(e['message'])}"
                  for e in job.get("events", [])]
        sys.stdout.write("\n".join(lines) + "\n")

    guard(go)


@app.command("cancel")
def cancel(job_id: JobIdArg, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Cancel a job: a queued one at once, a running one at the next round."""

    def go() -> None:
        job = connect(server, token).cancel(job_id).raw
        shown = printable(job["id"])
        if job["status"] == "cancelled":
            sys.stdout.write(f"{shown} cancelled\n")
        elif job["status"] in ("succeeded", "failed"):
            sys.stdout.write(f"{shown} had already {printable(job['status'])}\n")
        else:
            sys.stdout.write(f"{shown} cancel requested (its workers stop at the next round)\n")

    guard(go)


@app.command("logs")
def logs(
    job_id: JobIdArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until the job ends.")] = False,
    rank: Annotated[str | None, typer.Option("--rank", metavar="INTEGER", help="Only this rank's log.")] = None,
    tail: Annotated[str | None, typer.Option("--tail", metavar="N", help="Only the last N lines of each "
                                             "log.")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="The logs as written, control characters and escape "
                                      "sequences included (default: escaped, as \\x1b).")] = False,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """The job's workers' logs (and its profile runs'), each under a header; what a job wrote is shown with
    its control characters escaped (--raw: as written)."""

    def go() -> None:
        if rank is not None and not rank.isdigit():
            raise InputError(f"must be a rank number (0, 1, ...), got {rank!r}", field="rank")
        if tail is not None and (not tail.isdigit() or not 1 <= int(tail) <= 1_000_000):
            raise InputError(f"must be a number of lines 1..1000000, got {tail!r}", field="tail")
        chunks = connect(server, token).stream_logs(job_id, follow=follow, rank=None if rank is None else int(rank),
                                                    tail=None if tail is None else int(tail))
        for chunk in chunks:
            sys.stdout.write(chunk if raw else _log_text(chunk))
            sys.stdout.flush()

    guard(go)

