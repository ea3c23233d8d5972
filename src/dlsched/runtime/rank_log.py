"""A rank's log, written by its host from the command's output, and capped.

The command's stdout and stderr go to a pipe that a thread of the worker host drains into
``logs/rank<r>.log``; the command never holds the file. So a job cannot fill the disk with output (the
file is rotated to ``rank<r>.log.1`` when it reaches half the cap, the older part dropped and the number of
dropped bytes said in the new file's first line: current and previous part together stay under the cap),
cannot make the host write through a link it planted (the file is opened with ``O_NOFOLLOW`` and must be
a regular file) and, running as another account, cannot read or truncate another rank's log.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from pathlib import Path
from typing import IO

CHUNK = 1 << 16


def open_log(path: Path) -> int:
    """The log file opened for appending (0600, never through a link, only a regular file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


class RankLog:
    """Drains a command's output into its log with the cap of the module docstring (None: no cap)."""

    def __init__(self, path: Path, max_bytes: int | None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.fd = open_log(path)
        self.size = os.fstat(self.fd).st_size
        self.dropped = 0
        self._thread: threading.Thread | None = None

    def write(self, data: bytes) -> None:
        """Append ``data``, rotating first when the current part is full."""
        while data:
            room = len(data) if self.max_bytes is None else max(0, self.max_bytes // 2 - self.size)
            if room == 0:
                self._rotate()
                continue
            part, data = data[:room], data[room:]
            os.write(self.fd, part)
            self.size += len(part)

    def _rotate(self) -> None:
        older = self.path.with_name(self.path.name + ".1")
        with contextlib.suppress(OSError):
            self.dropped += os.lstat(older).st_size
        os.close(self.fd)
        os.replace(self.path, older)
        self.fd = open_log(self.path)
        self.size = 0
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        note = (f"==== dlsched: log rotated at {now}: the part before is in {older.name}; "
                f"{self.dropped} bytes before that were dropped (the log is capped at {self.max_bytes} bytes) "
                "====\n").encode()
        os.write(self.fd, note)
        self.size = len(note)

    def drain(self, source: IO[bytes]) -> None:
        """Copy ``source`` into the log until end of file, in a thread of its own."""
        def pump() -> None:
            try:
                while True:
                    data = source.read1(CHUNK) if hasattr(source, "read1") else source.read(CHUNK)
                    if not data:
                        break
                    self.write(data)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    source.close()
                self.close()

        self._thread = threading.Thread(target=pump, name=f"log-{self.path.name}", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
