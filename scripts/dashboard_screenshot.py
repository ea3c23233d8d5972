"""Take docs/dashboard.png: a dry-run ``dlsched serve`` on two nodes of two A100s and two of two T4s under
FIFO, two users of one team with a quota, five jobs (four run, one waits), shown in Debian's Chromium.

    python scripts/dashboard_screenshot.py [--out docs/dashboard.png]

Needs playwright and /usr/bin/chromium, as the tests in tests/web do.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "web")]

from browserkit import browser_page  # noqa: E402

from dlsched.service.store import Store  # noqa: E402
from service.servicekit import service_log, start_service, stop_service, wait_for_server  # noqa: E402

CLUSTER = """name: demo-8
nodes:
  - {gpu_type: a100, count: 2, gpus_per_node: 2}
  - {gpu_type: t4, count: 2, gpus_per_node: 2}
"""
JOBS = [("alice", "resnet50", 2, 1.0), ("bob", "bert-base", 2, 2.0), ("alice", "gpt2-small", 2, 1.0),
        ("bob", "dcgan", 2, 1.0), ("alice", "vit-b16", 4, 3.0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "cluster.yaml").write_text(CLUSTER)
        state = root / "state"
        store = Store.open(state)
        tokens = {name: store.add_user(name, team="vision") for name in ("alice", "bob")}
        store.set_quota("team", "vision", 6)
        store.set_quota("user", "alice", 4)
        store.set_quota("user", "bob", 2)
        store.close()
        proc = start_service(state, "--executor", "dry-run", "--cluster", str(root / "cluster.yaml"),
                             "--policy", "fifo", "--round-s", "2")
        try:
            info = wait_for_server(state, proc)
            for user, name, gpus, priority in JOBS:
                r = httpx.post(info["url"] + "/v1/jobs", headers={"Authorization": f"Bearer {tokens[user]}"},
                               json={"name": name, "command": "python train.py", "working_dir": "/tmp",
                                     "gpus": gpus, "priority": priority, "env": {"DLSCHED_DRY_RUN_S": "600"}},
                               timeout=10)
                r.raise_for_status()
                time.sleep(2.5)  # a round apart, so the timeline shows them arriving
            time.sleep(6)
            with browser_page(root) as page:
                page.goto(f"{info['url']}/?token={info['token']}")
                page.wait_for_selector("#queue tr[data-job]")
                time.sleep(1)
                page.screenshot(path=str(args.out), full_page=True)
        finally:
            stop_service(proc)
            sys.stderr.write(service_log(state)[-3000:])
    print(args.out)


if __name__ == "__main__":
    main()
