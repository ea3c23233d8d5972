"""The dashboard of a live ``dlsched serve`` in a real browser, and its ``/metrics``.

Three jobs of two GPUs on two nodes of two GPUs (the dry-run executor, FIFO): two run, one waits. The
cluster view must draw each running job on exactly the GPUs the API says it holds, the queue the waiting
job with its rank, the job page its explanations; the page must refresh itself without a reload.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from browserkit import browser_page, non_blank
from prometheus_client.parser import text_string_to_metric_families

from service.servicekit import start_service, stop_service, wait_for_server, wait_until

pytestmark = pytest.mark.timeout(180)

CLUSTER = "name: two-by-two\nnodes:\n  - {gpu_type: a100, count: 2, gpus_per_node: 2}\n"


@dataclass
class Live:
    url: str
    token: str

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {self.token}"}, timeout=10, **kw)

    def submit(self, name: str, priority: float = 1.0) -> str:
        spec = {"name": name, "command": "true", "working_dir": "/tmp", "gpus": 2, "priority": priority,
                "env": {"DLSCHED_DRY_RUN_S": "900"}}
        r = httpx.post(self.url + "/v1/jobs", json=spec, headers={"Authorization": f"Bearer {self.token}"},
                       timeout=10)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def jobs(self) -> dict[str, dict[str, Any]]:
        return {j["id"]: j for j in self.get("/v1/jobs").json()}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("dashboard")
    (root / "cluster.yaml").write_text(CLUSTER)
    state = root / "state"
    proc = start_service(state, "--executor", "dry-run", "--cluster", str(root / "cluster.yaml"),
                         "--policy", "fifo", "--round-s", "1")
    try:
        info = wait_for_server(state, proc)
        service = Live(info["url"], info["token"])
        for name, priority in (("train-a", 1.0), ("train-b", 2.0), ("train-c", 5.0)):
            service.submit(name, priority)
        wait_until("two jobs running and one queued", lambda: sorted(j["status"] for j in service.jobs().values())
                   == ["queued", "running", "running"], timeout_s=60, every_s=0.5)
        yield service
    finally:
        stop_service(proc)


def test_the_dashboard_shows_the_cluster_the_queue_and_a_job(live: Live, tmp_path: Path):
    jobs = live.jobs()
    running = {k: j for k, j in jobs.items() if j["status"] == "running"}
    (waiting,) = [k for k, j in jobs.items() if j["status"] == "queued"]
    explain = live.get(f"/v1/jobs/{waiting}/explain")
    with browser_page(tmp_path) as page:
        page.goto(f"{live.url}/?token={live.token}")
        page.wait_for_selector("#cluster .gpu")
        assert "token=" not in page.url  # handed over once, then out of the address bar
        for job_id, job in running.items():  # each running job on exactly its GPUs
            cells = page.locator(f'#cluster .gpu[data-jobs~="{job_id}"]')
            drawn = sorted((cells.nth(i).get_attribute("data-node"), int(cells.nth(i).get_attribute("data-gpu") or -1))
                           for i in range(cells.count()))
            held = sorted((node, g) for node, gpus in job["placement"].items() for g in gpus)
            assert drawn == held and len(held) == 2, (job_id, drawn, held)
        assert page.locator('#cluster .gpu[data-jobs=""]').count() == 0  # four GPUs, all held
        row = page.locator(f'#queue tr[data-job="{waiting}"]')
        assert row.locator(".rank").inner_text() == "1"
        assert "5.00" in row.inner_text()  # its priority
        assert page.locator('#running tr[data-job]').count() == 2
        assert page.locator("#timeline rect").count() >= 2

        page.evaluate("window.notReloaded = true")  # a new job shows up by polling, not by a reload
        fourth = live.submit("train-d")
        page.wait_for_selector(f'#queue tr[data-job="{fourth}"]', timeout=15_000)
        assert page.locator(f'#queue tr[data-job="{fourth}"] .rank').inner_text() == "2"
        assert page.evaluate("window.notReloaded") is True

        shot = tmp_path / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        assert non_blank(shot) > 1e-3

        page.click(f'#queue tr[data-job="{waiting}"] a')
        page.wait_for_selector(f'#job[data-job="{waiting}"]')
        page.wait_for_selector("#explanations")
        text = page.locator("#explanations").inner_text()
        assert explain.status_code == 200 and explain.json(), explain.text  # the service records why
        latest = explain.json()[-1]
        assert latest["stage"] in text and latest["summary"] in text, text
        assert "priority" in page.locator("#job").inner_text()
        job_shot = tmp_path / "job.png"
        page.screenshot(path=str(job_shot), full_page=True)
        assert non_blank(job_shot) > 1e-3


def test_the_page_asks_for_a_token_and_the_data_needs_one(live: Live, tmp_path: Path):
    assert httpx.get(live.url + "/ui/v1/snapshot", timeout=10).status_code == 401
    assert httpx.get(live.url + "/ui/v1/jobs/job-1", timeout=10).status_code == 401
    assert httpx.get(live.url + "/", timeout=10).status_code == 200
    with browser_page(tmp_path) as page:
        page.goto(live.url + "/")
        page.wait_for_selector("#login input")
        page.fill("#login input", live.token)
        page.click("#login button")
        page.wait_for_selector("#cluster .gpu")


def _metrics(live: Live) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(live.url + "/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def test_metrics_count_jobs_gpus_queue_and_rounds(live: Live):
    jobs = live.jobs()
    queued = sum(1 for j in jobs.values() if j["status"] == "queued")
    # the queue length is the last round's: a job queued since then is counted from the next round on
    wait_until("a round that saw the queue", lambda: _metrics(live)[("dlsched_queue_length", ())] == queued,
               timeout_s=30, every_s=0.5)
    samples = _metrics(live)
    assert samples[("dlsched_jobs", (("status", "running"),))] == 2
    assert samples[("dlsched_jobs", (("status", "queued"),))] == queued
    assert samples[("dlsched_gpus_allocated", (("gpu_type", "a100"),))] == 4
    assert samples[("dlsched_gpus_allocated_total", ())] == 4
    assert samples[("dlsched_gpus", ())] == 4
    assert samples[("dlsched_queue_length", ())] == queued
    assert samples[("dlsched_job_restarts_total", ())] == 0
    assert samples[("dlsched_rounds_total", ())] >= 2
    assert 0 < samples[("dlsched_policy_seconds", ())] <= samples[("dlsched_round_seconds", ())] < 10
