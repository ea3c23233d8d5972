"""The dashboard's "What if" view in a real browser: an admin runs a what-if of the service's own finished
jobs on demand; it runs in a process of its own, its progress shows, then the table (the measured row, each
policy's row, the fidelity line) and the JCT CDFs. A user who is not an admin may neither start nor read one.

A real ``dlsched serve`` with the dry-run executor (jobs that hold their GPUs for a while and report
nothing: they are replayed for the time they ran, and marked so).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from browserkit import browser_page

from service.servicekit import client, start_service, stop_service, wait_for_server, wait_until

pytestmark = pytest.mark.timeout(300)


def test_an_admin_runs_a_whatif_from_the_dashboard(tmp_path: Path):
    state = tmp_path / "state"
    proc = start_service(state, "--executor", "dry-run", "--policy", "fifo", "--round-s", "1")
    try:
        info = wait_for_server(state, proc)
        admin = {"Authorization": f"Bearer {info['token']}"}
        ids = []
        for i, (gpus, hold) in enumerate([(2, "3"), (4, "5"), (2, "4"), (4, "3"), (1, "2")]):
            spec = {"name": f"job{i}", "command": "true", "working_dir": str(tmp_path), "gpus": gpus,
                    "env": {"DLSCHED_DRY_RUN_S": hold}}
            r = httpx.post(info["url"] + "/v1/jobs", json=spec, headers=admin, timeout=10)
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        wait_until("the jobs finished", lambda: all(
            httpx.get(f"{info['url']}/v1/jobs/{j}", headers=admin, timeout=10).json()["status"] == "succeeded"
            for j in ids), timeout_s=120, every_s=1.0)
        user_token = client(info, "serve", "user", "add", "bob", "--state", str(state)).stdout.strip()
        bob = {"Authorization": f"Bearer {user_token}"}
        assert httpx.post(info["url"] + "/ui/v1/whatif", headers=bob, timeout=10).status_code == 403
        assert httpx.get(info["url"] + "/ui/v1/whatif", headers=bob, timeout=10).status_code == 403
        with browser_page(tmp_path) as page:
            page.goto(f"{info['url']}/?token={info['token']}#/whatif")
            page.wait_for_selector("#whatif-form")
            page.fill("#whatif-form input[name=policies]", "fifo,sia")
            page.click("#whatif-form button[type=submit]")
            page.wait_for_selector("#whatif-table", timeout=240_000)
            rows = page.locator("#whatif-table tbody tr")
            names = [rows.nth(i).get_attribute("data-row") for i in range(rows.count())]
            assert names[0] == "measured" and any(n and n.startswith("fifo") for n in names) \
                and any(n and n.startswith("sia") for n in names), names
            assert page.locator("#fidelity").count() == 1
            assert page.locator('#jct-cdf path[data-row="measured"]').count() == 1
            assert page.locator("#jct-cdf path").count() >= 3
        done = httpx.get(info["url"] + "/ui/v1/whatif", headers=admin, timeout=10).json()
        assert done["status"] == "done" and len(done["result"]["jcts"]["measured"]) == len(ids)
    finally:
        stop_service(proc)
