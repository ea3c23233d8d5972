"""The dashboard's "What if" view: the service's own history replayed under other policies, on demand.

An admin asks from the page; the service starts :mod:`dlsched.service.whatif_job` as a process of its own
(one at a time: a second ask while one runs is refused), and the page polls its progress and, at the end,
shows the table beside the measured row with the fidelity line, and the JCT CDFs. The runs live in
``STATE/whatif/<id>/`` (the last few are kept). Only admins may start or read them: the replay covers every
user's jobs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query

from dlsched.service.api import User

#: Runs kept in STATE/whatif (older ones are removed when a new one starts).
KEEP_RUNS = 5
_POLICIES = re.compile(r"^[A-Za-z0-9@:_.+-]{1,64}(,[A-Za-z0-9@:_.+-]{1,64}){0,11}$")


class WhatIfRuns:
    """The what-ifs of one service: at most one running, each in its own folder."""

    def __init__(self, state: Path, *, server_url: str | None = None, admin_token: str | None = None,
                 sqlite: bool = True, plugins: Sequence[Path] = ()) -> None:
        self.folder = state / "whatif"
        self.state, self.server_url, self.admin_token, self.sqlite = state, server_url, admin_token, sqlite
        #: the service's --plugin files: the replay of its own policy names their stages
        self.plugins = [str(p) for p in plugins]
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._current: str | None = None

    def start(self, policies: str, seeds: int) -> dict[str, Any]:
        """Start a what-if; HTTPException 409 while one runs."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                raise HTTPException(409, f"what-if {self._current} is still running")
            self.folder.mkdir(parents=True, exist_ok=True)
            os.chmod(self.folder, 0o700)
            run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid() % 1000:03d}"
            out = self.folder / run_id
            out.mkdir()
            where = ["--state", str(self.state)] if self.sqlite else ["--server", str(self.server_url)]
            env = {**os.environ, **({"DLSCHED_TOKEN": self.admin_token} if self.admin_token else {})}
            with (out / "log.txt").open("wb") as log:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "dlsched.service.whatif_job", str(out), *where, "--policies", policies,
                     "--seeds", str(seeds), *(a for p in self.plugins for a in ("--plugin", p))], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=env, start_new_session=True)
            self._current = run_id
            for old in sorted(p for p in self.folder.iterdir() if p.is_dir())[:-KEEP_RUNS]:
                shutil.rmtree(old, ignore_errors=True)
            return {"id": run_id, "status": "running", "policies": policies, "seeds": seeds}

    def status(self, run_id: str | None = None) -> dict[str, Any]:
        """A run's state (the latest when no id): running with its phase, done with its tables, or failed."""
        runs = sorted(p.name for p in self.folder.iterdir() if p.is_dir()) if self.folder.is_dir() else []
        run_id = run_id or (runs[-1] if runs else None)
        if run_id is None or run_id not in runs:
            return {"id": None, "status": "none"}
        out = self.folder / run_id
        progress = _read(out / "progress.json") or {}
        if (out / "result.json").is_file():
            return {"id": run_id, "status": "done", "progress": progress, "result": _read(out / "result.json")}
        if (out / "error.json").is_file():
            return {"id": run_id, "status": "failed", "progress": progress,
                    "error": (_read(out / "error.json") or {}).get("error", "failed")}
        alive = run_id == self._current and self._proc is not None and self._proc.poll() is None
        if not alive:
            return {"id": run_id, "status": "failed", "progress": progress,
                    "error": "the what-if process ended without a result (see its log.txt)"}
        return {"id": run_id, "status": "running", "progress": progress}

    def close(self) -> None:
        """Stop a what-if still running (the service is stopping)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _admin(user: Any) -> None:
    if not user.admin:
        raise HTTPException(403, "the what-if view is for admins: it replays every user's jobs")


def add_whatif_routes(app: FastAPI, runs: WhatIfRuns) -> None:
    """``POST /ui/v1/whatif`` starts one, ``GET /ui/v1/whatif`` reads the latest (admins only)."""

    @app.post("/ui/v1/whatif", include_in_schema=False, status_code=202)
    def start_whatif(user: User,
                     policies: Annotated[str, Query(min_length=1, max_length=800)] = "fifo,sia",
                     seeds: Annotated[int, Query(ge=1, le=10)] = 1) -> dict[str, Any]:
        _admin(user)
        if not _POLICIES.match(policies):
            raise HTTPException(422, "policies: a comma-separated list of policy names")
        return runs.start(policies, seeds)

    @app.get("/ui/v1/whatif", include_in_schema=False)
    def read_whatif(user: User, id: Annotated[str | None, Query(max_length=40,  # noqa: A002
                                                               pattern=r"^[0-9T-]+$")] = None) -> dict[str, Any]:
        _admin(user)
        return runs.status(id)
