"""``dlsched report`` of a simulation in a real browser: the same page as the service's, from the file.

Three jobs of two GPUs on two nodes of two GPUs under FIFO: at the round with the longest queue, alpha and
beta run and gamma waits first in line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from browserkit import browser_page, non_blank

pytestmark = pytest.mark.timeout(180)

CLUSTER = "name: two-by-two\nnodes:\n  - {gpu_type: a100, count: 2, gpus_per_node: 2}\n"
TRACE = """jobs:
  - {job_id: alpha, submit_time_s: 0, model: resnet18, num_gpus: 2, duration_s: 1800}
  - {job_id: beta, submit_time_s: 10, model: resnet18, num_gpus: 2, duration_s: 1200}
  - {job_id: gamma, submit_time_s: 20, model: resnet18, num_gpus: 2, duration_s: 600}
"""


def dlsched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlsched", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    (root / "cluster.yaml").write_text(CLUSTER)
    (root / "jobs.yaml").write_text(TRACE)
    done = dlsched("simulate", "--cluster", str(root / "cluster.yaml"), "--trace", str(root / "jobs.yaml"),
                   "--policy", "fifo", "--out", str(root / "run"))
    assert done.returncode == 0, done.stderr
    return root / "run"


def test_the_report_shows_the_cluster_the_queue_and_a_job(run_dir: Path, tmp_path: Path):
    done = dlsched("report", str(run_dir), "--out", str(tmp_path / "dash.html"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "dash.html")
    held = {}
    for line in (run_dir / "allocations.csv").read_text().splitlines()[1:]:
        job, start, end, *_rest, gpus = line.split(",")
        if float(start) <= 60.0 < float(end):
            held[job] = sorted(int(g) for g in gpus.split())
    assert sorted(held) == ["alpha", "beta"]
    nodes = json.loads((run_dir / "cluster.json").read_text())["nodes"]
    slots = [(n["name"], i) for n in nodes for i in range(n["gpus"])]
    with browser_page(tmp_path) as page:
        page.goto((tmp_path / "dash.html").as_uri())
        page.wait_for_selector("#cluster .gpu")
        for job, gpus in held.items():
            cells = page.locator(f'#cluster .gpu[data-jobs~="{job}"]')
            drawn = sorted((cells.nth(i).get_attribute("data-node"), int(cells.nth(i).get_attribute("data-gpu") or -1))
                           for i in range(cells.count()))
            assert drawn == sorted(slots[g] for g in gpus), (job, drawn)
        assert page.locator('#queue tr[data-job="gamma"] .rank').inner_text() == "1"
        assert page.locator("#timeline rect").count() == 3
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        assert non_blank(shot) > 1e-3
        page.click('#queue tr[data-job="gamma"] a')
        page.wait_for_selector('#job[data-job="gamma"]')
        text = page.locator("#explanations").inner_text()
        recorded = run_dir / "explanations.jsonl"  # the run recorded why: the page shows the latest summary
        mine = [json.loads(x) for x in recorded.read_text().splitlines() if x.strip()]
        mine = [r for r in mine if r["job"] == "gamma"]
        assert mine and mine[-1]["summary"] in text
        assert page.locator('#series .chart[data-series="gpus_held"] path').count() == 1


def test_the_report_groups_recorded_explanations_by_round_range(run_dir: Path, tmp_path: Path):
    """Records in the explain format (per job and round) read as one line per stretch of rounds."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    records = []
    for r in range(1, 5):  # two stages each round, as the stages record them
        records.append({"round": r, "time_s": 60.0 * r, "job": "gamma", "stage": "admission", "decided": "admitted",
                        "summary": "admitted: no quota applies", "facts": {}})
        records.append({"round": r, "time_s": 60.0 * r, "job": "gamma", "stage": "ordering", "decided": "waits",
                        "summary": "2nd in the FIFO queue behind beta; no 2 free GPUs", "facts": {"rank": 1}})
    records.append({"round": 18, "time_s": 1080.0, "job": "gamma", "stage": "placement", "decided": "placed",
                    "summary": "placed on node a100-1 a100 x2", "facts": {}})
    (copy / "explanations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    done = dlsched("report", str(copy))
    assert done.returncode == 0, done.stderr
    with browser_page(tmp_path) as page:
        page.goto((copy / "dashboard.html").as_uri() + "#/job/gamma")
        page.wait_for_selector('#job[data-job="gamma"]')
        lines = page.locator("#explanations .explanation").all_inner_texts()
        assert len(lines) == 3, lines
        assert "admission" in lines[0] and "rounds 1-4" in lines[0] and "no quota applies" in lines[0]
        assert "ordering" in lines[1] and "rounds 1-4" in lines[1] and "2nd in the FIFO queue" in lines[1]
        assert "placement" in lines[2] and "round 18" in lines[2] and "a100-1" in lines[2]


def test_report_refuses_a_folder_that_is_not_a_run(tmp_path: Path):
    done = dlsched("report", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "RUN_DIR" in done.stderr and len(done.stderr.splitlines()) == 1
    assert "allocations.csv" in done.stderr


def test_a_packed_gpu_shows_both_jobs_and_text_is_never_markup(tmp_path: Path):
    """The page draws a GPU two jobs share with both of them, and prints names as text, never as HTML."""
    from dlsched.dashboard import page_html

    hostile = "<img src=x onerror=window.pwned=1>"
    snapshot = {"title": "packed", "source": "simulation", "live": False, "time_s": 100.0, "at_s": 50.0,
                "round": 1, "rank_note": "",
                "nodes": [{"name": "n0", "gpu_type": "a40", "gpus": [["j1", "j2"], ["j1"]]}],
                "jobs": [{"id": "j1", "name": hostile, "user": "u", "status": "running", "gpus": 2,
                          "gpu_type": "a40", "gpus_requested": 2, "priority": 1.0, "wait_s": 0.0,
                          "latency_ratio": 1.0, "rank": None, "restarts": 0},
                         {"id": "j2", "name": "b", "user": "u", "status": "running", "gpus": 1, "gpu_type": "a40",
                          "gpus_requested": 1, "priority": 1.0, "wait_s": 0.0, "latency_ratio": 1.0, "rank": None,
                          "restarts": 0}],
                "timeline": {"end_s": 100.0, "segments": []}, "usage": []}
    page_file = tmp_path / "packed.html"
    page_file.write_text(page_html({"snapshot": snapshot, "jobs": {}}))
    with browser_page(tmp_path) as page:
        page.goto(page_file.as_uri())
        page.wait_for_selector("#cluster .gpu")
        packed = page.locator("#cluster .gpu.packed")
        assert packed.count() == 1
        assert packed.get_attribute("data-jobs") == "j1 j2"
        assert packed.inner_text() == "j1+j2"
        assert page.locator('#running tr[data-job="j1"]').inner_text().count(hostile) == 1
        assert page.evaluate("window.pwned === undefined")


def test_report_serve_serves_the_written_page(run_dir: Path, tmp_path: Path):
    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "dlsched", "report", str(run_dir), "--out",
                             str(tmp_path / "d.html"), "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("serving on http://127.0.0.1:"), line
        url = line.split()[2]
        r = httpx.get(url, timeout=10)
        assert r.status_code == 200 and r.text == (tmp_path / "d.html").read_text()
        assert httpx.get(url + "elsewhere", timeout=10).status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=30)
