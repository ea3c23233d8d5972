"""Admission that says no, jobs that never block others, and failures that fail.

- A real ``dlsched serve`` (dry-run executor, ray-local-4's 8 GPUs: 4 t4, 2 rtx, 2 a100) refuses specs no
  configuration of its cluster can hold, on the API and through ``dlsched submit``, and stores nothing.
- A queued job the cluster as it stands can no longer hold is ``held`` and does not block a 1-GPU job
  behind it under FIFO; it is released when a cluster that can hold it takes over the state.
- A crashing command ends ``failed`` within its ``max_failures`` under ``sia``, ``pollux``, ``hops`` and
  ``fifo`` (under the profiling policies it crashes in its profile runs), with its log; a command that
  cannot start fails at once, without retries.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from servicekit import client, start_service, stop_service, wait_for_server, wait_until

pytest.importorskip("sqlalchemy")

from dlsched.core import Cluster, Node  # noqa: E402
from dlsched.runtime.dry_run import DryRunExecutor  # noqa: E402
from dlsched.runtime.workload import load_cluster  # noqa: E402
from dlsched.service.loop import LoopOptions, RoundLoop  # noqa: E402
from dlsched.service.options import ServeOptions  # noqa: E402
from dlsched.service.server import service_scheduler  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

pytestmark = pytest.mark.timeout(900)

IMPOSSIBLE = [
    ({"gpus": 16}, "gpus", "has at most 4"),
    ({"gpus": 2, "gpu_types": ["v100"]}, "gpu_types", "none of which the cluster"),
    ({"gpus": [16, 32], "adaptivity": "per-gpu-batch", "batch_size": 8}, "gpus", "GPUs of one type"),
    ({"gpus": 4, "gpu_types": ["a100", "rtx"]}, "gpus", "has at most 2"),
]


def _spec(tmp: Path, **fields: object) -> dict[str, object]:
    return {"name": "t", "command": "true", "working_dir": str(tmp), "gpus": 1, **fields}


def test_impossible_jobs_are_refused_at_submit_naming_the_field_and_the_cluster(tmp_path):
    state = tmp_path / "state"
    proc = start_service(state, "--executor", "dry-run", "--round-s", "1")
    try:
        info = wait_for_server(state, proc)
        headers = {"Authorization": f"Bearer {info['token']}"}
        for fields, field, words in IMPOSSIBLE:
            r = httpx.post(info["url"] + "/v1/jobs", json=_spec(tmp_path, **fields), headers=headers, timeout=30)
            assert r.status_code == 422, (fields, r.text)
            message = r.json()["message"]
            assert message.startswith(f"field '{field}'") and words in message, message
            assert "8 GPUs" in message or "4 x t4" in message, message  # what the cluster has
            spec = tmp_path / "job.yaml"
            spec.write_text(json.dumps(_spec(tmp_path, **fields)))
            done = client(info, "submit", str(spec), check=False)
            assert done.returncode == 2 and done.stdout == ""
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and f"field '{field}'" in lines[0], lines
        r = httpx.post(info["url"] + "/v1/jobs", json=_spec(tmp_path, working_dir=str(tmp_path / "gone")),
                       headers=headers, timeout=30)
        assert r.status_code == 422 and r.json()["message"].startswith("field 'working_dir'")
        listed = httpx.get(info["url"] + "/v1/jobs?all=true", headers=headers, timeout=30).json()
        assert listed == [], "a refused submission is never stored"
        ok = httpx.post(info["url"] + "/v1/jobs", json=_spec(tmp_path, gpus=2, gpu_types=["a100"]),
                        headers=headers, timeout=30)
        assert ok.status_code == 201, ok.text
    finally:
        stop_service(proc)


def _loop(tmp: Path, store: Store, cluster: Cluster, policy: str = "fifo") -> RoundLoop:
    options = ServeOptions(state=tmp, policy=policy, round_s=1.0)
    return RoundLoop(store, DryRunExecutor(cluster), lambda: service_scheduler(options), cluster_name=cluster.name,
                     options=LoopOptions(round_s=1.0, jobs_dir=tmp / "jobs", checkpoint_dir=tmp / "ckpt"))


def test_a_job_the_cluster_can_no_longer_hold_is_held_and_blocks_no_one(tmp_path):
    store = Store.open(tmp_path)
    store.add_user("alice")
    big = JobSubmission.model_validate(_spec(tmp_path, gpus=4, gpu_types=["a100"], env={"DLSCHED_DRY_RUN_S": "2"}))
    small = JobSubmission.model_validate(_spec(tmp_path, gpus=1, env={"DLSCHED_DRY_RUN_S": "2"}))
    # accepted when the cluster had two a100 nodes; the state now runs on ray-local-4 (one)
    held = store.add_job("alice", big, time.time()).id
    behind = store.add_job("alice", small, time.time() + 1).id
    loop = _loop(tmp_path, store, load_cluster("ray-local-4"))
    loop.run_round()
    job = store.job(held)
    assert job is not None and job.status == "held" and "has at most 2" in (job.message or "")
    assert (job.reason or "").startswith("Held: ") and "a100" in (job.reason or "")
    after = store.job(behind)
    assert after is not None and after.status == "running", "the held job blocks no one under FIFO"
    _rounds(loop, lambda: (j := store.job(behind)) is not None and j.status == "succeeded")
    # capacity returns: a cluster with four a100s takes over the state; the job is released and runs
    nodes = tuple(Node(i, "a100", 2, name=f"a100-{i}") for i in range(2))
    loop = _loop(tmp_path, store, Cluster("two-a100-nodes", nodes))
    _rounds(loop, lambda: (j := store.job(held)) is not None and j.status == "succeeded")
    kinds = [e.kind for e in store.events(held)]
    assert kinds.index("held") < kinds.index("released") < kinds.index("placed")


def _rounds(loop: RoundLoop, done: Callable[[], bool], timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        loop.run_round()
        time.sleep(0.3)


@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("policy", ["sia", "pollux", "hops", "fifo"])
def test_a_crashing_command_fails_within_max_failures_with_its_log(tmp_path, policy):
    pytest.importorskip("ray")
    state = tmp_path / "state"
    proc = start_service(state, "--policy", policy, "--round-s", "1")
    try:
        info = wait_for_server(state, proc)
        spec = tmp_path / "crash.yaml"
        spec.write_text(json.dumps({**_spec(tmp_path, command="echo going down; exit 7", gpus=1,
                                            max_failures=1, model="mlp")}))
        job_id = client(info, "submit", str(spec)).stdout.strip()
        nowhere = tmp_path / "nowhere.yaml"
        nowhere.write_text(json.dumps(_spec(tmp_path, command="no-such-program-anywhere --x", max_failures=3,
                                            model="mlp")))
        missing = client(info, "submit", str(nowhere)).stdout.strip()

        def shown(j: str) -> dict[str, object]:
            return dict(json.loads(client(info, "show", j, "--format", "json").stdout))

        wait_until("both jobs failed", lambda: all(shown(j)["status"] == "failed" for j in (job_id, missing)),
                   timeout_s=300)
        crashed = shown(job_id)
        assert crashed["failures"] == 2 and "code 7" in str(crashed["message"]), crashed
        assert "going down" in str(crashed["message"])  # the reason quotes the last line it printed
        logs = client(info, "logs", job_id).stdout
        assert logs.count("going down") >= 2, logs
        if policy in ("sia", "hops"):
            assert "==> profile " in logs, "the crash happened in a profile run, shown as such"
        never = shown(missing)
        assert never["failures"] == 0 and "could not start" in str(never["message"]), never
    finally:
        stop_service(proc)
