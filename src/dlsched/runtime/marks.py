"""A mark on every process of one rank that the rank cannot take off: a supplementary group of its own.

A job's process can leave its rank's process group and session (``setsid``), clear its environment and
double-fork, and so outlive the job while holding its GPU memory or, worse, wait for the next job on the
node. What an unprivileged process cannot do is drop a supplementary group (``setgroups`` needs
``CAP_SETGID``), and every child inherits it. So a host running as root starts its rank's command with one
extra group id of its own (no group of that id exists; the id only marks) and, when the rank ends or the
host dies, kills every process that still carries it. Without root no mark can be set, and only the
process group is killed (docs/security.md says so).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

#: Marks are ``MARK_BASE + the host's pid``: unique on the node while the host lives, and far above the
#: group ids accounts use.
MARK_BASE = 0x70000000


def mark_for(host_pid: int) -> int:
    return MARK_BASE + host_pid


def marked_pids(gid: int) -> list[int]:
    """The processes that carry supplementary group ``gid`` (read from ``/proc``, as root can)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines() if ":" in line)
        except (OSError, ValueError):
            continue
        if fields.get("State", "").strip().startswith("Z"):
            continue  # a zombie holds nothing; its parent reaps it
        if str(gid) in fields.get("Groups", "").split():
            found.append(int(proc.name))
    return found


def kill_marked(gid: int, passes: int = 20) -> int:
    """SIGKILL every process marked ``gid`` until none is left (a process forking meanwhile is caught by a
    later pass). Returns how many were killed."""
    killed = 0
    for _ in range(passes):
        pids = [p for p in marked_pids(gid) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed
