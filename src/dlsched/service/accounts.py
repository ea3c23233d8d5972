"""Users, their tokens and the audit trail: the part of the store that says who may act and who acted.

A shared service needs to take access away as well as give it: a user who leaves is removed (their tokens
deleted; their jobs stay in the database under their name, which is never given out again), a leaked token
is rotated (a new one printed once, the old ones revoked in the same transaction) or revoked. Names and
teams are limited to ``A-Z a-z 0-9 . _ -`` (1 to 64), so no name can carry a newline into a log line or an
escape sequence into a terminal.

Every such action, and every submission, cancel, quota set and reconfiguration, leaves an ``audit`` row
(:func:`record`) written in the action's own transaction: the trail holds an action if and only if the
database does. An action from the API is recorded under the dlsched user who made it; one from a ``dlsched
serve`` subcommand on the host under ``os:<account>``, the account that ran it.

:class:`Accounts` is mixed into :class:`dlsched.service.store.Store`, whose sessions it uses.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from dlsched.core import InputError
from dlsched.service import models as m
from dlsched.service.records import ACTIVE_STATUSES, UserRecord

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: An OS account name as useradd accepts it by default.
_OS_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
#: The user ``dlsched serve`` creates at its first start: the service's own, never removed.
SERVICE_ADMIN = "admin"


def hash_token(token: str) -> str:
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()


def check_name(value: str, field: str) -> str:
    """``value`` when it is a safe name (1 to 64 of ``A-Z a-z 0-9 . _ -``); InputError naming ``field``."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise InputError(f"must be 1 to 64 of the characters A-Z a-z 0-9 . _ -, got {value!r}", field=field)
    return value


def os_actor() -> str:
    """Who runs this process, as the audit trail names an action taken on the host: ``os:<account>``."""
    try:
        return f"os:{pwd.getpwuid(os.geteuid()).pw_name}"
    except KeyError:
        return f"os:uid-{os.geteuid()}"


def record(s: Session, actor: str | None, action: str, target: str | None, detail: dict[str, Any] | None = None,
           now_s: float | None = None) -> None:
    """One audit row, in the caller's transaction (so it commits, or rolls back, with the action)."""
    s.execute(insert(m.Audit).values(time_s=time.time() if now_s is None else now_s,
                                     actor=(actor or os_actor())[:80], action=action,
                                     target=None if target is None else target[:200], detail=detail or {}))


def cancel_in(s: Session, job_id: str, now_s: float) -> bool:
    """Ask for a job to end, in the caller's transaction: a queued (or held) job is cancelled at once, a
    placed one marked ``cancel_requested`` for the round loop to stop. False when it had ended already (or
    was already asked)."""
    marked = s.execute(update(m.Job).where(m.Job.id == job_id, m.Job.status.in_(ACTIVE_STATUSES),
                                           m.Job.cancel_requested.is_(False)).values(cancel_requested=True))
    if not getattr(marked, "rowcount", 0):
        return False
    cancelled = s.execute(update(m.Job).where(m.Job.id == job_id, m.Job.status.in_(("queued", "held")))
                          .values(status="cancelled", finished_s=now_s, message="cancelled before it started",
                                  reason=None, reason_detail=None))
    kind, message = (("cancelled", "cancelled while queued") if getattr(cancelled, "rowcount", 0)
                     else ("cancel-requested", "cancel requested; its workers will be stopped"))
    s.execute(insert(m.Event).values(job_id=job_id, time_s=now_s, kind=kind, message=message, data={}))
    return True


class Accounts:
    """Users, tokens and the audit trail, over the store's sessions."""

    if TYPE_CHECKING:
        def _write(self) -> AbstractContextManager[Session]: ...
        def _read(self) -> AbstractContextManager[Session]: ...

    def add_user(self, name: str, *, team: str | None = None, admin: bool = False, actor: str | None = None,
                 os_user: str | None = None) -> str:
        """Create a user and return their first token (shown once: only its hash is kept); their jobs run as
        the OS account ``os_user`` (None: the service's job account)."""
        check_name(name, "name")
        if team is not None:
            check_name(team, "team")
        if os_user is not None and not _OS_NAME.match(os_user):
            raise InputError(f"must be an OS account name (a-z, 0-9, _ and -, 1 to 32), got {os_user!r}",
                             field="os_user")
        token = secrets.token_urlsafe(32)
        now = time.time()
        try:
            with self._write() as s:
                s.execute(insert(m.User).values(name=name, team=team, admin=admin, created_s=now, os_user=os_user))
                s.execute(insert(m.Token).values(user=name, sha256=hash_token(token), created_s=now))
                record(s, actor, "user-add", name, {"team": team, "admin": admin, "os_user": os_user}, now)
        except IntegrityError:
            raise InputError(f"a user named {name!r} exists already (or existed: names are not reused)",
                             field="name") from None
        return token

    def add_token(self, user: str, *, actor: str | None = None) -> str:
        """Another token for an active user (the old ones stay valid)."""
        token = secrets.token_urlsafe(32)
        with self._write() as s:
            self._active(s, user)
            s.execute(insert(m.Token).values(user=user, sha256=hash_token(token), created_s=time.time()))
            record(s, actor, "token-add", user)
        return token

    def user_by_token(self, token: str) -> UserRecord | None:
        with self._read() as s:
            row = s.execute(select(m.User).join(m.Token, m.Token.user == m.User.name)
                            .where(m.Token.sha256 == hash_token(token), m.User.removed_s.is_(None))
                            ).scalar_one_or_none()
            return None if row is None else UserRecord(row.name, row.team, bool(row.admin), row.os_user)

    def users(self) -> list[UserRecord]:
        """The active users (removed ones are left out)."""
        with self._read() as s:
            rows = s.execute(select(m.User).where(m.User.removed_s.is_(None)).order_by(m.User.name)).scalars()
            return [UserRecord(u.name, u.team, bool(u.admin), u.os_user) for u in rows]

    def remove_user(self, name: str, *, force: bool = False, actor: str | None = None) -> list[str]:
        """Remove a user: their tokens are deleted and the name is kept, marked removed, for the jobs that
        name it. A user with unfinished jobs is refused unless ``force``, which cancels those jobs in the
        same transaction (queued ones at once; running ones are stopped by the next round). Returns the ids
        of the jobs it cancelled."""
        if name == SERVICE_ADMIN:
            raise InputError(f"{name!r} is the service's own admin and cannot be removed; rotate its token "
                             "instead ('dlsched serve token rotate admin')", field="name")
        now = time.time()
        with self._write() as s:
            self._active(s, name)
            active = list(s.execute(select(m.Job.id).where(m.Job.user == name, m.Job.status.in_(ACTIVE_STATUSES))
                                    .order_by(m.Job.seq)).scalars())
            if active and not force:
                raise InputError(f"{name} has {len(active)} unfinished job(s) ({', '.join(map(str, active[:5]))}"
                                 f"{', ...' if len(active) > 5 else ''}); cancel them first or pass --force to "
                                 "cancel them with the removal", field="name")
            cancelled = [str(j) for j in active if cancel_in(s, str(j), now)]
            s.execute(delete(m.Token).where(m.Token.user == name))
            s.execute(update(m.User).where(m.User.name == name).values(removed_s=now))
            s.execute(delete(m.Quota).where(m.Quota.kind == "user", m.Quota.name == name))
            record(s, actor, "user-remove", name, {"cancelled": cancelled, "force": force}, now)
        return cancelled

    def rotate_token(self, name: str, *, actor: str | None = None) -> str:
        """A new token for ``name``, every older one revoked, in one transaction; the new token is returned
        (shown once)."""
        token = secrets.token_urlsafe(32)
        now = time.time()
        with self._write() as s:
            self._active(s, name)
            revoked = s.execute(delete(m.Token).where(m.Token.user == name))
            s.execute(insert(m.Token).values(user=name, sha256=hash_token(token), created_s=now))
            record(s, actor, "token-rotate", name, {"revoked": int(getattr(revoked, "rowcount", 0))}, now)
        return token

    def revoke_tokens(self, name: str, token_id: int | None = None, *, actor: str | None = None) -> int:
        """Revoke every token of ``name``, or the one with ``token_id`` (which must be theirs); how many
        were revoked. A user left without a token is still a user: ``token rotate`` gives them a new one."""
        with self._write() as s:
            self._active(s, name)
            query = delete(m.Token).where(m.Token.user == name)
            if token_id is not None:
                query = query.where(m.Token.id == token_id)
            revoked = int(getattr(s.execute(query), "rowcount", 0))
            if token_id is not None and not revoked:
                raise InputError(f"{name} has no token with id {token_id} (see 'dlsched serve token list')",
                                 field="id")
            record(s, actor, "token-revoke", name, {"revoked": revoked, "id": token_id})
        return revoked

    def tokens(self, name: str | None = None) -> list[dict[str, Any]]:
        """Tokens by id, user and creation time (never the token: only its hash is kept)."""
        query = select(m.Token).order_by(m.Token.id)
        if name is not None:
            query = query.where(m.Token.user == name)
        with self._read() as s:
            return [{"id": t.id, "user": t.user, "created_s": t.created_s} for t in s.execute(query).scalars()]

    def record_audit(self, action: str, target: str | None, detail: dict[str, Any] | None = None, *,
                     actor: str | None = None, meta: dict[str, str] | None = None) -> None:
        """An audit row of an action taken outside the store (a reconfiguration of the service), with the
        ``meta`` rows it sets, in one transaction."""
        with self._write() as s:
            for key, value in (meta or {}).items():
                s.execute(delete(m.Meta).where(m.Meta.key == key))
                s.execute(insert(m.Meta).values(key=key, value=value))
            record(s, actor, action, target, detail)

    def audit(self, *, since_s: float | None = None, actor: str | None = None,
              limit: int | None = None) -> list[dict[str, Any]]:
        """The audit trail, oldest first: from ``since_s`` on, of one actor, the last ``limit`` rows."""
        query = select(m.Audit).order_by(m.Audit.id.desc())
        if since_s is not None:
            query = query.where(m.Audit.time_s >= since_s)
        if actor is not None:
            query = query.where(m.Audit.actor == actor)
        if limit is not None:
            query = query.limit(limit)
        with self._read() as s:
            rows = list(s.execute(query).scalars())
        return [{"id": a.id, "time_s": a.time_s, "actor": a.actor, "action": a.action, "target": a.target,
                 "detail": dict(a.detail or {})} for a in reversed(rows)]

    @staticmethod
    def _active(s: Session, name: str) -> None:
        """InputError unless ``name`` is an active user. It starts with a write (a no-op UPDATE of the
        user's row), so the transaction holds the write lock before it reads (see the store's docstring)."""
        touched = s.execute(update(m.User).where(m.User.name == name, m.User.removed_s.is_(None))
                            .values(removed_s=None))
        if getattr(touched, "rowcount", 0):
            return
        removed = s.execute(select(m.User.removed_s).where(m.User.name == name)).one_or_none()
        if removed is None:
            raise InputError(f"no user named {name!r}", field="user")
        if removed[0] is not None:
            raise InputError(f"user {name!r} was removed", field="user")
