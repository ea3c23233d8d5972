"""``dlsched serve``: run the scheduler service, and manage its users and quotas.

``dlsched serve --state DIR ...`` starts the service (:func:`dlsched.service.server.serve`). Every flag is
None unless given, so the service can tell a flag given from one left out and fill the latter from the
configuration the state was created with (:mod:`dlsched.service.config`). The subcommands work on the
service's database directly, with or without the service running (the store is safe to share): ``serve
user add|list|remove``, ``serve token rotate|revoke|list``, ``serve audit`` (:mod:`dlsched.cli.serve_users`),
``serve quota set|list`` and ``serve status``.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dlsched.cli.common import Format, FormatOpt, cell, guard, note, out
from dlsched.cli.plugin_options import PluginOpt
from dlsched.cli.run_options import parse_set
from dlsched.cli.serve_users import DatabaseOpt, StateOpt, audit, token_app, user_app
from dlsched.cli.serve_users import open_store as _open_store
from dlsched.core import InputError

app = typer.Typer(no_args_is_help=False, help="Run the scheduler service; manage its users and quotas.")
quota_app = typer.Typer(no_args_is_help=True, help="GPU quotas of users and teams.")
app.add_typer(user_app, name="user")
app.add_typer(token_app, name="token")
app.add_typer(quota_app, name="quota")
app.command("audit")(audit)

#: ``serve status``'s exit code when no service runs on the state (or it has not started listening yet).
STATUS_NOT_RUNNING = 3


@app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    state: Annotated[Path | None, typer.Option("--state", help="Folder of the service's state: its SQLite "
                                               "database, the jobs' folders, server.json (required).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Cluster preset or file (default: "
                                                "ray-local-4, 4 emulated nodes).")] = None,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster to join (default: start Ray "
                                                "here).")] = None,
    policy: Annotated[str | None, typer.Option("--policy", help="Scheduler preset (see 'dlsched policies'; "
                                               "default fifo).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="key=value: a tunable of the policy; "
                                                   "repeatable.")] = None,
    admission: Annotated[str | None, typer.Option("--admission", help="Swap in this admission stage.")] = None,
    ordering: Annotated[str | None, typer.Option("--ordering", help="Swap in this ordering stage (e.g. one a "
                                                 "--plugin file registers).")] = None,
    allocation: Annotated[str | None, typer.Option("--allocation", help="Swap in this allocation stage.")] = None,
    placement: Annotated[str | None, typer.Option("--placement", help="Swap in this placement stage.")] = None,
    coordination: Annotated[str | None, typer.Option("--coordination", help="Swap in this coordination "
                                                     "stage.")] = None,
    plugin: PluginOpt = None,
    port: Annotated[str | None, typer.Option("--port", metavar="INTEGER", help="Port of the HTTP API (default "
                                             "0: any free one; server.json says which).")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Address the HTTP API listens on (default "
                                             "127.0.0.1).")] = None,
    database: DatabaseOpt = None,
    checkpoint_dir: Annotated[Path | None, typer.Option("--checkpoint-dir", help="Shared folder of the jobs' "
                                                        "checkpoints (default: STATE/checkpoints).")] = None,
    round_s: Annotated[str | None, typer.Option("--round-s", metavar="SECONDS", help="Scheduling round, "
                                                "wall-clock seconds (default 10).")] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="ray (real workers; the default) or dry-run "
                                                 "(nothing is started; for trying policies and the API).")] = None,
    stop_grace_s: Annotated[str | None, typer.Option("--stop-grace-s", metavar="SECONDS", help="Seconds a "
                                                     "stopped job has to checkpoint and exit before it is killed "
                                                     "(default 60).")] = None,
    min_run_s: Annotated[str | None, typer.Option("--min-run-s", metavar="SECONDS", help="A placed job is not "
                                                  "moved before its first step and checkpoint, or this many "
                                                  "seconds (default 30).")] = None,
    max_body_kb: Annotated[str | None, typer.Option("--max-body-kb", metavar="KIB", help="Largest request "
                                                    "body the API reads (default 1024; larger: 413).")] = None,
    rate_per_s: Annotated[str | None, typer.Option("--rate-per-s", metavar="N", help="Requests per second per "
                                                   "token (default 200; beyond: 429).")] = None,
    allow_dir: Annotated[list[Path] | None, typer.Option("--allow-dir", help="A folder jobs may run in (their "
                                                        "working_dir under it); repeatable (default: the host's "
                                                        "home folders and STATE/uploads).")] = None,
    isolation: Annotated[str | None, typer.Option("--isolation", envvar="DLSCHED_ISOLATION", help="Who jobs run "
                                                  "as: auto (their own OS accounts when the service runs as "
                                                  "root, else the service's), accounts or none.")] = None,
    job_user: Annotated[str | None, typer.Option("--job-user", metavar="ACCOUNT", help="OS account of the jobs "
                                                 "of users without --os-user (default dlsched-job, created "
                                                 "when missing).")] = None,
    allow_shared_account: Annotated[bool | None, typer.Option("--allow-shared-account/--no-allow-shared-account",
                                                              envvar="DLSCHED_ALLOW_SHARED_ACCOUNT", help="Serve "
                                                              "more than one user although jobs run as the "
                                                              "service's own account (no isolation).")] = None,
    max_log_mb: Annotated[str | None, typer.Option("--max-log-mb", metavar="MIB", help="What each rank's log "
                                                   "may hold (rotated, the dropped part said; default "
                                                   "1024).")] = None,
    explain_keep_rounds: Annotated[str | None, typer.Option("--explain-keep-rounds", metavar="ROUNDS", help=(
        "Delete explanation records that stopped holding more than ROUNDS rounds ago (default: keep all; a "
        "job's current ones are always kept)."))] = None,
    reconfigure: Annotated[bool, typer.Option("--reconfigure", help="Accept flags that differ from the "
                                              "configuration the state was created with (recorded).")] = False,
) -> None:
    """Run the scheduler service until SIGINT or SIGTERM.

    The configuration (policy, --set, the stage flags, --plugin, cluster, round, executor, checkpoint folder, database, grace and
    minimum run times, --allow-dir, --isolation, --job-user, --allow-shared-account, --max-log-mb, --explain-keep-rounds) is stored
    with the state on its first start; a restart without flags resumes it."""
    if ctx.invoked_subcommand is not None:
        return

    def go() -> None:
        from dlsched.service.extra import require
        from dlsched.service.options import ServeOptions

        require()
        if state is None:
            raise InputError("--state DIR is required (the service's state folder)", field="state")
        given = {"cluster": cluster, "address": address, "policy": policy, "port": port, "host": host,
                 "database": database, "checkpoint_dir": checkpoint_dir, "round_s": round_s,
                 "executor": executor, "stop_grace_s": stop_grace_s, "min_run_s": min_run_s,
                 "max_body_kb": max_body_kb, "rate_per_s": rate_per_s, "isolation": isolation,
                 "job_user": job_user, "max_log_mb": max_log_mb, "explain_keep_rounds": explain_keep_rounds}
        values: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if cluster is not None:
            values["cluster_given"] = True
        if set_ is not None:
            values["settings"] = parse_set(set_)
        stages = {"admission": admission, "ordering": ordering, "allocation": allocation, "placement": placement,
                  "coordination": coordination}
        if any(v is not None for v in stages.values()):
            values["stages"] = {k: v for k, v in stages.items() if v is not None}
        if plugin:
            values["plugins"] = list(plugin)
        if allow_dir:
            values["allow_dir"] = list(allow_dir)
        if allow_shared_account is not None:
            values["allow_shared_account"] = allow_shared_account
        if reconfigure:
            values["reconfigure"] = True
        options = ServeOptions.parse({"state": state, **values})  # only what was given counts as given
        try:  # imported by name: the server module is built on top of this one
            server = importlib.import_module("dlsched.service.server")
        except ModuleNotFoundError as exc:
            if exc.name != "dlsched.service.server":
                raise
            raise InputError("this dlsched has no service runner (dlsched.service.server)") from None
        server.serve(options)

    guard(go)


@app.command("status")
def status(state: StateOpt, database: DatabaseOpt = None, fmt: FormatOpt = Format.table) -> None:
    """Whether a service runs on the state: its pid, URL, policy, round and jobs by status.

    Exit 0 when a service holds the state and its API listens; 3 when none does (or it is still starting),
    so 'until dlsched serve status --state DIR; do sleep 1; done' waits for it."""

    def go() -> int:
        from dlsched.service.extra import require

        require()
        from dlsched.service.status import service_status

        info = service_status(state, database)
        if fmt is Format.json:
            sys.stdout.write(json.dumps(info) + "\n")
        else:
            lines = [f"{info['state_text']}"]
            for key in ("pid", "url", "alive", "policy", "round"):
                if info.get(key) is not None:
                    lines.append(f"{key}: {info[key]}")
            if info.get("jobs") is not None:
                jobs = ", ".join(f"{n} {s}" for s, n in info["jobs"].items()) or "none"
                lines.append(f"jobs: {jobs}")
            sys.stdout.write("\n".join(lines) + "\n")
        return 0 if info["running"] else STATUS_NOT_RUNNING

    code = guard(go)
    if code:
        raise typer.Exit(code)


def _int(text: str, field: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"must be an integer, got {text!r}", field=field) from None


@quota_app.command("set")
def quota_set(
    state: StateOpt,
    gpus: Annotated[str, typer.Option("--gpus", metavar="INTEGER", help="GPUs the user or team is guaranteed.")],
    user: Annotated[str | None, typer.Option("--user", help="The user the quota is for.")] = None,
    team: Annotated[str | None, typer.Option("--team", help="The team the quota is for.")] = None,
    borrowing_limit: Annotated[str | None, typer.Option("--borrowing-limit", metavar="INTEGER", help="GPUs beyond the quota it "
                                                        "may borrow while others leave them idle.")] = None,
    database: DatabaseOpt = None,
) -> None:
    """Set the GPU quota of a user or a team (replacing the one it had)."""

    def go() -> None:
        if (user is None) == (team is None):
            raise InputError("give exactly one of --user and --team", field="user")
        kind, name = ("user", user) if user is not None else ("team", team)
        assert name is not None
        store = _open_store(state, database)
        try:
            store.set_quota(kind, name, _int(gpus, "gpus"),
                            None if borrowing_limit is None else _int(borrowing_limit, "borrowing_limit"))
        finally:
            store.close()
        limit = "" if borrowing_limit is None else f", borrowing up to {borrowing_limit} more"
        note(f"quota of {kind} {name}: {gpus} GPUs{limit}")

    guard(go)


@quota_app.command("list")
def quota_list(state: StateOpt, database: DatabaseOpt = None, fmt: FormatOpt = Format.table) -> None:
    """The quotas set."""

    def go() -> None:
        store = _open_store(state, database)
        try:
            quotas = store.quotas()
        finally:
            store.close()
        rows = [{"kind": q.kind, "name": q.name, "gpus": q.gpus, "borrowing_limit": q.borrowing_limit}
                for q in quotas]
        if fmt is Format.json:
            sys.stdout.write(json.dumps(rows) + "\n")
            return
        table = Table()
        for column in ("kind", "name", "gpus", "borrowing limit"):
            table.add_column(column)
        for r in rows:
            table.add_row(str(r["kind"]), cell(r["name"]), str(r["gpus"]),
                          "-" if r["borrowing_limit"] is None else str(r["borrowing_limit"]))
        out.print(table)

    guard(go)
