"""Running a real ``dlsched serve`` in tests: start it, wait for it, drive it with the client commands,
kill it, and read what its jobs wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


#: Where the tests' jobs run (their temporary folders, the examples): allowed by every service a test starts
#: unless it names its own ``allow_dirs`` (``()``: the service's defaults, the host's home folders).
TEST_ROOTS = (Path(tempfile.gettempdir()), REPO)


def start_service(state: Path, *extra: str, log: Path | None = None, allow_dirs: Sequence[Path] = TEST_ROOTS,
                  env: dict[str, str] | None = None, user: int | None = None) -> subprocess.Popen[bytes]:
    """``dlsched serve --state STATE ...`` in a process group of its own (so a kill reaches only it), with
    ``--allow-dir`` for each of ``allow_dirs`` (the same every start, so a restart resumes the stored ones),
    in ``env`` (default this process's) and as the uid ``user`` when given."""
    out = (log or state.parent / f"{state.name}-serve.log").open("ab")
    allowed = [arg for d in allow_dirs for arg in ("--allow-dir", str(d))]
    cmd = [sys.executable, "-m", "dlsched", "serve", "--state", str(state), *allowed, *extra]
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                            **({} if user is None else {"user": user, "group": user, "extra_groups": []}))


def wait_for_server(state: Path, proc: subprocess.Popen[bytes], *, since: float = 0.0,
                    timeout_s: float = 180.0) -> dict[str, Any]:
    """``server.json`` once the service that ``proc`` runs wrote it and answers ``/healthz``."""
    import httpx

    path = state / "server.json"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the service exited with {proc.returncode}: {service_log(state)[-3000:]}")
        if path.is_file() and path.stat().st_mtime >= since:
            info = json.loads(path.read_text())
            if info.get("pid") == proc.pid:
                try:
                    if httpx.get(info["url"] + "/healthz", timeout=5.0).status_code == 200:
                        return info
                except httpx.HTTPError:
                    pass
        time.sleep(0.3)
    raise AssertionError(f"the service did not come up in {timeout_s:.0f} s: {service_log(state)[-3000:]}")


def service_log(state: Path) -> str:
    path = state.parent / f"{state.name}-serve.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def stop_service(proc: subprocess.Popen[bytes], *, timeout_s: float = 120.0) -> None:
    """A graceful stop (SIGTERM): jobs checkpoint, the service's own Ray stops."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def kill9(proc: subprocess.Popen[bytes]) -> None:
    """``kill -9`` of the service process alone: what it started (Ray, the workers) lives on."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def client(info: dict[str, Any], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A client command (``dlsched submit``, ``jobs``, ``show``, ...) against the service of ``info``."""
    env = {**os.environ, "DLSCHED_SERVER": info["url"], "DLSCHED_TOKEN": info["token"]}
    done = subprocess.run([sys.executable, "-m", "dlsched", *args], env=env, capture_output=True, text=True,
                          timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"dlsched {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def show(info: dict[str, Any], job_id: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client(info, "show", job_id, "--format", "json").stdout)
    return result


def wait_until(what: str, condition: Callable[[], bool], *, timeout_s: float, every_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def reports(state: Path, job_id: str) -> list[dict[str, Any]]:
    path = state / "jobs" / job_id / "reports.jsonl"
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def check_contiguous(job_reports: list[dict[str, Any]]) -> tuple[int, int]:
    """Assert the job's steps are contiguous from its checkpoints: every incarnation resumes from the last
    checkpoint written before it started (no step past a checkpoint lost), its progress starts at the next
    step and runs without gaps (none done twice after the checkpoint). Returns (incarnations, last step)."""
    checkpoint = 0
    expected_next: int | None = None
    incarnations = 0
    last = 0
    for r in job_reports:
        kind = r["type"]
        if kind == "checkpoint":
            checkpoint = max(checkpoint, int(r["step"]))
        elif kind == "start":
            incarnations += 1
            assert int(r["resumed_step"]) == checkpoint, (
                f"incarnation {r.get('incarnation')} resumed from step {r['resumed_step']}, the last checkpoint "
                f"was {checkpoint}")
            expected_next = checkpoint + 1
        elif kind == "progress":
            assert expected_next is not None, "progress before any start"
            assert int(r["first_step"]) == expected_next, (
                f"incarnation {r.get('incarnation')}: steps jump from {expected_next - 1} to {r['first_step']}")
            expected_next = int(r["last_step"]) + 1
            last = int(r["last_step"])
        elif kind == "done":
            last = int(r["step"])
    return incarnations, last


def kill_workers(job_id: str) -> list[int]:
    """SIGKILL every worker process of ``job_id`` (found by the ``DLSCHED_JOB_ID`` in its environment, as an
    operator would find them); returns their pids."""
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if f"DLSCHED_JOB_ID={job_id}".encode() in environ and b"python" in cmdline and b"/bin/sh" not in cmdline:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
            except ProcessLookupError:
                pass
    return killed
