"""``dlsched serve``: run the scheduler service, and manage its users and quotas.

``dlsched serve --state DIR ...`` starts the service (:func:`dlsched.service.server.serve`). The
subcommands work on the service's database directly, with or without the service running (the store is
safe to share): ``serve user add|list`` and ``serve quota set|list``.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dlsched.cli.common import Format, FormatOpt, guard, note, out
from dlsched.cli.run_options import parse_set
from dlsched.core import InputError

app = typer.Typer(no_args_is_help=False, help="Run the scheduler service; manage its users and quotas.")
user_app = typer.Typer(no_args_is_help=True, help="Users of the service and their tokens.")
quota_app = typer.Typer(no_args_is_help=True, help="GPU quotas of users and teams.")
app.add_typer(user_app, name="user")
app.add_typer(quota_app, name="quota")

StateOpt = Annotated[Path, typer.Option("--state", help="The service's state folder (as given to 'dlsched serve').")]
DatabaseOpt = Annotated[str | None, typer.Option("--database", help="Database URL, if not the state folder's "
                                                 "SQLite file (postgresql+psycopg://USER@HOST/DB).")]


@app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    state: Annotated[Path | None, typer.Option("--state", help="Folder of the service's state: its SQLite "
                                               "database, the jobs' folders, server.json (required).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Cluster preset or file (default: "
                                                "ray-local-4, 4 emulated nodes).")] = None,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster to join (default: start Ray "
                                                "here).")] = None,
    policy: Annotated[str, typer.Option("--policy", help="Scheduler preset (see 'dlsched policies').")] = "fifo",
    set_: Annotated[list[str] | None, typer.Option("--set", help="key=value: a tunable of the policy; "
                                                   "repeatable.")] = None,
    port: Annotated[str, typer.Option("--port", metavar="INTEGER", help="Port of the HTTP API (0: any free "
                                      "one; server.json says which).")] = "0",
    host: Annotated[str, typer.Option("--host", help="Address the HTTP API listens on.")] = "127.0.0.1",
    database: DatabaseOpt = None,
    checkpoint_dir: Annotated[Path | None, typer.Option("--checkpoint-dir", help="Shared folder of the jobs' "
                                                        "checkpoints (default: STATE/checkpoints).")] = None,
    round_s: Annotated[str, typer.Option("--round-s", metavar="SECONDS", help="Scheduling round, "
                                         "wall-clock seconds.")] = "10",
    executor: Annotated[str, typer.Option("--executor", help="ray (real workers) or dry-run (nothing is "
                                          "started; for trying policies and the API).")] = "ray",
) -> None:
    """Run the scheduler service until SIGINT or SIGTERM."""
    if ctx.invoked_subcommand is not None:
        return

    def go() -> None:
        from dlsched.service.extra import require
        from dlsched.service.options import DEFAULT_CLUSTER, ServeOptions

        require()
        if state is None:
            raise InputError("--state DIR is required (the service's state folder)", field="state")
        options = ServeOptions.parse({
            "state": state, "cluster": cluster or DEFAULT_CLUSTER, "cluster_given": cluster is not None,
            "address": address, "policy": policy, "settings": parse_set(set_), "port": port, "host": host,
            "database": database, "checkpoint_dir": checkpoint_dir, "round_s": round_s, "executor": executor})
        try:  # imported by name: the server module is built on top of this one
            server = importlib.import_module("dlsched.service.server")
        except ModuleNotFoundError as exc:
            if exc.name != "dlsched.service.server":
                raise
            raise InputError("this dlsched has no service runner (dlsched.service.server)") from None
        server.serve(options)

    guard(go)


def _int(text: str, field: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"must be an integer, got {text!r}", field=field) from None


def _open_store(state: Path, database: str | None) -> Any:
    from dlsched.service.extra import require

    require()
    from dlsched.service.store import Store

    return Store.open(state, database)


@user_app.command("add")
def user_add(
    name: Annotated[str, typer.Argument(help="The user's name (A-Z a-z 0-9 . _ -).")],
    state: StateOpt,
    team: Annotated[str | None, typer.Option("--team", help="The user's team (for team quotas).")] = None,
    admin: Annotated[bool, typer.Option("--admin", help="May see and cancel every user's jobs.")] = False,
    database: DatabaseOpt = None,
) -> None:
    """Add a user and print their token (shown only now: the service keeps only its hash)."""

    def go() -> None:
        store = _open_store(state, database)
        try:
            token = store.add_user(name, team=team, admin=admin)
        finally:
            store.close()
        sys.stdout.write(token + "\n")
        note(f"user {name} added; give them this token (DLSCHED_TOKEN)")

    guard(go)


@user_app.command("list")
def user_list(state: StateOpt, database: DatabaseOpt = None, fmt: FormatOpt = Format.table) -> None:
    """The service's users."""

    def go() -> None:
        store = _open_store(state, database)
        try:
            users = store.users()
        finally:
            store.close()
        if fmt is Format.json:
            sys.stdout.write(json.dumps([{"name": u.name, "team": u.team, "admin": u.admin} for u in users]) + "\n")
            return
        table = Table()
        for column in ("name", "team", "admin"):
            table.add_column(column)
        for u in users:
            table.add_row(u.name, u.team or "-", "yes" if u.admin else "")
        out.print(table)

    guard(go)


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
            table.add_row(str(r["kind"]), str(r["name"]), str(r["gpus"]),
                          "-" if r["borrowing_limit"] is None else str(r["borrowing_limit"]))
        out.print(table)

    guard(go)
