"""Reading a job's log files as untrusted input: no link followed, nothing but regular files, bounded reads.

A job owns its folder and can plant anything in it: a symlink ``logs/rank7.log -> STATE/server.json`` (the
admin's token), a FIFO that blocks whoever opens it, a log of hundreds of megabytes. So every component
below the job's folder is opened with ``O_NOFOLLOW`` relative to its parent's descriptor (a link anywhere
on the way is refused, never resolved), files with ``O_NONBLOCK`` (a FIFO cannot block the open), and only
a regular file owned by an expected account is read, in bounded chunks, so no request holds much memory or
waits on what a job controls.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: Bytes read at a time (what one request holds in memory for a log).
CHUNK = 64 * 1024
_RANK_LOG = re.compile(r"^rank(\d{1,5})\.log$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class UnsafeLog(Exception):
    """A log path that is not a regular file the service may read (a link, a FIFO, another's file), or
    that does not exist (``missing``: nothing was planted, there is just no log yet)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class LogFile:
    """One log of a job: the header it is shown under and its path below the job's folder."""

    header: str
    parts: tuple[str, ...]
    rank: int | None


def _open_dir(base: Path, parts: tuple[str, ...]) -> int:
    """A descriptor of ``base/parts...``, each component opened without following a link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(base, flags)
    try:
        for part in parts:
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_log(job_dir: Path, parts: tuple[str, ...], *, owners: frozenset[int] | None = None) -> int:
    """A read-only descriptor of the regular file ``job_dir/parts...``; UnsafeLog for anything else."""
    try:
        dfd = _open_dir(job_dir, parts[:-1])
    except OSError as exc:
        raise UnsafeLog(f"{'/'.join(parts[:-1]) or '.'} is not a folder the service may read "
                        f"({errno.errorcode.get(exc.errno or 0, 'error')})",
                        missing=exc.errno == errno.ENOENT) from None
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else errno.errorcode.get(exc.errno or 0, "error")
        raise UnsafeLog(f"{'/'.join(parts)} cannot be read: {why}", missing=exc.errno == errno.ENOENT) from None
    finally:
        os.close(dfd)
    info = os.fstat(fd)
    allowed = owners if owners is not None else frozenset({os.geteuid()})
    if not stat.S_ISREG(info.st_mode) or info.st_uid not in allowed:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(info.st_mode) else "owned by another account"
        raise UnsafeLog(f"{'/'.join(parts)} is {what}")
    return fd


def job_logs(job_dir: Path, rank: int | None) -> list[LogFile]:
    """The job's rank logs (``logs/rank<r>.log``) by rank, then, without ``rank``, its profile runs' logs
    (``profiles/<type>/logs/rank<r>.log``): a job that failed in a profile failed there. Names are listed
    without opening anything, and links are not followed."""
    found = [LogFile(f"==> rank{r} <==\n", ("logs", name), r) for r, name in _ranks(job_dir, ("logs",), rank)]
    if rank is None:
        for gtype in sorted(_entries(job_dir, ("profiles",))):
            if _SAFE_NAME.match(gtype):
                found += [LogFile(f"==> profile {gtype} rank{r} <==\n", ("profiles", gtype, "logs", name), r)
                          for r, name in _ranks(job_dir, ("profiles", gtype, "logs"), None)]
    return found


def _entries(job_dir: Path, parts: tuple[str, ...]) -> list[str]:
    try:
        fd = _open_dir(job_dir, parts)
    except OSError:
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _ranks(job_dir: Path, parts: tuple[str, ...], rank: int | None) -> list[tuple[int, str]]:
    out = []
    for name in _entries(job_dir, parts):
        match = _RANK_LOG.match(name)
        if match and (rank is None or int(match.group(1)) == rank):
            out.append((int(match.group(1)), name))
    return sorted(out)


def tail_offset(fd: int, lines: int) -> int:
    """Where the last ``lines`` lines of the file start, read backwards in bounded chunks."""
    end = os.fstat(fd).st_size
    pos, seen = end, 0
    while pos > 0:
        start = max(0, pos - CHUNK)
        data = os.pread(fd, pos - start, start)
        # a final newline ends the last line, it does not start one
        stop = len(data) - 1 if pos == end and data.endswith(b"\n") else len(data)
        for i in range(stop - 1, -1, -1):
            if data[i] == 0x0A:
                seen += 1
                if seen == lines:
                    return start + i + 1
        pos = start
    return 0


def read_chunks(fd: int, start: int, limit: int | None) -> Iterator[bytes]:
    """The file's bytes from ``start``, at most ``limit`` of them, CHUNK at a time; closes ``fd``."""
    try:
        pos, left = start, limit
        while left is None or left > 0:
            data = os.pread(fd, CHUNK if left is None else min(CHUNK, left), pos)
            if not data:
                return
            pos += len(data)
            if left is not None:
                left -= len(data)
            yield data
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
