"""Service load: 1,000 jobs submitted in one minute to a running ``dlsched serve``, none lost, and a round
with 1,000 queued jobs.

The service runs as it would for a team (its own process, SQLite under a fresh ``--state``, the HTTP API on
loopback) with the dry-run executor, which starts no processes: every job holds its GPUs for
``DLSCHED_DRY_RUN_S`` seconds and ends, so the figures measure the service (API, database, round loop,
scheduler), not training. Submissions are spread evenly over ``--seconds`` by ``--clients`` concurrent
clients; each submission's latency is the time to a committed answer. Afterwards every accepted id must be
listed by the service (``lost`` counts those that are not); ``round_s_at_queued`` is the longest wall time of
a round that saw at least ``--jobs`` minus the cluster's GPUs jobs waiting, read from the rounds the service
recorded (jobs hold their GPUs for an hour, so the queue only grows while they arrive).

Prints one JSON object per line per measurement: ``submitted``, ``accepted``, ``lost``, ``p50_submit_s``,
``p99_submit_s``, ``round_s_at_queued`` (with the round's queue length). Targets (issue 24): 0 lost, p99
under 0.1 s, a round with 1,000 queued jobs under 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np


def start_service(state: Path, round_s: float) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "dlsched", "serve", "--state", str(state), "--executor", "dry-run",
           "--round-s", f"{round_s:g}", "--policy", "fifo"]
    # stderr to a file, not a pipe: the service logs a line a round, and a pipe nobody reads fills and blocks it
    err = (state.parent / f"{state.name}-serve.log").open("ab")
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)


def wait_for_server(state: Path, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    path = state / "server.json"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = state.parent / f"{state.name}-serve.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise SystemExit(f"error: the service exited: {tail}")
        if path.is_file():
            info = json.loads(path.read_text())
            try:
                if httpx.get(info["url"] + "/healthz", timeout=2.0).status_code == 200:
                    return info
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    raise SystemExit("error: the service did not come up")


def submit_all(url: str, token: str, jobs: int, seconds: float, clients: int) -> tuple[list[float], list[str]]:
    """Submit ``jobs`` jobs evenly over ``seconds``; returns the latencies and the accepted ids."""
    latencies: list[float] = []
    ids: list[str] = []
    lock = threading.Lock()
    start = time.monotonic()
    spec = {"name": "load", "command": "true", "working_dir": tempfile.gettempdir(), "gpus": 1,
            "env": {"DLSCHED_DRY_RUN_S": "3600"}}  # nobody finishes: the queue only grows

    def client(k: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0) as http:
            for i in range(k, jobs, clients):
                due = start + seconds * i / jobs
                time.sleep(max(0.0, due - time.monotonic()))
                t0 = time.perf_counter()
                r = http.post("/v1/jobs", json={**spec, "name": f"load-{i}"})
                dt = time.perf_counter() - t0
                with lock:
                    latencies.append(dt)
                    if r.status_code == 201:
                        ids.append(r.json()["id"])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return latencies, ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--round-s", type=float, default=5.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlsched-load-") as tmp:
        state = Path(tmp) / "state"
        proc = start_service(state, args.round_s)
        try:
            info = wait_for_server(state, proc)
            latencies, ids = submit_all(info["url"], info["token"], args.jobs, args.seconds, args.clients)
            time.sleep(2 * args.round_s)  # rounds over the full queue
            listed = httpx.get(info["url"] + "/v1/jobs", params={"all": "true"},
                               headers={"Authorization": f"Bearer {info['token']}"}, timeout=60.0).json()
            known = {j["id"] for j in listed}
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
        from dlsched.service.store import Store

        store = Store.open(state)
        rounds = store.rounds()
        store.close()
    lat = np.array(latencies)
    print(json.dumps({"measurement": "submit", "submitted": args.jobs, "accepted": len(ids),
                      "lost": len(set(ids) - known), "p50_submit_s": float(np.percentile(lat, 50)),
                      "p99_submit_s": float(np.percentile(lat, 99)), "seconds": args.seconds,
                      "clients": args.clients}))
    busy = [r for r in rounds if r["summary"].get("queued", 0) >= args.jobs - r["summary"].get("gpus", 0)]
    worst = max(busy, key=lambda r: r["summary"].get("round_s", 0.0)) if busy else None
    print(json.dumps({"measurement": "round", "round_s_at_queued": None if worst is None
                      else float(worst["summary"]["round_s"]),
                      "queued": None if worst is None else int(worst["summary"]["queued"]),
                      "policy_s": None if worst is None else float(worst["summary"]["policy_s"]),
                      "rounds_seen": len(rounds)}))


if __name__ == "__main__":
    main()
