"""``dlsched serve status``: whether a service holds a state, where it listens, and what its database says.

A service is running when a live process holds the state's lock and its ``server.json`` names that
process (it is written only once the API listens). A stale ``server.json`` left by a ``kill -9`` names a
dead pid and no lock holder, so the status says "not running" where a check for the file alone would pass.
The database part (policy, last round, jobs by status) is read without changing anything, and is left out
when the state has no database yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dlsched.service import config
from dlsched.service.lock import LOCK_FILE, file_lock_held, pid_alive, read_holder


def service_status(state: Path, database: str | None = None) -> dict[str, Any]:
    """The status as JSON values: ``running``, ``status`` (running, starting, stopped, none), ``pid``,
    ``url``, ``alive``, ``policy``, ``round``, ``jobs`` (count by status) and a line saying it all."""
    state = state.expanduser().resolve()
    info: dict[str, Any] = {"state": str(state), "running": False, "status": "none", "pid": None, "url": None,
                            "alive": False, "policy": None, "round": None, "jobs": None}
    if not state.is_dir():
        info["state_text"] = f"no service state at {state}"
        return info
    held = file_lock_held(state / LOCK_FILE)
    holder = read_holder(state / LOCK_FILE) if held else {}
    server = _server_file(state)
    pid = holder.get("pid") if held else server.get("pid")
    info["pid"] = pid
    info["alive"] = bool(held and pid_alive(pid))
    listening = info["alive"] and server.get("pid") == pid
    info["url"] = server.get("url") if listening or not held else holder.get("url")
    if info["alive"]:
        info["status"] = "running" if listening else "starting"
    else:
        info["status"] = "stopped"
    info["running"] = info["status"] == "running"
    _database_part(state, database, info)
    text = {"running": f"a service runs on {state}",
            "starting": f"a service is starting on {state} (its API does not listen yet)",
            "stopped": f"no service runs on {state}"}[info["status"]]
    if info["status"] == "stopped" and server:
        text += f" (server.json is stale: pid {server.get('pid')} is gone)"
    info["state_text"] = text
    return info


def _server_file(state: Path) -> dict[str, Any]:
    try:
        data = json.loads((state / "server.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if k != "token"} if isinstance(data, dict) else {}


def _database_part(state: Path, database: str | None, info: dict[str, Any]) -> None:
    """Policy, last round and jobs by status from the database, when it exists."""
    from dlsched.service.store import Store

    if database is None:
        stored = config.read_file(state) or {}
        database = stored.get("database") if isinstance(stored.get("database"), str) else None
    if database is None and not (state / "dlsched.db").is_file():
        return
    store = Store.open(state, database)
    try:
        configured = config.stored_config(store, state) or {}
        info["policy"] = configured.get("policy")
        info["round"] = store.last_round_no()
        counts: dict[str, int] = {}
        for job in store.jobs():
            counts[job.status] = counts.get(job.status, 0) + 1
        info["jobs"] = counts
    finally:
        store.close()
