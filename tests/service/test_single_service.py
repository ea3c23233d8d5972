"""One service per state, its configuration kept as state, idempotent submissions, and a service that says
what it does: real ``python -m dlsched serve`` processes on the dry-run executor (no Ray), on SQLite and
on PostgreSQL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

import httpx  # noqa: E402
from servicekit import client, kill9, start_service, stop_service, wait_for_server, wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(300)

DRY = ("--executor", "dry-run", "--round-s", "1")


def dlsched(*args: str, env: dict[str, str] | None = None, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlsched", *args], capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})})


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def status(state: Path) -> tuple[int, dict[str, Any]]:
    done = dlsched("serve", "status", "--state", str(state), "--format", "json")
    assert done.returncode in (0, 3), done.stderr
    return done.returncode, json.loads(done.stdout)


def states_for(db_url: str, tmp_path: Path) -> tuple[Path, Path, tuple[str, ...]]:
    """Two states that are one service's: the same folder on SQLite; two folders sharing one PostgreSQL
    database (two hosts, say)."""
    if db_url.startswith("sqlite"):
        state = tmp_path / "state"
        return state, state, ()
    return tmp_path / "a", tmp_path / "b", ("--database", db_url)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_second_service_is_refused_and_a_killed_ones_lock_is_taken_over(db_url: str, tmp_path: Path) -> None:
    first_state, second_state, db = states_for(db_url, tmp_path)
    first = start_service(first_state, *DRY, *db)
    try:
        info = wait_for_server(first_state, first)
        before = (first_state / "server.json").read_bytes()
        mtime = (first_state / "server.json").stat().st_mtime_ns
        line = one_error_line(dlsched("serve", "--state", str(second_state), *DRY, *db))
        assert "already runs" in line and f"pid {first.pid}" in line and info["url"] in line, line
        assert (first_state / "server.json").read_bytes() == before
        assert (first_state / "server.json").stat().st_mtime_ns == mtime
        assert second_state == first_state or not (second_state / "server.json").exists()
        code, running = status(first_state)
        assert code == 0 and running["pid"] == first.pid and running["url"] == info["url"], running
        # the first keeps working: it answers and schedules
        assert httpx.get(info["url"] + "/healthz", timeout=10).status_code == 200
        r0 = running["round"]
        wait_until("another round", lambda: (status(first_state)[1]["round"] or 0) > (r0 or 0), timeout_s=30)
        kill9(first)
        code, after = status(first_state)
        assert code == 3 and after["status"] == "stopped" and not after["alive"], after
        assert "stale" in dlsched("serve", "status", "--state", str(first_state)).stdout
        since = time.time()
        second = start_service(second_state, *DRY, *db)
        try:
            again = wait_for_server(second_state, second, since=since)
            assert again["pid"] == second.pid
            assert status(second_state)[0] == 0
        finally:
            stop_service(second)
    finally:
        stop_service(first)


def test_the_configuration_is_kept_and_changed_only_with_reconfigure(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = start_service(state, "--policy", "tiresias", "--set", "tiresias-2dlas.starvation_factor=2", *DRY, "--stop-grace-s",
                         "5", "--min-run-s", "12")
    info = wait_for_server(state, proc)
    stop_service(proc)
    assert proc.returncode in (0, 143), proc.returncode
    assert not (state / "server.json").exists()  # a graceful stop takes it away
    assert status(state)[0] == 3
    stored = json.loads((state / "serve-config.json").read_text())
    assert (stored["policy"], stored["settings"], stored["executor"], stored["round_s"]) == (
        "tiresias", {"tiresias-2dlas.starvation_factor": "2"}, "dry-run", 1.0)
    assert (stored["stop_grace_s"], stored["min_run_s"]) == (5.0, 12.0)

    since = time.time()
    proc = start_service(state)  # no flags at all: tiresias on the dry-run executor again
    try:
        info = wait_for_server(state, proc, since=since)
        cluster = httpx.get(info["url"] + "/v1/cluster", headers={"Authorization": f"Bearer {info['token']}"},
                            timeout=10).json()
        assert cluster["policy"] == "tiresias"
        assert status(state)[1]["policy"] == "tiresias"
    finally:
        stop_service(proc)

    line = one_error_line(dlsched("serve", "--state", str(state), "--policy", "fifo"))
    assert line == ("error: --policy: the state was created with 'tiresias'; pass --reconfigure to change it "
                    "(or leave --policy out to keep it)"), line
    assert "--round-s" in one_error_line(dlsched("serve", "--state", str(state), "--round-s", "2"))
    assert "--set" in one_error_line(dlsched("serve", "--state", str(state), "--set", "tiresias-2dlas.starvation_factor=3"))
    assert json.loads((state / "serve-config.json").read_text()) == stored  # refusals change nothing

    since = time.time()
    proc = start_service(state, "--policy", "fifo", "--reconfigure")
    try:
        info = wait_for_server(state, proc, since=since)
        cluster = httpx.get(info["url"] + "/v1/cluster", headers={"Authorization": f"Bearer {info['token']}"},
                            timeout=10).json()
        assert cluster["policy"] == "fifo"
    finally:
        stop_service(proc)
    assert json.loads((state / "serve-config.json").read_text())["policy"] == "fifo"
    assert status(state)[1]["policy"] == "fifo"
    log = (state / "serve.log").read_text()
    assert "event=reconfigured" in log and "tiresias" in log.split("event=reconfigured")[1].splitlines()[0]
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{state / 'dlsched.db'}")
    with engine.connect() as conn:
        changes = json.loads(conn.execute(sa.text("SELECT value FROM meta WHERE key = 'serve_config_changes'"))
                             .scalar_one())
    engine.dispose()
    assert [c["changes"] for c in changes] == [{"policy": ["tiresias", "fifo"],  # its tunables go with it
                                                "settings": [{"tiresias-2dlas.starvation_factor": "2"}, {}]}]


SPEC = {"name": "demo", "command": "python train.py", "working_dir": "/tmp", "gpus": 1,
        "env": {"DLSCHED_DRY_RUN_S": "1"}}


def test_an_idempotency_key_stores_one_job(db_url: str, tmp_path: Path) -> None:
    state, _, db = states_for(db_url, tmp_path)
    tokens = {u: dlsched("serve", "user", "add", u, "--state", str(state), *db).stdout.strip() for u in ("ann", "bob")}
    proc = start_service(state, *DRY, *db)
    try:
        info = wait_for_server(state, proc)

        def post(user: str, key: str, body: dict[str, Any] = SPEC) -> httpx.Response:
            return httpx.post(info["url"] + "/v1/jobs", json=body, timeout=30,
                              headers={"Authorization": f"Bearer {tokens[user]}", "Idempotency-Key": key})

        first, again = post("ann", "k-1"), post("ann", "k-1")
        assert (first.status_code, again.status_code) == (201, 200), again.text
        assert first.json()["id"] == again.json()["id"]
        other = post("bob", "k-1")
        assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
        changed = post("ann", "k-1", {**SPEC, "gpus": 2})
        assert changed.status_code == 422 and "Idempotency-Key" in changed.json()["detail"]
        assert post("ann", "bad key!").status_code == 422
        assert post("ann", "x" * 129).status_code == 422
        answers: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda: answers.append(post("ann", "raced"))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
        assert len({a.json()["id"] for a in answers}) == 1
        listed = httpx.get(info["url"] + "/v1/jobs", params={"all": "true"}, timeout=10,
                           headers={"Authorization": f"Bearer {info['token']}"}).json()
        assert len(listed) == 3  # k-1 of ann, k-1 of bob, raced
    finally:
        stop_service(proc)


def test_submit_retries_with_its_key_across_a_service_down_and_back(tmp_path: Path) -> None:
    state = tmp_path / "state"
    token = dlsched("serve", "user", "add", "ann", "--state", str(state)).stdout.strip()
    port = free_port()
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({k: v for k, v in SPEC.items() if k != "working_dir"}))
    env = {**os.environ, "DLSCHED_SERVER": f"http://127.0.0.1:{port}", "DLSCHED_TOKEN": token}
    proc = start_service(state, *DRY, "--port", str(port))
    wait_for_server(state, proc)
    kill9(proc)  # down: the submission below finds nothing listening and retries
    submit = subprocess.Popen([sys.executable, "-m", "dlsched", "submit", str(spec), "--format", "json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert submit.poll() is None, submit.communicate()
    since = time.time()
    proc = start_service(state, "--port", str(port))
    try:
        info = wait_for_server(state, proc, since=since)
        out, err = submit.communicate(timeout=90)
        assert submit.returncode == 0, err
        assert "trying again" in err
        job = json.loads(out)
        listed = json.loads(client(info, "jobs", "--all", "--format", "json").stdout)
        assert [j["id"] for j in listed] == [job["id"]]
        # a submission retried after its answer was lost: the key answers with the same job
        again = httpx.post(info["url"] + "/v1/jobs", json=job["spec"], timeout=30,
                           headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "same"})
        twice = httpx.post(info["url"] + "/v1/jobs", json=job["spec"], timeout=30,
                           headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "same"})
        assert (again.status_code, twice.status_code) == (201, 200)
        assert len(json.loads(client(info, "jobs", "--all", "--format", "json").stdout)) == 2
    finally:
        stop_service(proc)
        if submit.poll() is None:
            submit.kill()


def test_server_json_only_while_the_api_listens_and_the_log_says_what_happened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = start_service(state, *DRY)
    try:
        path = state / "server.json"
        deadline = time.monotonic() + 120
        while not path.exists():  # the moment it appears, the API must answer
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        info = json.loads(path.read_text())
        assert info["pid"] == proc.pid
        assert httpx.get(info["url"] + "/healthz", timeout=5).status_code == 200
        spec = tmp_path / "job.yaml"
        spec.write_text(json.dumps({k: v for k, v in SPEC.items() if k != "working_dir"}))
        job_id = json.loads(client(info, "submit", str(spec), "--format", "json").stdout)["id"]
        wait_until("the job to succeed", lambda: json.loads(client(info, "show", job_id, "--format", "json").stdout)
                   ["status"] == "succeeded", timeout_s=60, every_s=0.5)
        forever = tmp_path / "forever.yaml"
        forever.write_text(json.dumps({"name": "forever", "command": "python train.py", "gpus": 1}))
        other = json.loads(client(info, "submit", str(forever), "--format", "json").stdout)["id"]
        wait_until("the second job placed", lambda: json.loads(client(info, "show", other, "--format", "json")
                                                               .stdout)["status"] == "running", timeout_s=60)
        client(info, "cancel", other)
        wait_until("the second job cancelled", lambda: json.loads(client(info, "show", other, "--format", "json")
                                                                  .stdout)["status"] == "cancelled", timeout_s=60)
        code, running = status(state)
        assert code == 0 and running["jobs"] == {"succeeded": 1, "cancelled": 1} and running["url"] == info["url"]
    finally:
        stop_service(proc)
    assert not (state / "server.json").exists()
    assert status(state)[0] == 3
    lines = (state / "serve.log").read_text().splitlines()
    assert all(ln.startswith("time=") and " level=" in ln for ln in lines), lines[:5]
    start = [ln for ln in lines if "event=start " in ln]
    assert len(start) == 1 and "policy=fifo" in start[0] and "executor=dry-run" in start[0]
    assert any("event=listening" in ln and info["url"] in ln for ln in lines)
    kinds = [ln.split(" kind=")[1].split()[0] for ln in lines if "event=transition" in ln and f"job={job_id} " in ln]
    assert kinds == ["submitted", "placed", "succeeded"], kinds
    assert any("event=round" in ln and f"placed={job_id}" in ln and "policy_s=" in ln for ln in lines)
    kinds = [ln.split(" kind=")[1].split()[0] for ln in lines if "event=transition" in ln and f"job={other} " in ln]
    assert kinds == ["submitted", "placed", "cancel-requested", "cancelled"], kinds
    assert lines[-1].split(" event=")[1].startswith("stopped")
    stderr = (tmp_path / "state-serve.log").read_text()  # what start_service captured of stderr
    assert "event=start" in stderr and f"job={job_id}" in stderr


def test_a_service_whose_database_lock_was_taken_stops_and_leaves_the_jobs(db_url: str, tmp_path: Path) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("the advisory lock is PostgreSQL's")
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    from dlsched.service.lock import advisory_key

    state = tmp_path / "state"
    proc = start_service(state, *DRY, "--database", db_url)
    engine = sa.create_engine(db_url, poolclass=NullPool)
    try:
        info = wait_for_server(state, proc)
        job = httpx.post(info["url"] + "/v1/jobs", json={**SPEC, "env": {}}, timeout=30,
                         headers={"Authorization": f"Bearer {info['token']}"}).json()["id"]
        wait_until("the job placed", lambda: json.loads(client(info, "show", job, "--format", "json").stdout)
                   ["status"] == "running", timeout_s=30, every_s=0.5)
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            key = advisory_key(conn.execute(sa.text("SELECT current_schema()")).scalar_one())
            high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
            holder = conn.execute(sa.text("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                                          "classid = :h AND objid = :l AND objsubid = 1"),
                                  {"h": high, "l": low}).scalar_one()
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": holder})  # its connection is cut
            taken = False
            deadline = time.monotonic() + 10
            while not taken and time.monotonic() < deadline:  # another service takes the lock meanwhile
                taken = conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar_one()
                time.sleep(0.05)
            assert taken
            proc.wait(timeout=60)
            assert proc.returncode == 2
            log = (state / "serve.log").read_text()
            assert "event=lock-lost" in log and not (state / "server.json").exists()
            # the job is the other service's now: not stopped or requeued by the one that lost the lock
            status = conn.execute(sa.text("SELECT status FROM jobs WHERE id = :j"), {"j": job}).scalar_one()
            assert status == "running"
    finally:
        stop_service(proc)
        engine.dispose()
