"""A job's log folder is untrusted: what a hostile job plants there is never followed, never blocks the API,
and a large log is streamed, not read whole.

The job's folder is written here as the job would write it (the job runs as the service's account until
jobs get accounts of their own, so these are the files such a job can plant); the API is the real app
under uvicorn.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from apikit import live_api
from latency import assert_prompt

from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

pytestmark = pytest.mark.timeout(120)

SECRET = '{"url": "http://x", "token": "the-admin-token"}'


@pytest.fixture
def planted(tmp_path: Path):
    state = tmp_path / "state"
    store = Store.open(state)
    token = store.add_user("bob")
    (state / "server.json").write_text(SECRET)
    sub = JobSubmission.model_validate({"name": "h", "command": "true", "working_dir": "/tmp", "gpus": 16})
    job = store.add_job("bob", sub, time.time())
    logs = state / "jobs" / job.id / "logs"
    logs.mkdir(parents=True)
    (logs / "rank0.log").write_text("".join(f"line {i}\n" for i in range(1, 10_001)))
    (logs / "rank7.log").symlink_to(state / "server.json")
    (logs / "rank8.log").symlink_to(state / "dlsched.db")
    os.mkfifo(logs / "rank9.log")
    profile = state / "jobs" / job.id / "profiles" / "a100"
    profile.mkdir(parents=True)
    (profile / "logs").symlink_to(state)  # a whole folder planted as a link
    with live_api(store, state / "jobs") as server:
        yield server.url, {"Authorization": f"Bearer {token}"}, job.id
    store.close()


def test_planted_links_and_fifos_answer_an_error_at_once_and_leak_nothing(planted):
    url, headers, job_id = planted
    took: list[float] = []
    for rank in (7, 8, 9):
        t0 = time.monotonic()
        r = httpx.get(f"{url}/v1/jobs/{job_id}/logs", params={"rank": rank}, headers=headers, timeout=5)
        took.append(time.monotonic() - t0)
        assert r.status_code == 409, (rank, r.status_code, r.text)
        assert "the-admin-token" not in r.text and "SQLite" not in r.text
        assert r.json()["detail"]
    assert_prompt(took, "the planted names' errors")
    whole = httpx.get(f"{url}/v1/jobs/{job_id}/logs", headers=headers, timeout=10)
    assert whole.status_code == 200
    assert "the-admin-token" not in whole.text and "SQLite format" not in whole.text
    assert "==> rank7 <==\n(not shown: logs/rank7.log cannot be read: a symbolic link)" in whole.text
    assert "==> rank9 <==\n(not shown: logs/rank9.log is not a regular file)" in whole.text
    assert whole.text.count("\nline ") == 10_000 and "==> profile" not in whole.text


def test_a_fifo_blocks_no_other_request(planted):
    url, headers, job_id = planted
    errors: list[int] = []

    def hammer() -> None:
        for _ in range(15):
            r = httpx.get(f"{url}/v1/jobs/{job_id}/logs", params={"rank": 9}, headers=headers, timeout=5)
            errors.append(r.status_code)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    took: list[float] = []
    for _ in range(10):
        t0 = time.monotonic()
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        took.append(time.monotonic() - t0)
    assert_prompt(took, "/healthz beside 45 requests for a FIFO")
    for t in threads:
        t.join(timeout=30)
    assert errors == [409] * 45


def test_tail_and_byte_ranges(planted):
    url, headers, job_id = planted
    r = httpx.get(f"{url}/v1/jobs/{job_id}/logs", params={"rank": 0, "tail": 3}, headers=headers, timeout=5)
    assert r.text == "==> rank0 <==\nline 9998\nline 9999\nline 10000\n"
    r = httpx.get(f"{url}/v1/jobs/{job_id}/logs", params={"rank": 0, "offset": 7, "limit": 14}, headers=headers,
                  timeout=5)
    assert r.text == "line 2\nline 3\n"
    r = httpx.get(f"{url}/v1/jobs/{job_id}/logs", params={"offset": 7}, headers=headers, timeout=5)
    assert r.status_code == 422


def test_bodies_are_bounded_and_an_unknown_token_is_refused_before_the_body_is_read(planted):
    url, headers, _job_id = planted
    big = b"x" * (2 * 1024 * 1024)
    t0 = time.monotonic()
    r = httpx.post(f"{url}/v1/jobs", content=big, headers={"Content-Type": "application/json"}, timeout=10)
    assert_prompt([time.monotonic() - t0], "the 413 of a 2 MiB body")
    assert r.status_code == 413 and r.json()["error"]
    r = httpx.post(f"{url}/v1/jobs", content=b'{"name": 1}', headers={"Authorization": "Bearer nope",
                                                                       "Content-Type": "application/json"}, timeout=5)
    assert r.status_code == 401 and r.json()["error"] == "missing or invalid token"

    def chunks():
        for _ in range(40):
            yield b"y" * 65536

    r = httpx.post(f"{url}/v1/jobs", content=chunks(), headers={**headers, "Content-Type": "application/json"},
                   timeout=10)
    assert r.status_code == 413, r.text
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200


def test_requests_per_token_are_bounded(tmp_path: Path):
    from apikit import LiveServer

    from dlsched.service.api import create_app

    store = Store.open(tmp_path / "state")
    alice, bob = store.add_user("alice"), store.add_user("bob")
    with LiveServer(create_app(store, jobs_dir=tmp_path / "jobs", rate_per_s=5.0)) as server:
        codes = [httpx.get(f"{server.url}/v1/whoami", headers={"Authorization": f"Bearer {alice}"},
                           timeout=5) for _ in range(30)]
        limited = [r for r in codes if r.status_code == 429]
        assert limited and int(limited[0].headers["retry-after"]) >= 1 and limited[0].json()["error"]
        assert all(r.status_code in (200, 429) for r in codes)
        # another user is not held back by alice's loop
        assert httpx.get(f"{server.url}/v1/whoami", headers={"Authorization": f"Bearer {bob}"},
                         timeout=5).status_code == 200
    store.close()


def test_a_rank_the_job_never_has_is_a_404(planted):
    url, headers, job_id = planted
    r = httpx.get(f"{url}/v1/jobs/{job_id}/logs", params={"rank": 16}, headers=headers, timeout=5)
    assert r.status_code == 404 and r.json()["field"] == "rank" and "at most 16 ranks" in r.json()["error"]
