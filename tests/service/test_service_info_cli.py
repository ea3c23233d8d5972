"""``dlsched whoami`` and ``dlsched cluster`` against a live API server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apikit import live_api
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

runner = CliRunner()
pytestmark = pytest.mark.timeout(120)


def test_whoami_and_the_cluster_table(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "state")
    alice, bob = store.add_user("alice", team="vision"), store.add_user("bob")
    info = {"name": "ray-local-4", "policy": "sia", "round": 7,
            "nodes": [{"name": "n0", "gpu_type": "a100", "gpus": 2}, {"name": "n1", "gpu_type": "t4", "gpus": 2}]}
    job, _ = store.submit_job("alice", JobSubmission(name="j", command="true", working_dir="/", gpus=1), 0.0)
    store.update_job(job.id, status="running", placement={"n0": [1]}, gpus=1)
    try:
        with live_api(store, tmp_path / "jobs", cluster_info=lambda: info) as server:
            def cli(token: str, *args: str):
                return runner.invoke(app, list(args), env={"DLSCHED_SERVER": server.url, "DLSCHED_TOKEN": token})

            assert cli(alice, "whoami").stdout == "alice (team: vision, user)\n"
            assert json.loads(cli(bob, "whoami", "--format", "json").stdout) == {"name": "bob", "team": None,
                                                                                 "admin": False}
            res = cli(alice, "cluster")
            assert res.exit_code == 0, res.stderr
            rows = {line.split()[1]: line for line in res.stdout.splitlines() if line.split()[1:2] in (["n0"], ["n1"])}
            assert "a100" in rows["n0"] and f"1: {job.id}" in rows["n0"] and "1: " not in rows["n1"]
            assert "2 nodes, 4 GPUs, 1 held" in res.stderr
            seen = json.loads(cli(bob, "cluster", "--format", "json").stdout)
            assert seen["policy"] == "sia" and seen["nodes"][0]["holders"] == [[], ["other"]]
            refused = cli("nope", "cluster")
            assert refused.exit_code == 2 and refused.stderr.startswith("error: field 'token'") and "401" in refused.stderr
    finally:
        store.close()
