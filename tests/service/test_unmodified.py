"""Bring your script as it is: a plain DDP script (no import of dlsched) run by the service.

``examples/plain_ddp.py`` reads torchrun's environment and keeps its own snapshots in
``$DLSCHED_CHECKPOINT_DIR``. Run rigid on 2 GPUs under ``fifo``, as ``torchrun --nproc-per-node 2`` under
``fifo``, elastic 1-4 under ``sia`` and elastic under a policy made to resize it every round: it succeeds,
each restart resumes from its own newest snapshot (a stop's snapshot above all), and every rank saw
torchrun's variables, set by the service itself (no second launcher).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")
pytest.importorskip("sqlalchemy")

from cycling import CyclingPolicy
from servicekit import EXAMPLES  # noqa: E402

from dlsched.runtime.executor import RayExecutor  # noqa: E402
from dlsched.service.loop import LoopOptions, RoundLoop  # noqa: E402
from dlsched.service.options import ServeOptions  # noqa: E402
from dlsched.service.server import service_scheduler  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("ray")]

TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID")
RESIZES = [(0,), (2, 3), (4, 5, 6, 7), (1,), (6, 7)]


def _loop(tmp: Path, executor: RayExecutor, make: Callable[[], Any], *,
          min_run_s: float = 8.0) -> tuple[Store, RoundLoop]:
    store = Store.open(tmp)
    store.add_user("alice")
    loop = RoundLoop(store, executor, make, cluster_name="ray-local-4",
                     options=LoopOptions(round_s=1.0, jobs_dir=tmp / "jobs", checkpoint_dir=tmp / "ckpt",
                                         stop_grace_s=60.0, min_run_s=min_run_s, silent_after_s=5.0,
                                         profile_s=4.0))
    return store, loop


def _policy(tmp: Path, name: str) -> Callable[[], Any]:
    options = ServeOptions(state=tmp, policy=name, round_s=1.0)
    return lambda: service_scheduler(options)


def _submit(store: Store, command: str, **fields: Any) -> str:
    sub = JobSubmission.model_validate({"name": "plain", "command": command, "working_dir": str(EXAMPLES),
                                        "max_failures": 1, **fields})
    return store.add_job("alice", sub, time.time()).id


def _finish(loop: RoundLoop, store: Store, job_id: str, *, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ((j := store.job(job_id)) is not None and j.finished):
        assert time.monotonic() < deadline, f"timed out: {store.job(job_id)}"
        loop.run_round()
        time.sleep(0.5)
    job = store.job(job_id)
    assert job is not None and job.status == "succeeded", (job, [e.message for e in store.events(job_id)])


def _check_snapshots(tmp: Path, job_id: str, steps: int) -> list[dict[str, Any]]:
    """Each start resumed from the newest snapshot written before it; a stop's snapshot is resumed exactly;
    the last one is the whole run. Returns the starts."""
    folder = tmp / "ckpt" / job_id
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    newest, starts = 0, []
    for e in events:
        if e["event"] == "snapshot":
            newest = max(newest, e["step"])
        elif e["event"] == "start":
            assert e["resumed"] == newest, f"a start resumed at {e['resumed']}, the newest snapshot was {newest}"
            starts.append(e)
    assert newest == steps
    stops = [e["step"] for e in events if e["event"] == "stopped"]
    resumed = [e["resumed"] for e in starts[1:]]
    assert all(s in resumed for s in stops), (stops, resumed)
    for env_file in folder.glob("env-*.json"):
        seen = json.loads(env_file.read_text())
        assert all(seen.get(k) for k in TORCHRUN_VARS), (env_file.name, seen)
        assert seen["TORCHELASTIC_RUN_ID"] == job_id, "the service set torchrun's variables, not a torchrun"
    return starts


def test_a_rigid_plain_script_and_a_torchrun_command_under_fifo(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor, _policy(tmp_path, "fifo"))
    rigid = _submit(store, "python plain_ddp.py --steps 60", gpus=2)
    torchrun = _submit(store, "torchrun --nproc-per-node 2 plain_ddp.py --steps 60", gpus=2)
    _finish(loop, store, rigid)
    _finish(loop, store, torchrun)
    for job_id in (rigid, torchrun):
        (start,) = _check_snapshots(tmp_path, job_id, 60)
        assert start["world"] == 2
        ranks = {json.loads(p.read_text())["RANK"] for p in (tmp_path / "ckpt" / job_id).glob("env-*.json")}
        assert ranks == {"0", "1"}


def test_an_elastic_plain_script_resized_every_round_resumes_from_its_own_snapshots(tmp_path, ray_executor):
    # a job that reports nothing is pinned min_run_s from its launch (no first step to wait for): longer than
    # its start-up (imports, the process group) on a loaded machine, or every move would land in it
    store, loop = _loop(tmp_path, ray_executor, lambda: CyclingPolicy("resizer", RESIZES), min_run_s=20.0)
    # 60 s of steps against at most ~21 s a placement (min_run_s and a round): three placements or more
    job_id = _submit(store, "python plain_ddp.py --steps 600 --snapshot-every 10 --step-s 0.1",
                     gpus={"min": 1, "max": 4}, adaptivity="elastic")
    _finish(loop, store, job_id)
    starts = _check_snapshots(tmp_path, job_id, 600)
    worlds = [s["world"] for s in starts]
    assert sum(1 for a, b in zip(worlds, worlds[1:], strict=False) if a != b) >= 2, worlds
    kinds = [e.kind for e in store.events(job_id)]
    assert "no-reports" in kinds and "failure" not in kinds


def test_an_elastic_plain_script_under_sia(tmp_path, ray_executor):
    store, loop = _loop(tmp_path, ray_executor, _policy(tmp_path, "sia"))
    job_id = _submit(store, "python plain_ddp.py --steps 150", gpus={"min": 1, "max": 4}, adaptivity="elastic")
    _finish(loop, store, job_id)
    _check_snapshots(tmp_path, job_id, 150)
    said = [r["summary"] for r in store.explanations(job_id, None) if r["stage"] == "admission"]
    assert any("without dlsched.train" in s and "'sia'" in s for s in said), said[:3]
