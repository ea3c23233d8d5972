"""One service per state: the lock a ``dlsched serve`` holds for its whole life.

Two services on one state would both requeue and place the same jobs (duplicate workers) and fight over
the round numbers, so the service takes, before it builds its executor or recovers anything:

- an exclusive ``flock`` on ``STATE/serve.lock`` (and on ``<db file>.lock`` when the SQLite database lives
  outside the state folder); the file holds the holder's ``pid`` and, once the API listens, its ``url``;
- with PostgreSQL, a session-level advisory lock (``pg_try_advisory_lock``) on a connection of its own kept
  open for the service's life, so services on two hosts that share one database are refused too. Its key is
  derived from a constant and the schema the tables live in (two schemas of one database are two states);
  the holder's pid and url are in the ``meta`` table (``service_holder``) for the one refused to name.

Both locks die with the process: the kernel drops a dead process's ``flock``, and PostgreSQL ends a
session (and its advisory locks) when its connection closes, so a ``kill -9``'d service's lock is taken
over by the next start. The lock connection is never pooled or pinged, so nothing else keeps it alive.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from dlsched.core import InputError

LOCK_FILE = "serve.lock"
#: Meta key of the PostgreSQL lock holder's pid, host and url.
HOLDER_KEY = "service_holder"
#: The constant the advisory lock's key is derived from ("dlsv").
_SERVICE_LOCK = 0x646C7376
#: How long a start retries a held file lock before it refuses: ``serve status`` probes it for an instant.
_RETRY_S = 2.0


def advisory_key(schema: str) -> int:
    """The PostgreSQL advisory lock's key of the state whose tables are in ``schema`` (a signed 64-bit int)."""
    digest = hashlib.sha256(f"{_SERVICE_LOCK}:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class ServiceRunning(InputError):
    """Another service holds the state (or the database)."""


def holder_text(info: dict[str, Any]) -> str:
    """``pid 123 on host at http://...`` of a lock holder, as far as it is known."""
    pid = info.get("pid", "?")
    host = info.get("host")
    url = info.get("url") or "(no URL yet: it is starting)"
    return f"pid {pid}{f' on {host}' if host and host != socket.gethostname() else ''} at {url}"


def read_holder(path: Path) -> dict[str, Any]:
    """What a lock file says about its holder ({} when nothing readable)."""
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def file_lock_held(path: Path) -> bool:
    """Whether some process holds the ``flock`` on ``path`` (probed with a shared lock, released at once)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def pid_alive(pid: Any) -> bool:
    """Whether a process with this pid exists on this host."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ServiceLock:
    """The file locks and the PostgreSQL advisory lock of one running service (see the module docstring)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self._fds: dict[Path, int] = {}
        self._pg: Any = None  # the advisory lock's connection
        self._pg_engine: Any = None
        #: Another service took the lock after this one's lock connection died: this one must leave the
        #: jobs and Ray, now the other's, as they are.
        self.lost = False
        self.info: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname(), "url": None,
                                     "state": str(state), "started": time.time()}

    def acquire_files(self, database_file: Path | None) -> None:
        """Lock ``STATE/serve.lock`` (and the SQLite database's own lock file when it lives elsewhere);
        ServiceRunning naming the holder when another process has either."""
        paths = [self.state / LOCK_FILE]
        if database_file is not None and database_file.resolve().parent != self.state.resolve():
            paths.append(database_file.resolve().with_name(database_file.name + ".lock"))
        for path in paths:
            self._lock_file(path)
        self._write_files()

    def _lock_file(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            self.release()
            raise InputError(f"cannot open the service's lock {path}: {exc.strerror}", field="state") from None
        deadline = time.monotonic() + _RETRY_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise InputError(f"cannot lock {path}: {exc.strerror}", field="state") from None
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                os.close(fd)
                self.release()
                raise ServiceRunning(f"a service already runs on this state ({path}): "
                                     f"{holder_text(read_holder(path))}; stop it first") from None
        self._fds[path] = fd

    def acquire_postgres(self, url: str, store: Any) -> None:
        """Take the advisory lock on a connection of its own; ServiceRunning naming the holder (from the
        ``meta`` table) when another session has it."""
        from sqlalchemy import create_engine, text
        from sqlalchemy.pool import NullPool

        engine = create_engine(url, poolclass=NullPool)
        conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
        key = advisory_key(schema)
        if not conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar_one():
            conn.close()
            engine.dispose()
            holder = store.meta_get(HOLDER_KEY)
            self.release()
            try:
                info = json.loads(holder) if holder else {}
            except ValueError:
                info = {}
            raise ServiceRunning(f"a service already runs on this database ({store.url}, schema {schema}): "
                                 f"{holder_text(info)}; stop it first")
        self._pg, self._pg_engine, self._store, self._key = conn, engine, store, key
        store.meta_set(HOLDER_KEY, json.dumps(self.info))

    def verify(self) -> bool:
        """Whether this service still holds its locks. The file locks cannot be lost; the PostgreSQL lock
        goes with its connection (a database restart, a network cut), so its connection is checked and, when
        it died, a new one takes the lock again: False only when another service has taken it in between.
        A database that cannot be reached counts as held (no other service can reach it either, and the
        round fails on its own)."""
        if self._pg is None:
            return True
        from sqlalchemy import text

        try:
            self._pg.execute(text("SELECT 1"))
            return True
        except Exception:  # noqa: BLE001 - any failure means the session (and its lock) may be gone
            with suppress(Exception):
                self._pg.close()
        try:
            conn = self._pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        except Exception:  # noqa: BLE001
            return True
        try:
            again = bool(conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}).scalar_one())
        except Exception:  # noqa: BLE001
            conn.close()
            return True
        if not again:
            conn.close()
            self.lost = True
            return False
        self._pg = conn
        return True

    def set_url(self, url: str) -> None:
        """Record where the API listens, for the next service refused (and ``serve status``) to name."""
        self.info["url"] = url
        self._write_files()
        if self._pg is not None:
            self._store.meta_set(HOLDER_KEY, json.dumps(self.info))

    def _write_files(self) -> None:
        data = json.dumps(self.info).encode()
        for fd in self._fds.values():
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)

    def release(self) -> None:
        """Drop every lock held (a graceful stop; a dead process drops them anyway)."""
        if self._pg is not None:
            with suppress(Exception):
                self._store.meta_set(HOLDER_KEY, json.dumps({**self.info, "url": None, "stopped": time.time()}))
            with suppress(Exception):
                self._pg.close()
            self._pg_engine.dispose()
            self._pg = None
        for path, fd in list(self._fds.items()):
            with suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the only descriptor drops the flock
            del self._fds[path]
