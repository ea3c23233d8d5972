"""``/docs`` in a real browser: the API reference is drawn from ``/openapi.json`` by the package's own script,
and the page asks nothing of any other host (FastAPI's Swagger UI loads its scripts from a CDN, and a cluster
without internet showed a blank page)."""

from __future__ import annotations

from pathlib import Path

import pytest
from browserkit import browser_page, non_blank

from service.apikit import live_api

pytestmark = pytest.mark.timeout(180)


def test_docs_draws_the_schema_with_nothing_from_elsewhere(tmp_path: Path):
    from dlsched.service.store import Store

    store = Store.open(tmp_path / "state")
    try:
        with live_api(store, tmp_path / "state" / "jobs") as server, browser_page(tmp_path) as page:
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            failed: list[str] = []
            page.on("console", lambda msg: failed.append(msg.text) if msg.type == "error" else None)
            page.goto(f"{server.url}/docs")
            logs = page.locator("summary", has_text="/v1/jobs/{job_id}/logs")
            logs.wait_for()
            logs.click()
            page.get_by_text("Only the last N lines of each log.").wait_for()
            assert page.locator("h2", has_text="jobs").count() == 1
            assert page.locator("details#schema-JobSubmission").count() == 1
            shot = tmp_path / "docs.png"
            page.screenshot(path=str(shot), full_page=True)
            assert non_blank(shot) > 0
            assert requested and all(url.startswith(server.url) for url in requested), requested
            assert f"{server.url}/openapi.json" in requested
            assert not failed, failed
    finally:
        store.close()
