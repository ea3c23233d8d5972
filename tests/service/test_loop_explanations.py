"""Explanations as a service stores them, round by round (the dry-run executor on ray-local-4, 8 GPUs; five
2-GPU jobs, so the fifth waits): a record per change of decision, not per round; a restart closes what was
open and opens the current decisions again; retention deletes what closed long ago, never a current record;
on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.runtime.dry_run import DryRunExecutor  # noqa: E402
from dlsched.runtime.workload import load_cluster  # noqa: E402
from dlsched.service.loop import LoopOptions, RoundLoop  # noqa: E402
from dlsched.service.options import ServeOptions  # noqa: E402
from dlsched.service.server import service_scheduler  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _loop(store: Store, tmp: Path, executor: DryRunExecutor, keep: int | None = None) -> RoundLoop:
    options = ServeOptions(state=tmp, policy="fifo", round_s=1.0)
    loop = RoundLoop(store, executor, lambda: service_scheduler(options), cluster_name="ray-local-4",  # type: ignore[arg-type]
                     options=LoopOptions(round_s=1.0, jobs_dir=tmp / "jobs", checkpoint_dir=tmp / "ckpt",
                                         min_run_s=0.0, explain_keep_rounds=keep))
    loop.recover()
    return loop


def _spans(store: Store, job: str) -> list[tuple[str, str, int, int]]:
    return [(r["stage"], r["decided"], r["round"], r["last_round"]) for r in store.explanations(job)]


def test_the_service_stores_a_record_per_change_and_a_restart_closes_what_was_open(tmp_path: Path,
                                                                                    db_url: str) -> None:
    store = Store.open(tmp_path / "state", database=db_url)
    store.add_user("alice")
    sub = JobSubmission.model_validate({"name": "t", "command": "true", "working_dir": str(tmp_path), "gpus": 2,
                                        "env": {"DLSCHED_DRY_RUN_S": "3600"}})
    ids = [store.add_job("alice", sub, time.time() + i).id for i in range(5)]
    executor = DryRunExecutor(load_cluster("ray-local-4"), write_logs=False)
    loop = _loop(store, tmp_path / "state", executor)
    for _ in range(6):
        loop.run_round()
    waiting = ids[4]
    # six rounds, one record per stage: the decisions never changed
    assert _spans(store, waiting) == [("admission", "admitted", 0, 5), ("ordering", "rank 5", 0, 5),
                                      ("allocation", "none", 0, 5)]
    job = store.job(waiting)
    # its reason read from the current records: next in the queue, the GPUs taken
    assert job is not None and job.reason == "Resources" and "behind the gang cut" in (job.reason_detail or "")
    assert store.explanations(waiting, 3) == store.explanations(waiting)
    running = _spans(store, ids[0])
    assert ("placement", "placed", 0, 0) in running and ("placement", "kept", 1, 5) in running

    # a restart (a fresh recorder): the open records close at round 5, the same decisions open at round 6;
    # retention of 2 rounds then deletes what closed before round 8 - 2
    loop = _loop(store, tmp_path / "state", executor, keep=2)
    for _ in range(3):
        loop.run_round()
    got = _spans(store, waiting)
    assert ("ordering", "rank 5", 0, 5) not in got
    assert ("ordering", "rank 5", 6, 8) in got and ("allocation", "none", 6, 8) in got
    loop.run_round()
    loop.run_round()
    assert _spans(store, waiting) == [("admission", "admitted", 6, 10), ("ordering", "rank 5", 6, 10),
                                      ("allocation", "none", 6, 10)]
    store.close()


class _FailsOnce(Store):
    """A store whose commit of one round fails (a database that went away for a moment)."""

    fail_round: int | None = None

    def commit_round(self, round_no, *args, **kwargs):  # type: ignore[no-untyped-def]
        if round_no == self.fail_round:
            self.fail_round = None
            raise RuntimeError("the database went away")
        super().commit_round(round_no, *args, **kwargs)


def test_a_round_whose_commit_failed_loses_no_record(tmp_path: Path, db_url: str) -> None:
    store = _FailsOnce.open(tmp_path / "state", database=db_url)
    store.add_user("alice")
    sub = JobSubmission.model_validate({"name": "t", "command": "true", "working_dir": str(tmp_path), "gpus": 2,
                                        "env": {"DLSCHED_DRY_RUN_S": "3600"}})
    ids = [store.add_job("alice", sub, time.time() + i).id for i in range(5)]
    loop = _loop(store, tmp_path / "state", DryRunExecutor(load_cluster("ray-local-4"), write_logs=False))
    store.fail_round = 0  # the first round's records (every job's first) never reach the database
    with pytest.raises(RuntimeError):
        loop.run_round()
    for _ in range(3):
        loop.run_round()
    assert _spans(store, ids[4]) == [("admission", "admitted", 0, 2), ("ordering", "rank 5", 0, 2),
                                     ("allocation", "none", 0, 2)]
    store.close()
