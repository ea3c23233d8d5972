"""A hostile job, run by tests/service/test_hostile_job.py as user B: it tries everything a job of a
shared cluster should not be able to do and writes what it got to ``$DLSCHED_CHECKPOINT_DIR/result.json``.

It reads the service's secrets and the database, lists and reads user A's job folder and checkpoints
(``VICTIM``), plants a link to ``server.json`` and a FIFO among its own logs, writes ``LOG_MB`` of output,
and leaves a process behind that escaped its process group and session (its pid in ``orphan.pid``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

job_dir = Path(os.environ["DLSCHED_JOB_DIR"])
ckpt = Path(os.environ["DLSCHED_CHECKPOINT_DIR"])
state = job_dir.parents[1]
victim = os.environ["VICTIM"]
got: dict[str, str] = {"uid": str(os.getuid()), "gid": str(os.getgid()), "groups": str(os.getgroups())}


def attempt(name: str, action) -> None:  # type: ignore[no-untyped-def]
    try:
        out = action()
        got[name] = f"GOT {str(out)[:80]!r}"
    except OSError as exc:
        got[name] = f"denied: {type(exc).__name__}"


attempt("server.json", lambda: (state / "server.json").read_text())
attempt("admin.token", lambda: (state / "admin.token").read_text())
attempt("dlsched.db", lambda: (state / "dlsched.db").read_bytes()[:16])
attempt("serve-config.json", lambda: (state / "serve-config.json").read_text())
attempt("list state", lambda: sorted(os.listdir(state)))
attempt("list jobs", lambda: sorted(os.listdir(state / "jobs")))
attempt("victim reports", lambda: (state / "jobs" / victim / "reports.jsonl").read_text())
attempt("victim logs", lambda: sorted(os.listdir(state / "jobs" / victim / "logs")))
attempt("victim log", lambda: (state / "jobs" / victim / "logs" / "rank0.log").read_text())
attempt("victim checkpoints", lambda: sorted(os.listdir(ckpt.parent / victim)))
attempt("victim control", lambda: (state / "jobs" / victim / "control.json").read_text())
attempt("plant link", lambda: os.symlink(state / "server.json", job_dir / "logs" / "rank7.log"))
attempt("plant fifo", lambda: os.mkfifo(job_dir / "logs" / "rank9.log"))
attempt("replace logs", lambda: os.rename(job_dir / "logs", job_dir / "logs.old"))
attempt("own reports", lambda: (job_dir / "reports.jsonl").stat().st_size)

pid = os.fork()
if pid == 0:  # the child leaves the group and the session, forks again and lives on
    os.setsid()
    if os.fork():
        os._exit(0)
    (ckpt / "orphan.pid").write_text(str(os.getpid()))
    for fd in (0, 1, 2):
        os.close(fd)
    time.sleep(3600)
    os._exit(0)
os.waitpid(pid, 0)

chunk = (b"x" * 1023 + b"\n") * 1024
for _ in range(int(os.environ.get("LOG_MB", "64"))):
    sys.stdout.buffer.write(chunk)
sys.stdout.flush()
(ckpt / "result.json").write_text(json.dumps(got))
print("hostile job done", flush=True)
