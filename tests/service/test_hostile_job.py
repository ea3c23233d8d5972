"""A hostile job on a shared service: a real ``dlsched serve`` on ``ray-local-4``, run as root, its two users
mapped to OS accounts of their own. User B's job (tests/service/jobs/hostile.py) tries to read the
service's secrets, the database and user A's job folder and checkpoints, plants a link and a FIFO among its
logs, writes 1 GiB of output and leaves a process behind that escaped its group and session.

It gets none of them; A's job succeeds; the logs route answers the planted names with an error within a
second; ``/healthz`` answers within a second throughout (all but one in fifty samples, none over 3 s: see
tests/service/latency.py); the log cap holds; the orphan is gone when the job ends.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

pytest.importorskip("ray")
pytest.importorskip("torch")

from isolationkit import NO_SUITE_ISOLATION, os_account, passable_tmp, require_root  # noqa: E402
from latency import assert_prompt  # noqa: E402
from servicekit import (  # noqa: E402
    EXAMPLES,
    client,
    service_log,
    show,
    start_service,
    stop_service,
    wait_for_server,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("ray")]

JOBS = Path(__file__).resolve().parent / "jobs"
LOG_CAP_MB = 8


def _spec(folder: Path, name: str, command: str, working_dir: Path, env: dict[str, str]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "command": command, "working_dir": str(working_dir),
                                    "model": "mlp", "gpus": 1, "adaptivity": "rigid", "batch_size": 64,
                                    "env": env}))
    return path


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def test_a_hostile_job_reaches_nothing_and_blocks_no_one() -> None:
    require_root()
    alice, bob = os_account("dlsched-t-alice"), os_account("dlsched-t-bob")
    with passable_tmp() as base:
        state = base / "state"
        tokens = {}
        for name, account in (("alice", alice), ("bob", bob)):
            tokens[name] = client({"url": "http://127.0.0.1:1", "token": ""}, "serve", "user", "add", name,
                                  "--os-user", account.name, "--state", str(state)).stdout.strip()
        proc = start_service(state, "--round-s", "2", "--isolation", "accounts", "--max-log-mb", str(LOG_CAP_MB),
                             "--min-run-s", "0", env=NO_SUITE_ISOLATION, allow_dirs=(EXAMPLES, JOBS))
        slow: list[float] = []
        failures: list[str] = []
        stop = threading.Event()
        watcher: threading.Thread | None = None
        try:
            info = wait_for_server(state, proc)
            health = httpx.get(info["url"] + "/healthz", timeout=5).json()
            assert health["isolation"] == "accounts", health

            def watch() -> None:  # /healthz answers within a second, whatever the hostile job does
                while not stop.wait(0.25):
                    t0 = time.monotonic()
                    try:
                        if httpx.get(info["url"] + "/healthz", timeout=3.0).status_code != 200:
                            failures.append("status")
                    except httpx.HTTPError as exc:
                        failures.append(repr(exc))
                    slow.append(time.monotonic() - t0)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            as_alice: dict[str, Any] = {**info, "token": tokens["alice"]}
            as_bob: dict[str, Any] = {**info, "token": tokens["bob"]}
            victim = client(as_alice, "submit", str(_spec(base, "victim", "python mlp.py --epochs 3", EXAMPLES,
                                                          {"DLSCHED_CHECKPOINT_S": "1"}))).stdout.strip()
            wait_until("the victim's first checkpoint", lambda: show(as_alice, victim)["last_checkpoint_step"] > 0
                       or show(as_alice, victim)["status"] == "succeeded", timeout_s=300)
            hostile = client(as_bob, "submit", str(_spec(base, "hostile", "python hostile.py", JOBS,
                                                         {"VICTIM": victim, "LOG_MB": "1024"}))).stdout.strip()

            def ended(job_id: str, who: dict[str, Any]) -> bool:
                return show(who, job_id)["status"] in ("succeeded", "failed", "cancelled")

            wait_until("both jobs ended", lambda: ended(victim, as_alice) and ended(hostile, as_bob), timeout_s=600)
            assert show(as_alice, victim)["status"] == "succeeded", service_log(state)[-3000:]
            assert show(as_bob, hostile)["status"] == "succeeded", show(as_bob, hostile)

            ckpt = state / "checkpoints" / hostile
            got = json.loads((ckpt / "result.json").read_text())
            assert got.pop("uid") == str(bob.uid) and got.pop("gid") == str(bob.gid)
            assert "groups" in got and str(alice.gid) not in got.pop("groups")
            assert got.pop("own reports").startswith("GOT")  # its own reports file is its to write
            reached = {k: v for k, v in got.items() if not v.startswith("denied")}
            assert not reached, reached  # secrets, database, the victim's folders, planting: all refused

            planted: list[float] = []
            for rank in (7, 9):  # what it tried to plant: an error at once, for its own user and for others
                for who in (as_bob, as_alice):
                    t0 = time.monotonic()
                    r = httpx.get(f"{info['url']}/v1/jobs/{hostile}/logs", params={"rank": rank},
                                  headers={"Authorization": f"Bearer {who['token']}"}, timeout=5)
                    planted.append(time.monotonic() - t0)
                    assert r.status_code >= 400, (rank, r.status_code, r.text)
                    assert "token" not in r.text
            assert_prompt(planted, "the planted names' errors")
            log_dir = state / "jobs" / hostile / "logs"
            sizes = {p.name: p.stat().st_size for p in log_dir.iterdir()}
            assert sum(sizes.values()) <= LOG_CAP_MB << 20, sizes  # 1 GiB written, the cap held
            current = (log_dir / "rank0.log").read_text(errors="replace")
            assert "log rotated" in current and "bytes before that were dropped" in current
            assert "hostile job done" in client(as_bob, "logs", hostile, "--tail", "5").stdout

            orphan = int((ckpt / "orphan.pid").read_text())
            wait_until("the orphan is gone", lambda: not _alive(orphan), timeout_s=30, every_s=0.5)
        finally:
            stop.set()
            if watcher is not None:
                watcher.join(timeout=10)  # its last request answered before the service stops
            stop_service(proc)
        assert not failures, failures
        assert_prompt(slow, "/healthz while the hostile job ran")
