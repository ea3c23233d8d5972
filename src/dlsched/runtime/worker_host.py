"""The host of one rank: a Ray actor that starts the user's command as a child process and watches it.

The command runs with ``/bin/sh -c`` in a session of its own (so a signal reaches the shell and whatever
it started: a SIGTERM to the process group is what a terminal's Ctrl-C or ``torchrun`` would send). Two
guards make sure the training never outlives its host, whether the host is killed by the executor, by Ray
or with its whole node:

- the shell gets ``PR_SET_PDEATHSIG`` = SIGKILL, so the kernel kills it the moment the host's thread that
  started it ends (actor methods run on the worker's main thread, so that is the host process's death);
- a tiny watchdog process holds the read end of a pipe whose only write end the host holds. When the host
  dies the pipe reads end-of-file and the watchdog SIGKILLs the command's whole process group, which
  catches the grandchildren a shell forks (these do not inherit the parent-death signal). The watchdog is
  forked away from the host, as Ray kills a dying worker's direct children.

Nothing here imports Ray: the class becomes an actor in :mod:`dlsched.runtime.executor`.
"""

from __future__ import annotations

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

    def __init__(self, job_id: str, incarnation: int, rank: int, node: str) -> None:
        self.job_id, self.incarnation, self.rank, self.node = job_id, incarnation, rank, node
        self.proc: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None
        self.started_at = time.time()

    def address(self) -> tuple[str, int]:
        """This node's IP and a port free on it now, where rank 0 hosts the process group."""
        import ray

        return ray.util.get_node_ip_address(), free_port()

    def start(self, command: str, working_dir: str, env: dict[str, str], log: str, header: str) -> int | None:
        """Start the command with ``env`` added to this process's environment, its output appended to
        ``log`` after ``header``. Returns the child's pid; None when it could not start (the reason is in
        the log and the rank reads as exited with 127, as a shell reports a command it cannot run)."""
        path = Path(log)
        path.parent.mkdir(parents=True, exist_ok=True)
        child_env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        child_env.update(env)
        with path.open("ab") as out:
            out.write(header.encode() + b"\n")
            out.flush()
            try:
                self.proc = subprocess.Popen(
                    ["/bin/sh", "-c", command], cwd=working_dir, env=child_env, stdin=subprocess.DEVNULL,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=_die_with_parent(os.getpid()))
            except OSError as exc:
                out.write(f"error: cannot start the command: {exc}\n".encode())
                self.exit_code = 127
                return None
        self.watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(self.proc.pid)],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
        self.watchdog.wait()  # the launcher forks the watchdog off and leaves at once
        return self.proc.pid

    def status(self) -> dict[str, Any]:
        """Whether the command still runs, and its exit status once it ended."""
        if self.proc is not None and self.exit_code is None:
            code = self.proc.poll()
            if code is not None:
                self.exit_code = exit_status(code)
                self._cleanup()
        return {"rank": self.rank, "node": self.node, "incarnation": self.incarnation,
                "pid": None if self.proc is None else self.proc.pid,
                "running": self.proc is not None and self.exit_code is None, "exit_code": self.exit_code}

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the command's process group (the shell and everything it started)."""
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
        if self.watchdog is not None and self.watchdog.stdin is not None:
            try:
                self.watchdog.stdin.write(b"x")
                self.watchdog.stdin.close()
            except OSError:
                pass
            self.watchdog = None


def header_line(job_id: str, incarnation: int, rank: int, world_size: int, node: str) -> str:
    """The line that opens each incarnation's output in a rank's log."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"==== dlsched job {job_id} incarnation {incarnation} rank {rank}/{world_size} on {node} at {now} ===="
