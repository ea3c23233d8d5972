"""The HTTP API against a real uvicorn server on loopback: tokens, ownership, bad specs, cancel, logs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from apikit import live_api

from dlsched.service.store import Store

pytestmark = pytest.mark.timeout(120)  # a followed log that never ends would hang the run otherwise

SPEC = {"name": "demo", "command": "python train.py", "working_dir": "/tmp", "gpus": 2}


@dataclass
class Service:
    url: str
    store: Store
    jobs_dir: Path
    tokens: dict[str, str]

    def call(self, method: str, path: str, who: str | None = "alice", headers: dict[str, str] | None = None,
             **kwargs: object) -> httpx.Response:
        auth = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, self.url + path, headers={**auth, **(headers or {})}, timeout=10,
                             **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def service(tmp_path: Path, db_url: str) -> Iterator[Service]:
    """The API over a store on each database, with two users of a team and an admin."""
    store = Store(db_url)
    tokens = {name: store.add_user(name, team="vision") for name in ("alice", "bob")}
    tokens["root"] = store.add_user("root", admin=True)
    jobs_dir = tmp_path / "state" / "jobs"
    with live_api(store, jobs_dir, cluster_info=lambda: {"nodes": [{"name": "n0", "gpus": 2}]}) as server:
        yield Service(server.url, store, jobs_dir, tokens)
    store.close()


def test_every_route_but_healthz_needs_a_valid_token(service: Service):
    assert service.call("GET", "/healthz", who=None).json()["status"] == "ok"
    for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", "/v1/jobs/job-1"),
                         ("POST", "/v1/jobs/job-1/cancel"), ("GET", "/v1/jobs/job-1/logs"), ("GET", "/v1/whoami"),
                         ("GET", "/v1/cluster")):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic YTpi"}):
            r = httpx.request(method, service.url + path, headers=headers, json=SPEC, timeout=10)
            assert r.status_code == 401, (method, path, headers, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
    assert service.store.count_jobs() == 0
    assert service.call("GET", "/v1/whoami", who="root").json() == {"name": "root", "team": None, "admin": True}


def test_submit_answers_a_committed_job_with_utc_timestamps(service: Service):
    before = time.time()
    r = service.call("POST", "/v1/jobs", json=SPEC)
    assert r.status_code == 201, r.text
    job = r.json()
    assert (job["id"], job["user"], job["status"], job["spec"]["gpus"]) == ("job-1", "alice", "queued", 2)
    assert job["submitted"].endswith("Z")
    assert datetime.fromisoformat(job["submitted"]).timestamp() >= before - 1
    assert job["started"] is None
    assert service.store.job("job-1").status == "queued"  # in the database before the answer came


def test_users_see_only_their_own_jobs_and_the_admin_sees_all(service: Service):
    a = service.call("POST", "/v1/jobs", json=SPEC).json()["id"]
    b = service.call("POST", "/v1/jobs", who="bob", json={**SPEC, "name": "bobs"}).json()["id"]
    assert [j["id"] for j in service.call("GET", "/v1/jobs").json()] == [a]
    assert [j["id"] for j in service.call("GET", "/v1/jobs", who="bob").json()] == [b]
    assert [j["id"] for j in service.call("GET", "/v1/jobs", who="root").json()] == [a, b]
    for method, path in (("GET", f"/v1/jobs/{b}"), ("POST", f"/v1/jobs/{b}/cancel"), ("GET", f"/v1/jobs/{b}/logs")):
        assert service.call(method, path).status_code == 404
    assert service.store.job(b).status == "queued"  # alice's cancel did not touch it
    assert service.call("GET", f"/v1/jobs/{b}", who="root").json()["user"] == "bob"
    assert service.call("GET", "/v1/jobs/job-404").status_code == 404


def test_a_bad_spec_is_a_422_naming_the_field_and_nothing_is_stored(service: Service):
    for body, field in (({**SPEC, "gpus": 0}, "gpus"), ({**SPEC, "gpu_types": ["v10O"]}, "gpu_types"),
                        ({**SPEC, "colour": 1}, "colour"), ({"name": "x"}, "command"),
                        ({**SPEC, "adaptivity": "per-gpu-batch"}, "batch_size")):
        r = service.call("POST", "/v1/jobs", json=body)
        assert r.status_code == 422, r.text
        assert r.json()["message"].startswith(f"field '{field}': "), r.json()
    r = service.call("POST", "/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"].startswith("the body is not valid JSON")  # as documented
    assert service.store.count_jobs() == 0


def test_cancel_a_queued_job_at_once_and_a_running_one_by_request(service: Service):
    queued = service.call("POST", "/v1/jobs", json=SPEC).json()["id"]
    running = service.call("POST", "/v1/jobs", json=SPEC).json()["id"]
    service.store.update_job(running, status="running", gpus=2, placement={"n0": [0, 1]}, started_s=time.time())
    r = service.call("POST", f"/v1/jobs/{queued}/cancel")
    assert (r.status_code, r.json()["status"], r.json()["finished"] is not None) == (200, "cancelled", True)
    r = service.call("POST", f"/v1/jobs/{running}/cancel")
    assert (r.json()["status"], r.json()["cancel_requested"]) == ("running", True)
    shown = service.call("GET", f"/v1/jobs/{running}").json()
    assert [e["kind"] for e in shown["events"]] == ["submitted", "cancel-requested"]
    assert {"steps_done", "restarts", "failures"} <= set(shown) and shown["queue_entered"] is None  # never profiled
    assert [j["id"] for j in service.call("GET", "/v1/jobs").json()] == [running]
    assert [j["id"] for j in service.call("GET", "/v1/jobs?all=true").json()] == [queued, running]


def test_logs_of_every_rank_under_headers_and_followed_to_the_end(service: Service):
    job = service.call("POST", "/v1/jobs", json=SPEC).json()["id"]
    assert service.call("GET", f"/v1/jobs/{job}/logs").text == ""
    logs = service.jobs_dir / job / "logs"
    logs.mkdir(parents=True)
    (logs / "rank0.log").write_text("r0 line 1\n")
    (logs / "rank1.log").write_text("r1 line 1\n")
    (logs / "rank10.log").write_text("r10 line\n")
    r = service.call("GET", f"/v1/jobs/{job}/logs")
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text == "==> rank0 <==\nr0 line 1\n==> rank1 <==\nr1 line 1\n==> rank10 <==\nr10 line\n"
    assert service.call("GET", f"/v1/jobs/{job}/logs?rank=1").text == "==> rank1 <==\nr1 line 1\n"
    assert service.call("GET", f"/v1/jobs/{job}/logs?rank=-1").status_code == 422
    service.store.update_job(job, status="running")

    def later() -> None:
        time.sleep(1.0)
        with (logs / "rank0.log").open("a") as f:
            f.write("r0 line 2\n")
        time.sleep(0.8)
        service.store.update_job(job, status="succeeded", finished_s=time.time())

    writer = threading.Thread(target=later)
    writer.start()
    chunks = []
    with httpx.stream("GET", f"{service.url}/v1/jobs/{job}/logs", params={"follow": "true", "rank": 0},
                      headers={"Authorization": f"Bearer {service.tokens['alice']}"}, timeout=30) as r:
        for chunk in r.iter_text():
            chunks.append(chunk)
    writer.join()
    assert "".join(chunks) == "==> rank0 <==\nr0 line 1\nr0 line 2\n"


def test_cluster_docs_and_openapi(service: Service):
    assert service.call("GET", "/v1/cluster").json() == {"nodes": [{"name": "n0", "gpus": 2, "holders": [[], []]}]}
    docs = httpx.get(service.url + "/docs", timeout=10)  # the package's own page: nothing from a CDN
    assert "/openapi.json" in docs.text and "cdn" not in docs.text.lower() and "src=" not in docs.text
    schema = httpx.get(service.url + "/openapi.json", timeout=10).json()
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel", "/v1/jobs/{job_id}/logs", "/v1/whoami",
            "/healthz"} <= set(schema["paths"])
    assert schema["components"]["schemas"]["JobSubmission"]["additionalProperties"] is False
