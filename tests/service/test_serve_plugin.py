"""``dlsched serve --plugin FILE.py --ordering NAME``: one's own stages in the service, as ``dlsched simulate``
takes them. A real ``python -m dlsched serve`` on the dry-run executor (no Ray): the plugin's
earliest-deadline-first ordering decides which of two queued jobs gets the GPUs first; a restart with
``--state`` alone loads the stored plugin again; a plugin that is missing or a stage nobody registered is
one ``error:`` line before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

import httpx  # noqa: E402
from servicekit import REPO, start_service, stop_service, wait_for_server, wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(300)

DRY = ("--executor", "dry-run", "--round-s", "1")
EDF = REPO / "examples" / "stages" / "edf.py"


def _job(tmp: Path, name: str, hold_s: float, **fields: object) -> dict[str, object]:
    """A job of both a100 GPUs of ray-local-4 (one node has them): only one such job runs at a time."""
    return {"name": name, "command": "true", "working_dir": str(tmp), "gpus": 2, "gpu_types": ["a100"],
            "env": {"DLSCHED_DRY_RUN_S": str(hold_s)}, **fields}


def _statuses(info: dict[str, str], ids: dict[str, str]) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {info['token']}"}
    return {name: httpx.get(f"{info['url']}/v1/jobs/{job_id}", headers=headers, timeout=30).json()["status"]
            for name, job_id in ids.items()}


def _first_after_blocker(tmp_path: Path, state: Path, *flags: str) -> tuple[str, dict[str, str]]:
    """Which of ``early`` (no deadline, submitted first) and ``urgent`` (a deadline) runs once the blocker
    ends, under a service started with ``flags``."""
    proc = start_service(state, *DRY, *flags)
    try:
        info = wait_for_server(state, proc)
        headers = {"Authorization": f"Bearer {info['token']}"}
        ids: dict[str, str] = {}

        def submit(name: str, hold: float, **extra: object) -> None:
            r = httpx.post(info["url"] + "/v1/jobs", json=_job(tmp_path, name, hold, **extra), headers=headers,
                           timeout=30)
            assert r.status_code == 201, r.text
            ids[name] = r.json()["id"]

        submit("blocker", 4.0)  # placed before the two arrive (young, it keeps its GPUs until it ends)
        wait_until("the blocker to start", lambda: _statuses(info, ids)["blocker"] == "running", timeout_s=30,
                   every_s=0.2)
        submit("early", 30.0)
        submit("urgent", 30.0, deadline_s=600.0)
        wait_until("the blocker to end", lambda: _statuses(info, ids)["blocker"] == "succeeded", timeout_s=60,
                   every_s=0.5)
        wait_until("one of the two to start", lambda: "running" in _statuses(info, ids).values(), timeout_s=30,
                   every_s=0.5)
        seen = _statuses(info, ids)
        running = [n for n in ("early", "urgent") if seen[n] == "running"]
        assert len(running) == 1, seen  # they need the same two GPUs
        return running[0], seen
    finally:
        stop_service(proc)


def test_a_plugin_ordering_decides_and_a_restart_loads_the_stored_plugin(tmp_path: Path) -> None:
    first, seen = _first_after_blocker(tmp_path, tmp_path / "fifo")
    assert first == "early", seen  # plain FIFO: submission order
    state = tmp_path / "edf"
    first, seen = _first_after_blocker(tmp_path, state, "--plugin", str(EDF), "--ordering", "my-edf")
    assert first == "urgent", seen  # the plugin's earliest deadline first
    stored = json.loads((state / "serve-config.json").read_text())
    assert stored["stages"] == {"ordering": "my-edf"} and stored["plugins"] == [str(EDF.resolve())], stored
    # a restart without the flags builds the same policy: it must import the stored plugin to name my-edf
    proc = start_service(state, *DRY)
    try:
        wait_for_server(state, proc)
    finally:
        stop_service(proc)


def _serve_error(state: Path, *flags: str) -> str:
    done = subprocess.run([sys.executable, "-m", "dlsched", "serve", "--state", str(state), *DRY, *flags],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_missing_plugin_or_an_unregistered_stage_is_one_error_line(tmp_path: Path) -> None:
    line = _serve_error(tmp_path / "a", "--plugin", str(tmp_path / "nowhere.py"), "--ordering", "my-edf")
    assert "nowhere.py" in line and "not found" in line, line
    line = _serve_error(tmp_path / "b", "--ordering", "my-edf")  # registered by no plugin
    assert "my-edf" in line, line
    assert not (tmp_path / "b" / "server.json").exists()
