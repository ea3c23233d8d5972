"""The round loop's copy of the active jobs (dlsched.service.active_jobs) never differs from the database.

The loop reads only what changed each round; what it holds must still equal a full read after any sequence
of submissions, cancels (of queued and of running jobs), jobs ending and rounds: a stale row would schedule
a job that was cancelled, or lose one that was submitted. Rounds run over the dry-run executor.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("sqlalchemy")

from dlsched.runtime.dry_run import DryRunExecutor  # noqa: E402
from dlsched.runtime.workload import load_cluster  # noqa: E402
from dlsched.service.loop import LoopOptions, RoundLoop  # noqa: E402
from dlsched.service.options import ServeOptions  # noqa: E402
from dlsched.service.server import service_scheduler  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

Op = tuple[str, int, int]
ops = st.lists(st.one_of(
    st.tuples(st.just("submit"), st.sampled_from([1, 2, 4]), st.sampled_from([0, 3600])),
    st.tuples(st.just("cancel"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("round"), st.just(0), st.just(0))), min_size=1, max_size=25)


def _loop(tmp: Path, policy: str) -> tuple[Store, RoundLoop]:
    store = Store.open(tmp)
    store.add_user("alice", team="vision")
    options = ServeOptions(state=tmp, policy=policy, round_s=1.0)
    loop = RoundLoop(store, DryRunExecutor(load_cluster("ray-local-4"), write_logs=False),
                     lambda: service_scheduler(options), cluster_name="ray-local-4",
                     options=LoopOptions(round_s=1.0, jobs_dir=tmp / "jobs", checkpoint_dir=tmp / "ckpt",
                                         min_run_s=0.0))
    return store, loop


@pytest.mark.parametrize("policy", ["fifo", "tiresias"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=ops)
def test_the_loops_copy_of_the_active_jobs_equals_a_full_read_after_any_sequence(tmp_path_factory, policy: str,
                                                                                  script: list[Op]) -> None:
    store, loop = _loop(tmp_path_factory.mktemp("state"), policy)
    ids: list[str] = []
    try:
        for kind, a, b in script:
            if kind == "submit":
                sub = JobSubmission.model_validate({"name": "t", "command": "true", "working_dir": str(Path.cwd()),
                                                    "gpus": a, "env": {"DLSCHED_DRY_RUN_S": str(b)}})
                ids.append(store.add_job("alice", sub, time.time()).id)
            elif kind == "cancel" and ids:
                store.request_cancel(ids[a % len(ids)], time.time())
            else:
                loop.run_round()
                assert loop.active.current() == {j.id: j for j in store.active_jobs()}
        loop.run_round()
        assert loop.active.current() == {j.id: j for j in store.active_jobs()}
        # every submitted job is accounted for: active in the copy, or finished in the database
        finished = {j.id for j in store.jobs() if j.status in ("succeeded", "cancelled", "failed", "timeout")}
        assert set(ids) == set(loop.active.current()) | finished
    finally:
        store.close()
