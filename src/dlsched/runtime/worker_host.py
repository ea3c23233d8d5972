"""The host of one rank: a Ray actor that starts the user's command as a child process and watches it.

The command runs with ``/bin/sh -c`` in a session of its own (so a signal reaches the shell and whatever
it started: a SIGTERM to the process group is what a terminal's Ctrl-C or ``torchrun`` would send).

A stop must reach the training process whatever wraps it. ``sh -c 'python x.py'``, ``torchrun`` or a shell
script all put the process that checkpoints one or more levels below the group's leader, and the leader
often dies of the SIGTERM at once while its children are still finishing their step and writing the stop
checkpoint. So once a stop signal was sent, a rank counts as running until its whole process group is gone,
not just the shell; only then are leftovers killed. (Without a stop, the shell's exit ends the rank as
before, and whatever it left in its group is killed: a finished job holds no GPU.) Two
guards make sure the training never outlives its host, whether the host is killed by the executor, by Ray
or with its whole node:

- the shell gets ``PR_SET_PDEATHSIG`` = SIGKILL, so the kernel kills it the moment the host's thread that
  started it ends (actor methods run on the worker's main thread, so that is the host process's death);
- a tiny watchdog process holds the read end of a pipe whose only write end the host holds. When the host
  dies the pipe reads end-of-file and the watchdog SIGKILLs the command's whole process group, which
  catches the grandchildren a shell forks (these do not inherit the parent-death signal). The watchdog is
  forked away from the host, as Ray kills a dying worker's direct children.

The command's output reaches its log through a pipe this host drains (:mod:`dlsched.runtime.rank_log`:
capped, rotated, never written through a link). Given an account (``run_as``), a host running as root
starts the command as that account (:func:`privileges`) and marks its processes with a supplementary
group of their own (:mod:`dlsched.runtime.marks`), so that what escaped the process group is killed too
when the rank ends, by the host or, if the host died, by the watchdog.

Nothing here imports Ray: the class becomes an actor in :mod:`dlsched.runtime.executor`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dlsched.runtime.marks import kill_marked, mark_for
from dlsched.runtime.rank_log import RankLog

_PR_SET_PDEATHSIG = 1

#: Run by the watchdog: fork away from the host (Ray kills a dying worker's own children, and the watchdog
#: must outlive it), wait for the host's end of the pipe; on end-of-file (the host died) kill the command's
#: group; on a byte (the host reaped the command and cleaned up itself) just leave.
_WATCHDOG = (
    "import os, signal, sys\n"
    "if os.fork():\n"
    "    os._exit(0)\n"
    "data = sys.stdin.buffer.read(1)\n"
    "if not data:\n"
    "    try:\n"
    "        os.killpg(int(sys.argv[1]), signal.SIGKILL)\n"
    "    except OSError:\n"
    "        pass\n"
    "    if len(sys.argv) > 2:\n"
    "        from dlsched.runtime.marks import kill_marked\n"
    "        kill_marked(int(sys.argv[2]))\n"
)


def exit_status(returncode: int) -> int:
    """A Popen return code as a shell reports it: death by signal ``s`` is ``128 + s``."""
    return 128 - returncode if returncode < 0 else returncode


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _die_with_parent(parent: int) -> Any:
    """A ``preexec_fn`` giving the child PR_SET_PDEATHSIG = SIGKILL (and closing the race where the parent
    died before the call)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def set_signal() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)

    return set_signal


class WorkerHost:
    """One rank's host (a detached, named Ray actor pinned to its node)."""

    def __init__(self, job_id: str, incarnation: int, rank: int, node: str,
                 memory_limit_bytes: int | None = None) -> None:
        self.job_id, self.incarnation, self.rank, self.node = job_id, incarnation, rank, node
        #: The memory the rank's processes may use together (resident set); past it they are killed.
        self.memory_limit_bytes = memory_limit_bytes
        #: Why this host ended the command, when it did (``memory``).
        self.reason: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None
        self.started_at = time.time()
        #: A stop signal was sent: the rank ends when its whole group has, not when the shell has.
        self.stopping = False
        #: The shell's exit status, once reaped (the rank's exit code once the group is gone).
        self._shell_code: int | None = None
        #: The rank's output, drained into its log; the supplementary group marking its processes (root).
        self.log: RankLog | None = None
        self.mark: int | None = None

    def address(self) -> tuple[str, int]:
        """This node's IP and a port free on it now, where rank 0 hosts the process group."""
        import ray

        return ray.util.get_node_ip_address(), free_port()

    def start(self, command: str, working_dir: str, env: dict[str, str], log: str, header: str,
              run_as: str | None = None, max_log_bytes: int | None = None) -> int | None:
        """Start the command with ``env`` added to this process's environment, its output appended to
        ``log`` after ``header`` (through :class:`~dlsched.runtime.rank_log.RankLog`, capped at
        ``max_log_bytes``), as the OS account ``run_as`` when given (None: this process's own). Returns the
        child's pid; None when it could not start (the reason is in the log and the rank reads as exited
        with 127, as a shell reports a command it cannot run)."""
        try:
            self.log = RankLog(Path(log), max_log_bytes)
            self.log.write(header.encode() + b"\n")
        except OSError:  # a log that is a link, a FIFO or on a full disk: the rank cannot start
            self.exit_code = 127
            return None
        child_env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        child_env.update(env)
        try:
            drop = privileges(run_as, child_env)
            if drop:
                self.mark = mark_for(os.getpid())
                drop["extra_groups"] = [self.mark]
            self.proc = subprocess.Popen(
                ["/bin/sh", "-c", command], cwd=working_dir, env=child_env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()), **drop)
        except (OSError, KeyError, PermissionError) as exc:
            self.log.write(f"error: cannot start the command: {exc}\n".encode())
            self.log.close()
            self.exit_code = 127
            return None
        assert self.proc.stdout is not None
        self.log.drain(self.proc.stdout)
        args = [str(self.proc.pid)] + ([str(self.mark)] if self.mark is not None else [])
        self.watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, *args],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
        self.watchdog.wait()  # the launcher forks the watchdog off and leaves at once
        return self.proc.pid

    def status(self) -> dict[str, Any]:
        """Whether the command still runs, and its exit status once it ended (see the module docstring for
        why a stopping rank waits for its whole process group)."""
        if self.proc is not None and self.exit_code is None:
            if self.memory_limit_bytes is not None and self._shell_code is None and self.reason is None \
                    and group_rss_bytes(self.proc.pid) > self.memory_limit_bytes:
                self.reason = "memory"  # over what the job reserved: the whole group goes, as an OOM kill
                with contextlib.suppress(OSError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
            if self._shell_code is None:
                code = self.proc.poll()
                if code is not None:
                    self._shell_code = exit_status(code)
            if self._shell_code is not None and not (self.stopping and group_alive(self.proc.pid)):
                self.exit_code = self._shell_code
                self._cleanup()
        return {"rank": self.rank, "node": self.node, "incarnation": self.incarnation,
                "pid": None if self.proc is None else self.proc.pid,
                "running": self.proc is not None and self.exit_code is None, "exit_code": self.exit_code,
                "reason": self.reason}

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the command's process group (the shell and everything it started)."""
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        if self.proc is not None and self.exit_code is None:
            try:
                os.killpg(self.proc.pid, signum)
            except OSError:
                pass

    def _cleanup(self) -> None:
        """After the command ended: kill what it left in its group, then stand the watchdog down."""
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if self.mark is not None:  # what left the group and session: every process that carries the mark
            kill_marked(self.mark)
        if self.log is not None:  # the last lines reach the log before anyone reads its tail
            self.log.join(2.0)
        if self.watchdog is not None and self.watchdog.stdin is not None:
            try:
                self.watchdog.stdin.write(b"x")
                self.watchdog.stdin.close()
            except OSError:
                pass
            self.watchdog = None


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (a zombie left unreaped by its parent does not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member runs as another account: it exists
        return True
    for proc in Path("/proc").iterdir():  # the group exists: is anyone in it more than a zombie?
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def group_rss_bytes(pgid: int) -> int:
    """The resident memory of every process of the group, added up (what an OOM killer would weigh)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            total += int((proc / "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def privileges(run_as: str | None, env: dict[str, str]) -> dict[str, Any]:
    """The ``Popen`` arguments that start a command as the account ``run_as`` (real and effective uid and
    gid, no supplementary groups of this process, umask 077), with ``env``'s HOME, USER and LOGNAME made
    the account's; {} for None. The account is looked up on this node (KeyError: it has none of that name;
    PermissionError: this host cannot change accounts, not being root)."""
    if run_as is None:
        return {}
    import pwd

    entry = pwd.getpwnam(run_as)
    if entry.pw_uid == 0:
        raise PermissionError(f"{run_as!r} is root: jobs never run with root's privileges")
    if os.geteuid() != 0:
        raise PermissionError(f"the worker host cannot run the job as {run_as!r}: it does not run as root")
    home = entry.pw_dir if os.path.isdir(entry.pw_dir) else env.get("DLSCHED_CHECKPOINT_DIR", "/tmp")
    env.update({"HOME": home, "USER": run_as, "LOGNAME": run_as})
    return {"user": entry.pw_uid, "group": entry.pw_gid, "umask": 0o077}


def header_line(job_id: str, incarnation: int, rank: int, world_size: int, node: str) -> str:
    """The line that opens each incarnation's output in a rank's log."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"==== dlsched job {job_id} incarnation {incarnation} rank {rank}/{world_size} on {node} at {now} ===="
