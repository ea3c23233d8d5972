"""Chaos, bounded: real jobs under ``sia`` (which moves and resizes them) while the service is killed with
``kill -9`` at random moments, five times, and one Ray node with a job on it is killed.

Jobs are submitted through ``dlsched submit`` by a user who keeps submitting while the service is down, so
submissions are retried across kills with their idempotency keys. Afterwards: every acknowledged job
``succeeded``, none is stored twice, and every job's steps are contiguous from its checkpoints (no step lost
past a ``stopped`` report, none done twice past the last checkpoint).
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("ray")
pytest.importorskip("torch")
pytest.importorskip("fastapi")

from servicekit import (  # noqa: E402
    EXAMPLES,
    check_contiguous,
    client,
    kill9,
    reports,
    service_log,
    show,
    start_service,
    stop_service,
    wait_for_server,
    wait_until,
)

from dlsched.runtime.worker_host import free_port  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200), pytest.mark.xdist_group("ray")]

KILLS = 5
JOBS = 4


def _spec(tmp: Path, i: int) -> Path:
    path = tmp / f"job{i}.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"mlp-{i}", "command": "python mlp.py --epochs 6", "working_dir": str(EXAMPLES), "model": "mlp",
        "gpus": {"min": 1, "max": 2}, "adaptivity": "adaptive", "batch_size": 64, "max_batch_size": 256,
        "max_failures": 3, "env": {"DLSCHED_CHECKPOINT_S": "2", "DLSCHED_REPORT_S": "1"}}))
    return path


def _busy_node(info: dict[str, Any], jobs: list[str]) -> str:
    """A node a running job is placed on (waiting for one): its death is a move the test can count on."""
    found: list[str] = []

    def placed() -> bool:  # the running job that has done least: it cannot finish before its node dies
        # a job that has stepped: one still starting (imports, model) when its node dies leaves no report of
        # that incarnation, and its restart would look like a first start
        running = [job for job in (show(info, j) for j in list(jobs))
                   if job["status"] == "running" and job["placement"] and job["steps_done"] > 0]
        if not running:
            return False
        least = min(running, key=lambda job: job["steps_done"])
        found.append(next(iter(least["placement"])))  # node name -> GPUs
        return True

    wait_until("a job running on a node", placed, timeout_s=300, every_s=0.5)
    return found[0]


def test_kill_9_at_random_moments_and_a_lost_node_lose_no_job_and_no_work(tmp_path: Path) -> None:
    from raynodes import RayNodes

    rng = random.Random(7)
    cluster = RayNodes()
    state = tmp_path / "state"
    port = free_port()
    args = ("--address", cluster.address, "--port", str(port), "--round-s", "2")
    proc = None
    acknowledged: list[str] = []
    submit_errors: list[str] = []
    try:
        nodes = {name: cluster.add({f"dlsched_gpus_{gtype}": 2, f"dlsched_node_{name}": 1})
                 for name, gtype in (("n1", "t4"), ("n2", "rtx"), ("n3", "a100"), ("n4", "t4"))}
        proc = start_service(state, *args, "--policy", "sia")
        info = wait_for_server(state, proc)

        def submit_all() -> None:  # a user who submits whether or not the service is up right now
            for i in range(JOBS):
                done = client(info, "submit", str(_spec(tmp_path, i)), check=False)
                if done.returncode == 0:
                    acknowledged.append(done.stdout.strip())
                else:
                    submit_errors.append(done.stderr)
                time.sleep(rng.uniform(1.0, 6.0))

        submitter = threading.Thread(target=submit_all, daemon=True)
        submitter.start()
        for kill in range(KILLS):
            time.sleep(rng.uniform(6.0, 20.0))  # a random moment of the service's life: a round, a stop
            doomed = _busy_node(info, acknowledged) if kill == 2 else None
            kill9(proc)
            if doomed is not None:
                cluster.kill_raylet(nodes[doomed])  # a node with a job on it dies while the service is down
            time.sleep(rng.uniform(0.0, 3.0))
            restarted = time.time()
            proc = start_service(state, *args)  # the stored configuration: sia, as first started
            info = wait_for_server(state, proc, since=restarted)
        submitter.join(timeout=180)
        assert not submitter.is_alive(), "a submission never returned"
        assert not submit_errors, submit_errors
        assert len(acknowledged) == JOBS and len(set(acknowledged)) == JOBS

        def all_succeeded() -> bool:
            states = {j: show(info, j)["status"] for j in acknowledged}
            bad = {j: s for j, s in states.items() if s in ("failed", "cancelled")}
            assert not bad, f"jobs ended badly: {bad}; {service_log(state)[-3000:]}"
            return all(s == "succeeded" for s in states.values())

        wait_until("every acknowledged job succeeded", all_succeeded, timeout_s=900, every_s=3.0)
        listed = json.loads(client(info, "jobs", "--all", "--format", "json").stdout)
        assert sorted(j["id"] for j in listed) == sorted(acknowledged), "a job stored twice, or one lost"
        moved = 0
        for job_id in acknowledged:
            got = reports(state, job_id)
            incarnations, last = check_contiguous(got)
            assert show(info, job_id)["steps_done"] == last
            stopped = {int(r["incarnation"]): int(r["step"]) for r in got if r["type"] == "stopped"}
            starts = {int(r["incarnation"]): int(r["resumed_step"]) for r in got if r["type"] == "start"}
            for k, step in stopped.items():
                if k + 1 in starts:  # an incarnation that stopped cleanly: the next resumed exactly there
                    assert starts[k + 1] == step, f"{job_id}: stopped at {step}, resumed at {starts[k + 1]}"
            moved += max(0, incarnations - 1)
        assert moved >= 1, "no job was moved: the test did not exercise a stop"
    finally:
        if proc is not None:
            stop_service(proc)
        cluster.shutdown()

