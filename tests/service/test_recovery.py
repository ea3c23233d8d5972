"""Nothing accepted is lost: ``kill -9`` of the service while its jobs train, and a Ray node killed under a job.

Three jobs go in through the client, as a team would submit them: one of the shipped examples as it is, one
adaptive job and one rigid job on two GPUs. The service is killed with ``kill -9`` while all three run and
started again on the same ``--state``. All three must succeed, each job's steps must be contiguous from its
checkpoints (no step past the last checkpoint lost, none done twice after it), and the database must hold
every round's decision, numbered without a gap across the restart.
"""

from __future__ import annotations

import json
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
    kill_workers,
    reports,
    show,
    start_service,
    stop_service,
    wait_for_server,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.xdist_group("ray")]


def _spec(tmp: Path, name: str, **fields: Any) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"working_dir": str(EXAMPLES), "max_failures": 2, **fields, "name": name}))
    return path


def _submit(info: dict[str, Any], spec: Path) -> str:
    out = json.loads(client(info, "submit", str(spec), "--format", "json").stdout)
    return str(out["id"])


def _all_succeeded(info: dict[str, Any], ids: list[str]) -> bool:
    states = {j: show(info, j)["status"] for j in ids}
    bad = {j: s for j, s in states.items() if s in ("failed", "cancelled")}
    assert not bad, f"jobs ended badly: {bad}"
    return all(s == "succeeded" for s in states.values())


def _running_with_checkpoint(info: dict[str, Any], ids: list[str]) -> bool:
    for j in ids:
        s = show(info, j)
        if s["status"] != "running" or s.get("last_checkpoint_step", 0) <= 0:
            return False
    return True


def test_kill_minus_nine_loses_no_job_and_no_step(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"DLSCHED_CHECKPOINT_S": "2", "DLSCHED_REPORT_S": "1"}
    example = yaml.safe_load((EXAMPLES / "mlp.yaml").read_text())  # the shipped example, run longer
    # the two jobs that must outlive the service run long enough that neither ends before all three run,
    # even on a loaded machine (the resnet at 15 epochs once ended first)
    example["command"] = example["command"].replace("--epochs 3", "--epochs 300")
    specs = [
        _spec(tmp_path, "example-mlp", **{**{k: v for k, v in example.items() if k != "name"},
                                          "working_dir": str(EXAMPLES), "env": env}),
        _spec(tmp_path, "adaptive-resnet", command="python resnet.py --epochs 45", gpus={"min": 1, "max": 2},
              adaptivity="adaptive", batch_size=16, max_batch_size=64, env=env),
        _spec(tmp_path, "rigid-transformer", command="python transformer.py --epochs 20", gpus=2,
              adaptivity="rigid", batch_size=32, env=env),
    ]
    args = ("--cluster", "ray-local-4", "--round-s", "2", "--policy", "fifo")
    proc = start_service(state, *args)
    try:
        info = wait_for_server(state, proc)
        ids = [_submit(info, s) for s in specs]
        wait_until("all three jobs running with a checkpoint", lambda: _running_with_checkpoint(info, ids),
                   timeout_s=600)
        rounds_before = _rounds(state)
        kill9(proc)
        statuses = {j.id: j.status for j in _jobs(state)}
        assert set(statuses.values()) == {"running"}, f"a job ended before the service was killed: {statuses}"
        # while the service is down, the rigid job's workers die too: it must resume from its checkpoint
        killed = kill_workers(ids[2])
        assert killed, "no worker process of the rigid job found"
        restarted = time.time()
        proc = start_service(state, *args)
        info = wait_for_server(state, proc, since=restarted)
        listed = json.loads(client(info, "jobs", "--all", "--format", "json").stdout)
        assert sorted(j["id"] for j in listed) == sorted(ids), "the restarted service lost a job"
        wait_until("all three jobs succeeded", lambda: _all_succeeded(info, ids), timeout_s=900, every_s=2.0)
        for job_id in ids:
            incarnations, last = check_contiguous(reports(state, job_id))
            detail = show(info, job_id)
            assert last > 0 and detail["steps_done"] == last
            kinds = [e["kind"] for e in detail["events"]]
            if job_id == ids[2]:  # restarted from its last checkpoint, once, as a failure
                assert incarnations == 2 and detail["failures"] == 1 and "failure" in kinds, kinds
            else:  # its workers outlived the service and were found again
                assert incarnations == 1 and "reattached" in kinds, (job_id, kinds)
    finally:
        stop_service(proc)
    rounds = _rounds(state)
    assert len(rounds) > len(rounds_before)
    assert [r["round_no"] for r in rounds] == list(range(len(rounds))), "a round's decision is missing"
    assert all(isinstance(r["decision"].get("allocations"), dict) for r in rounds)


def _jobs(state: Path) -> list[Any]:
    from dlsched.service.store import Store

    store = Store.open(state)
    try:
        return store.jobs()
    finally:
        store.close()


def _rounds(state: Path) -> list[dict[str, Any]]:
    from dlsched.service.store import Store

    store = Store.open(state)
    try:
        return store.rounds()
    finally:
        store.close()


def test_a_killed_node_leaves_the_schedule_and_its_job_resumes_elsewhere(tmp_path: Path) -> None:
    from raynodes import RayNodes

    cluster = RayNodes()
    proc = None
    try:
        nodes = {"n1": cluster.add({"dlsched_gpus_t4": 2, "dlsched_node_n1": 1}),
                 "n2": cluster.add({"dlsched_gpus_t4": 2, "dlsched_node_n2": 1})}
        state = tmp_path / "state"
        proc = start_service(state, "--address", cluster.address, "--round-s", "2", "--policy", "fifo")
        info = wait_for_server(state, proc)
        # long enough (about a minute of steps here) that the node dies well before the job could end on it
        spec = _spec(tmp_path, "rigid-transformer", command="python transformer.py --epochs 100", gpus=2,
                     adaptivity="rigid", batch_size=32, env={"DLSCHED_CHECKPOINT_S": "2", "DLSCHED_REPORT_S": "1"})
        job_id = _submit(info, spec)
        wait_until("the job running with a checkpoint", lambda: _running_with_checkpoint(info, [job_id]),
                   timeout_s=600)
        assert show(info, job_id)["status"] == "running", "the job ended before its node could be killed"
        (first,) = show(info, job_id)["placement"]
        cluster.kill_raylet(nodes[first])
        wait_until("the job succeeded", lambda: _all_succeeded(info, [job_id]), timeout_s=900, every_s=2.0)
        detail = show(info, job_id)
        placed = [e["data"]["placement"] for e in detail["events"] if e["kind"] == "placed"]
        assert len(placed) >= 2 and first in placed[0] and first not in placed[-1], placed
        assert any(e["kind"] == "lost" for e in detail["events"])
        assert detail["failures"] == 0, "a lost node is not the job's failure"
        incarnations, last = check_contiguous(reports(state, job_id))
        assert incarnations >= 2 and detail["steps_done"] == last
        import httpx

        seen = httpx.get(info["url"] + "/v1/cluster", headers={"Authorization": f"Bearer {info['token']}"},
                         timeout=10).json()
        assert [n["name"] for n in seen["nodes"]] == [n for n in nodes if n != first]
    finally:
        if proc is not None:
            stop_service(proc)
        cluster.shutdown()
