"""``GET /v1/jobs`` a page at a time: a cursor that walks every job once in submission order, filters by
status, user and submission time, and the limits of each; the Python client follows the pages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from apikit import live_api

from dlsched.client import Client
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

pytestmark = pytest.mark.timeout(120)

SUB = JobSubmission.model_validate({"name": "p", "command": "true", "working_dir": "/tmp", "gpus": 1})


@pytest.fixture
def paged(tmp_path: Path, db_url: str) -> Iterator[tuple[str, dict[str, str], Store, list[str], float]]:
    store = Store(db_url)
    tokens = {n: store.add_user(n) for n in ("alice", "bob")}
    tokens["root"] = store.add_user("root", admin=True)
    t0 = float(int(time.time()) - 1000)  # whole seconds: `since` goes through ISO 8601's microseconds
    ids = [store.add_job("alice" if i % 3 else "bob", SUB, t0 + i).id for i in range(250)]
    for job_id in ids[:40]:
        store.update_job(job_id, status="succeeded", finished_s=t0 + 500)
    with live_api(store, tmp_path / "jobs") as server:
        yield server.url, tokens, store, ids, t0
    store.close()


def _get(url: str, token: str, **params: Any) -> httpx.Response:
    return httpx.get(url + "/v1/jobs", params=params, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def test_the_cursor_walks_every_job_once_in_order(paged) -> None:
    url, tokens, _store, ids, _t0 = paged
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        r = _get(url, tokens["root"], all="true", limit=100, **({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200
        seen += [j["id"] for j in r.json()]
        pages += 1
        cursor = r.headers.get("x-next-cursor")
        if cursor is None:
            assert "link" not in r.headers
            break
        assert r.headers["link"].endswith('rel="next"') and f"cursor={cursor}" in r.headers["link"]
    assert seen == ids and pages == 3
    client = Client(url, tokens["root"])
    assert [j.id for j in client.jobs(all=True)] == ids  # the client follows the pages itself


def test_filters_by_status_user_and_time(paged) -> None:
    url, tokens, _store, ids, t0 = paged
    done = _get(url, tokens["root"], status="succeeded").json()
    assert [j["id"] for j in done] == ids[:40]
    both = _get(url, tokens["root"], status=["succeeded", "queued"]).json()
    assert len(both) == 250
    bobs = _get(url, tokens["root"], all="true", user="bob").json()
    assert bobs and all(j["user"] == "bob" for j in bobs) and len(bobs) == len(range(0, 250, 3))
    since = datetime.fromtimestamp(t0 + 200, UTC).isoformat()
    late = _get(url, tokens["root"], all="true", since=since).json()
    assert [j["id"] for j in late] == ids[200:]
    mine = _get(url, tokens["alice"], all="true").json()
    assert mine and {j["user"] for j in mine} == {"alice"}
    assert [j.id for j in Client(url, tokens["alice"]).jobs(status=["queued"], since=since)] == \
        [i for k, i in enumerate(ids) if k >= 200 and k % 3]


@pytest.mark.parametrize(("params", "status", "field"), [
    ({"status": "sleeping"}, 422, "status"), ({"limit": 0}, 422, "limit"), ({"limit": 1001}, 422, "limit"),
    ({"cursor": "x1"}, 422, "cursor"), ({"since": "yesterday"}, 422, "since"), ({"user": "bob"}, 403, "user"),
])
def test_bad_filters_are_one_json_error_naming_the_field(paged, params: dict[str, Any], status: int,
                                                         field: str) -> None:
    url, tokens, *_ = paged
    r = _get(url, tokens["alice"], **params)
    assert r.status_code == status and r.json()["field"] == field, r.text
