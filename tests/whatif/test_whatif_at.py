"""``dlsched whatif --at T`` on a history written through the Store API (no Ray): the replay starts from the
cluster's state at T (running jobs on the GPUs the service's round gave them, with the work their reports
say they had done; queued ones waiting; finished ones left out), and a T outside the history is one
``error:`` line. The simulator's ``initial_state`` input is checked like a decision."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.core import InputError  # noqa: E402
from dlsched.replay.whatif import whatif  # noqa: E402
from dlsched.service.records import ConsumedReports  # noqa: E402
from dlsched.service.spec import JobSubmission  # noqa: E402
from dlsched.service.store import Store  # noqa: E402
from dlsched.sim.config import RunConfig  # noqa: E402
from dlsched.sim.run import simulate  # noqa: E402

T0 = 1_700_000_000.0
AT = T0 + 10.0
#: ray-local-4's nodes in name order (as the replay numbers GPUs): a100-3 0-1, rtx-2 2-3, t4-0 4-5, t4-1 6-7.
GLOBAL = {"a100-3": 0, "rtx-2": 2, "t4-0": 4, "t4-1": 6}


def _job(store: Store, name: str, submit: float, placed: float, finish: float, node: str, gpus: list[int],
         *, reports: bool = True) -> str:
    spec: dict = {"name": name, "command": f"python {name}.py", "working_dir": "/tmp", "gpus": len(gpus)}
    if reports:
        spec.update(model="mlp", batch_size=64)
    job = store.add_job("alice", JobSubmission.model_validate(spec), T0 + submit)
    gtype = node.split("-")[0]
    store.update_job(job.id, status="running", started_s=T0 + placed, gpus=len(gpus), gpu_type=gtype,
                     incarnation=1)
    store.add_event(job.id, "placed", "placed", {"placement": {node: gpus}, "incarnation": 1}, now_s=T0 + placed)
    if reports:  # 100 steps of 64 samples every 2 s, from 3 s after the placement to the finish
        consumed = ConsumedReports()
        lines: list[dict] = [{"type": "start", "incarnation": 1, "time": T0 + placed + 2.0, "resumed_step": 0,
                              "world_size": len(gpus)}]
        k = 0
        while placed + 3.0 + 2 * k <= finish - 1.0:
            lines.append({"type": "progress", "incarnation": 1, "time": T0 + placed + 3.0 + 2 * k,
                          "first_step": 100 * k + 1, "last_step": 100 * (k + 1), "samples_seen": 6400 * (k + 1),
                          "batch_size": 64, "local_bsz": 64 // len(gpus), "world_size": len(gpus),
                          "step_time_s": 0.02, "grad_sqr": 0.5, "grad_var": 2.0, "gpu_type": gtype})
            k += 1
        consumed.add_reports(job.id, lines, 100)
        store.commit_changes(T0 + placed, {}, [], consumed)
    store.update_job(job.id, status="succeeded", finished_s=T0 + finish)
    store.add_event(job.id, "succeeded", "finished", now_s=T0 + finish)
    return job.id


def _state(tmp: Path) -> tuple[Path, dict[str, str]]:
    """job-1 on t4-0 GPU 1 and job-2 on rtx-2 at T; job-3 (no reports) finished before T; job-4 submitted
    before T, placed after it. Rounds every 2 s record the service's decisions."""
    state = tmp / "state"
    store = Store.open(state)
    store.add_user("alice")
    store.meta_set("service", json.dumps({"policy": "fifo", "cluster": "ray-local-4", "round_s": 2.0}))
    ids = {"a": _job(store, "a", 0.0, 1.0, 15.0, "t4-0", [1]),
           "b": _job(store, "b", 0.5, 1.0, 17.0, "rtx-2", [0, 1]),
           "plain": _job(store, "plain", 0.8, 1.0, 8.0, "a100-3", [0], reports=False),
           "d": _job(store, "d", 9.0, 11.0, 23.0, "t4-1", [0])}
    running = {ids["a"]: {"t4-0": [1]}, ids["b"]: {"rtx-2": [0, 1]}}
    for n, t in enumerate(range(1, 24, 2)):
        alloc = dict(running)
        if t < 8:
            alloc[ids["plain"]] = {"a100-3": [0]}
        if t >= 11:
            alloc[ids["d"]] = {"t4-1": [0]}
        store.commit_round(n, T0 + t, {"allocations": {k: {"placement": v, "batch_size": None, "gpu_share": 1.0}
                                                       for k, v in alloc.items()}, "profiles": {}, "info": {}},
                           0.0, {}, {}, [])
    store.close()
    return state, ids


def test_the_replay_starts_from_the_state_at_t(tmp_path):
    state, ids = _state(tmp_path)
    a, b, plain, d = ids["a"], ids["b"], ids["plain"], ids["d"]
    full = whatif(state, policies="fifo", workers=1)
    result = whatif(state, policies="fifo", workers=1, at=AT)
    assert result.at["finished_before"] == [plain]
    assert set(result.at["running"]) == {a, b} and result.at["queued"] == [d]
    assert result.measured["completed"] == 3 and full.measured["completed"] == 4
    # job-1 had reported 4 of its 6 windows' samples by T (at 4, 6, 8 and 10 s)
    assert result.at["running"][a]["progress"] == pytest.approx(4 / 6)
    run = result.runs[0]
    assert plain not in {j.job_id for j in run.jobs}
    first = run.rounds[0]
    assert first.time_s == pytest.approx(10.0) and first.running_jobs == 2 and first.queue_len == 1
    start = {s.job_id: s for s in run.segments if s.start_s == pytest.approx(10.0)}
    assert start[a].gpus == (GLOBAL["t4-0"] + 1,)
    assert start[b].gpus == (GLOBAL["rtx-2"], GLOBAL["rtx-2"] + 1)
    assert d not in start  # queued at T: placed by the policy from the next round
    assert min(s.start_s for s in run.segments if s.job_id == d) >= 10.0 + 1.0 - 1e-9
    jobs = {j.job_id: j for j in run.jobs}
    # the carried work leaves job-1 two reports' 4 s: seen at the round boundary after 14 s (rounds at odd
    # seconds), where from scratch it would need its 12 s again
    assert 14.0 - 1e-9 <= jobs[a].finish_s <= 15.0 + 1e-9
    assert jobs[a].start_s == pytest.approx(1.0) and jobs[a].restarts == 0
    # no GPU held twice in any round, every gang whole
    for r in run.rounds:
        assert r.allocated_gpus <= 8
    held: dict[int, list[tuple[float, float]]] = {}
    for s in run.segments:
        for g in s.gpus:
            for lo, hi in held.get(g, []):
                assert s.end_s <= lo + 1e-9 or s.start_s >= hi - 1e-9, (g, s)
            held.setdefault(g, []).append((s.start_s, s.end_s))


def test_a_time_outside_the_history_is_one_error_line(tmp_path):
    state, _ = _state(tmp_path)
    for at in (str(T0 - 5), str(T0 + 30), "yesterday"):
        done = subprocess.run([sys.executable, "-m", "dlsched", "whatif", "--state", str(state), "--policies",
                               "fifo", "--at", at], capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and "'at'" in lines[0], lines
    with pytest.raises(InputError, match="--at .* is outside the history"):
        whatif(state, policies="fifo", workers=1, at=T0 + 23.0)


TRACE = "synthetic:rate=30,hours=1,seed=3"


def _initial(tmp_path: Path, jobs: list[dict]) -> str:
    path = tmp_path / "initial.json"
    path.write_text(json.dumps({"time_s": 300.0, "jobs": jobs}))
    return str(path)


def test_the_simulator_refuses_an_initial_state_that_breaks_an_invariant(tmp_path):
    base = simulate(RunConfig(trace=TRACE, policy="fifo", jobs=6, round_s=60))
    early = sorted((j for j in base.jobs if j.submit_s < 300.0), key=lambda j: j.submit_s)
    assert len(early) >= 2
    one, two = early[0].job_id, early[1].job_id
    bad = {"two jobs": ([{"job_id": one, "gpus": [3]}, {"job_id": two, "gpus": [3]}], "jobs.1.gpus"),
           "outside": ([{"job_id": one, "gpus": [999]}], "jobs.0.gpus"),
           "unknown": ([{"job_id": "nope", "gpus": [1]}], "jobs.0.job_id"),
           "done": ([{"job_id": one, "progress": 1.0}], "jobs.0.progress")}
    for name, (jobs, where) in bad.items():
        with pytest.raises(InputError) as err:
            simulate(RunConfig(trace=TRACE, policy="fifo", jobs=6, round_s=60,
                               initial_state=_initial(tmp_path, jobs)))
        assert err.value.field == f"initial_state.{where}", name
    good = simulate(RunConfig(trace=TRACE, policy="fifo", jobs=6, round_s=60,
                              initial_state=_initial(tmp_path, [{"job_id": one, "gpus": [3], "progress": 0.5}])))
    assert good.rounds[0].time_s == 300.0 and good.rounds[1].time_s == 360.0
    assert [s.gpus for s in good.segments if s.job_id == one][0] == (3,)
    assert all(j.finish_s is not None for j in good.jobs)


def test_a_rigid_scheduler_starts_a_job_carried_at_another_count_queued(tmp_path):
    from dlsched.sim.run import prepare

    specs = [st.job.spec for st in prepare(RunConfig(trace=TRACE, policy="fifo", jobs=6, round_s=60)).engine.pending]
    spec = next(s for s in specs if s.submit_time_s < 300.0 and s.allows_gpu_count(s.num_gpus + 1))
    other = list(range(8, 8 + spec.num_gpus + 1))
    path = _initial(tmp_path, [{"job_id": spec.job_id, "gpus": other, "progress": 0.25}])
    for policy, placed in (("fifo", False), ("sia", True)):
        run = simulate(RunConfig(trace=TRACE, policy=policy, jobs=6, round_s=60, initial_state=path))
        first = [s for s in run.segments if s.job_id == spec.job_id and s.start_s == 300.0]
        assert bool(first) is placed, policy
        if placed:
            assert first[0].gpus == tuple(other)
        assert all(j.finish_s is not None for j in run.jobs)
