"""``dlsched serve user|token|audit``: who may use the service, their tokens, and the trail of who did what.

These commands work on the service's database directly (as ``serve quota`` does), with or without the
service running, and are audited under the OS account that runs them (``os:<account>``):

- ``serve user add NAME [--team T] [--admin]`` prints the new user's token once; ``serve user list``;
  ``serve user remove NAME [--force]`` deletes their tokens and marks them removed (their jobs stay in the
  database under their name, which is not given out again); a user with unfinished jobs is refused unless
  ``--force``, which cancels those jobs in the same transaction;
- ``serve token rotate NAME`` prints a new token once and revokes every older one; ``serve token revoke
  NAME [--id N]`` revokes all of the user's tokens (or the one with id N); ``serve token list [NAME]``
  shows tokens by id and age (never the token: only its hash is kept). The admin's token is rotated in
  ``STATE/admin.token`` and a running service's ``server.json`` as well;
- ``serve audit [--since T] [--user U] [--format json]``: the audit trail, oldest first.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dlsched.cli.common import Format, FormatOpt, cell, guard, note, out, printable
from dlsched.core import InputError

StateOpt = Annotated[Path, typer.Option("--state", help="The service's state folder (as given to 'dlsched serve').")]
DatabaseOpt = Annotated[str | None, typer.Option("--database", help="Database URL, if not the state folder's "
                                                 "SQLite file (postgresql+psycopg://USER@HOST/DB).")]
NameArg = Annotated[str, typer.Argument(help="The user's name (A-Z a-z 0-9 . _ -).")]

user_app = typer.Typer(no_args_is_help=True, help="Users of the service.")
token_app = typer.Typer(no_args_is_help=True, help="Users' API tokens: rotate, revoke, list.")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def open_store(state: Path, database: str | None) -> Any:
    """The state's store: ``--database`` when given, else the database the service was started with."""
    from dlsched.service.extra import require

    require()
    from dlsched.service.config import read_file
    from dlsched.service.store import Store

    if database is None and state.is_dir():
        stored = read_file(state) or {}
        database = stored.get("database") if isinstance(stored.get("database"), str) else None
    return Store.open(state, database)


def _with_store(state: Path, database: str | None, action: Any) -> Any:
    store = open_store(state, database)
    try:
        return action(store)
    finally:
        store.close()


@user_app.command("add")
def user_add(
    name: NameArg,
    state: StateOpt,
    team: Annotated[str | None, typer.Option("--team", help="The user's team (for team quotas; A-Z a-z 0-9 . _ -).")]
    = None,
    admin: Annotated[bool, typer.Option("--admin", help="May see and cancel every user's jobs.")] = False,
    os_user: Annotated[str | None, typer.Option("--os-user", metavar="ACCOUNT", help="The OS account the "
                                                "user's jobs run as (default: the service's --job-user).")]
    = None,
    database: DatabaseOpt = None,
) -> None:
    """Add a user and print their token (shown only now: the service keeps only its hash)."""

    def go() -> None:
        from dlsched.service.isolation import check_second_user, lookup

        if os_user is not None:
            lookup(os_user, field="os_user")  # an account this host has, and not root

        def add(store: Any) -> str:
            check_second_user(store, state)
            return str(store.add_user(name, team=team, admin=admin, os_user=os_user))

        token = _with_store(state, database, add)
        sys.stdout.write(token + "\n")
        note(f"user {name} added; give them this token (DLSCHED_TOKEN)")

    guard(go)


@user_app.command("list")
def user_list(state: StateOpt, database: DatabaseOpt = None, fmt: FormatOpt = Format.table) -> None:
    """The service's users (removed ones are left out)."""

    def go() -> None:
        users = _with_store(state, database, lambda s: s.users())
        if fmt is Format.json:
            sys.stdout.write(json.dumps([{"name": u.name, "team": u.team, "admin": u.admin, "os_user": u.os_user}
                                         for u in users]) + "\n")
            return
        table = Table()
        for column in ("name", "team", "admin", "os_user"):
            table.add_column(column)
        for u in users:
            table.add_row(cell(u.name), cell(u.team or "-"), "yes" if u.admin else "", cell(u.os_user or "-"))
        out.print(table)

    guard(go)


@user_app.command("remove")
def user_remove(
    name: NameArg, state: StateOpt,
    force: Annotated[bool, typer.Option("--force", help="Cancel the user's unfinished jobs with the removal.")]
    = False,
    database: DatabaseOpt = None,
) -> None:
    """Remove a user: their tokens stop working at once; their jobs stay in the database. Refused while they
    have unfinished jobs, unless --force (which cancels them)."""

    def go() -> None:
        cancelled = _with_store(state, database, lambda s: s.remove_user(name, force=force))
        extra = f"; cancelled {', '.join(cancelled)}" if cancelled else ""
        note(f"user {name} removed (their tokens are revoked, their jobs kept){extra}")

    guard(go)


@token_app.command("rotate")
def token_rotate(name: NameArg, state: StateOpt, database: DatabaseOpt = None) -> None:
    """Print a new token for the user (shown only now) and revoke every older one."""

    def go() -> None:
        token = _with_store(state, database, lambda s: s.rotate_token(name))
        if name == "admin":
            _replace_admin_token(state, token)
        sys.stdout.write(token + "\n")
        note(f"new token for {name}; every older one is revoked")

    guard(go)


@token_app.command("revoke")
def token_revoke(
    name: NameArg, state: StateOpt,
    token_id: Annotated[str | None, typer.Option("--id", metavar="N", help="Only this token (see 'serve token "
                                                 "list'); default: all of the user's tokens.")] = None,
    database: DatabaseOpt = None,
) -> None:
    """Revoke the user's tokens (all of them, or one by --id); 'serve token rotate' gives them a new one."""

    def go() -> None:
        one = None
        if token_id is not None:
            if not token_id.isdigit():
                raise InputError(f"must be a token id (a number, see 'dlsched serve token list'), got {token_id!r}",
                                 field="id")
            one = int(token_id)
        count = _with_store(state, database, lambda s: s.revoke_tokens(name, one))
        note(f"revoked {count} token(s) of {name}")

    guard(go)


@token_app.command("list")
def token_list(
    state: StateOpt, name: Annotated[str | None, typer.Argument(help="Only this user's tokens.")] = None,
    database: DatabaseOpt = None, fmt: FormatOpt = Format.table,
) -> None:
    """Tokens by id, user and when they were made (the tokens themselves are not kept)."""

    def go() -> None:
        rows = _with_store(state, database, lambda s: s.tokens(name))
        rows = [{**r, "created": _iso(r["created_s"])} for r in rows]
        if fmt is Format.json:
            sys.stdout.write(json.dumps(rows) + "\n")
            return
        table = Table()
        for column in ("id", "user", "created"):
            table.add_column(column)
        for r in rows:
            table.add_row(str(r["id"]), cell(r["user"]), r["created"])
        out.print(table)

    guard(go)


def audit(
    state: StateOpt,
    since: Annotated[str | None, typer.Option("--since", metavar="T", help="From this time on: ISO 8601 (UTC "
                                              "unless it says), Unix seconds, or an age such as 30m, 2h, 7d.")]
    = None,
    user: Annotated[str | None, typer.Option("--user", help="Only what this user did (os:ACCOUNT for commands "
                                             "run on the host).")] = None,
    database: DatabaseOpt = None, fmt: FormatOpt = Format.table,
) -> None:
    """Who submitted, cancelled, set a quota, added or removed a user, rotated or revoked a token, or
    reconfigured the service, and when (oldest first)."""

    def go() -> None:
        since_s = None if since is None else parse_since(since)
        rows = _with_store(state, database, lambda s: s.audit(since_s=since_s, actor=user))
        rows = [{**r, "time": _iso(r["time_s"])} for r in rows]
        if fmt is Format.json:
            for r in rows:
                sys.stdout.write(json.dumps(r) + "\n")
            return
        table = Table()
        for column in ("time", "actor", "action", "target", "detail"):
            table.add_column(column)
        for r in rows:
            table.add_row(r["time"], cell(r["actor"]), cell(r["action"]), cell(r["target"] or "-"),
                          cell(json.dumps(r["detail"], sort_keys=True) if r["detail"] else ""))
        out.print(table)
        if not rows:
            note("no audit records" + ("" if since is None and user is None else " match"))

    guard(go)


def parse_since(text: str) -> float:
    """``--since``: an age (``30m``), Unix seconds, or an ISO 8601 time (UTC unless it names a zone)."""
    found = _DURATION.match(text.strip())
    if found:
        return time.time() - float(found.group(1)) * _UNIT_S[found.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"must be an ISO 8601 time (2026-01-31T12:00), Unix seconds or an age (30m, 2h, 7d), "
                         f"got {printable(text)!r}", field="since") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _replace_admin_token(state: Path, token: str) -> None:
    """Keep the admin's new token where the service and its scripts find it: ``STATE/admin.token`` (read at
    the next start) and a running service's ``server.json`` (read by the client commands), both 0600."""
    _write_private(state / "admin.token", token + "\n")  # dlsched.service.server's TOKEN_FILE, SERVER_FILE
    info_path = state / "server.json"
    try:
        info = json.loads(info_path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(info, dict):
        info["token"] = token
        _write_private(info_path, json.dumps(info))


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    tmp.replace(path)
