"""The dashboard's data from a real store (SQLite): packed GPUs show both jobs, another user's jobs are
'other', usage is set against quotas, the queue ranks waiting jobs; and the shared series helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlsched.dashboard import goodput_series, merge_timeline
from dlsched.service.dashboard import OTHER, job_detail, snapshot
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

CLUSTER = {"name": "c", "policy": "gimbal:fifo", "round": 3,
           "nodes": [{"name": "n0", "gpu_type": "a40", "gpus": 2}, {"name": "n1", "gpu_type": "a40", "gpus": 2}]}


def spec(name: str, gpus: int = 1, priority: float = 1.0) -> JobSubmission:
    return JobSubmission(name=name, command="true", working_dir="/tmp", gpus=gpus, priority=priority)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    s.add_user("alice", team="vision")
    s.add_user("bob", team="vision")
    s.add_user("root", admin=True)
    s.set_quota("team", "vision", 4)
    s.set_quota("user", "alice", 2)
    a = s.add_job("alice", spec("a", 2), 100.0).id
    b = s.add_job("bob", spec("b", 1), 110.0).id
    s.add_job("alice", spec("c", 2, priority=3.0), 120.0)
    s.add_job("bob", spec("d", 1), 130.0)
    s.update_job(a, status="running", placement={"n0": [0, 1]}, gpus=2, gpu_type="a40", attained_service_s=50.0)
    s.update_job(b, status="running", placement={"n0": [1]}, gpus=1, gpu_type="a40", attained_service_s=40.0)
    return s


def users(store: Store) -> dict[str, object]:
    return {u.name: u for u in store.users()}


def test_packed_gpus_show_both_jobs_and_the_queue_is_ranked(store: Store):
    snap = snapshot(store, CLUSTER, users(store)["root"], now_s=200.0)  # type: ignore[arg-type]
    n0, n1 = snap["nodes"]
    assert n0["gpus"] == [["job-1"], ["job-1", "job-2"]]
    assert n1["gpus"] == [[], []]
    rows = {j["id"]: j for j in snap["jobs"]}
    assert (rows["job-3"]["rank"], rows["job-4"]["rank"]) == (1, 2)
    assert rows["job-1"]["rank"] is None
    assert rows["job-3"]["priority"] == 3.0 and rows["job-3"]["gpus_requested"] == 2
    assert rows["job-3"]["wait_s"] == pytest.approx(80.0)
    assert rows["job-3"]["latency_ratio"] is None  # never ran
    assert rows["job-1"]["latency_ratio"] == pytest.approx(50.0 / 50.0)  # wait 50 / run 50 (Hops)
    usage = {(u["kind"], u["name"]): (u["gpus"], u["quota"]) for u in snap["usage"]}
    assert usage[("user", "alice")] == (2, 2)
    assert usage[("user", "bob")] == (1, None)
    assert usage[("team", "vision")] == (3, 4)


def test_a_user_sees_other_users_jobs_only_as_other(store: Store):
    snap = snapshot(store, CLUSTER, users(store)["alice"], now_s=200.0)  # type: ignore[arg-type]
    assert snap["nodes"][0]["gpus"] == [["job-1"], ["job-1", OTHER]]
    assert sorted(j["id"] for j in snap["jobs"]) == ["job-1", "job-3"]
    assert all(s["job"] in ("job-1", "job-3") for s in snap["timeline"]["segments"])


def test_a_job_page_has_its_facts_and_rank(store: Store):
    job = store.job("job-4")
    assert job is not None
    detail = job_detail(store, job, now_s=200.0)
    assert detail["job"]["rank"] == 2
    assert ["placement", "none"] in detail["facts"]
    assert detail["series"] == []
    assert "entered waiting queue" not in dict(detail["facts"])  # not profiled: no entry to show
    store.update_job("job-4", queue_entry_s=0.0)
    entered = dict(job_detail(store, store.job("job-4"), now_s=200.0)["facts"])["entered waiting queue"]
    assert entered == "1970-01-01T00:00:00+00:00"


def test_the_timeline_merges_rounds_with_the_same_holding():
    rounds = [(0.0, {"a": (2, "a40")}), (60.0, {"a": (2, "a40"), "b": (1, "a40")}), (120.0, {"a": (4, "a40")}),
              (180.0, {})]
    assert merge_timeline(rounds, 240.0) == [
        {"job": "a", "start_s": 0.0, "end_s": 120.0, "gpus": 2, "gpu_type": "a40"},
        {"job": "b", "start_s": 60.0, "end_s": 120.0, "gpus": 1, "gpu_type": "a40"},
        {"job": "a", "start_s": 120.0, "end_s": 180.0, "gpus": 4, "gpu_type": "a40"}]
    assert merge_timeline([(0.0, {"a": (1, "t4")})], 30.0)[0]["end_s"] == 30.0


def test_goodput_is_throughput_times_statistical_efficiency():
    reports = [{"type": "start", "time": 10.0, "incarnation": 1},
               {"type": "progress", "time": 12.0, "batch_size": 64, "step_time_s": 0.5, "grad_sqr": 1.0,
                "grad_var": 64.0},
               {"type": "start", "time": 20.0, "incarnation": 2},
               {"type": "progress", "time": 22.0, "batch_size": 128, "step_time_s": 0.5, "grad_sqr": 1.0,
                "grad_var": 64.0},
               {"type": "progress", "time": 24.0, "batch_size": 128, "step_time_s": 0.5}]
    points = goodput_series(reports, 10.0)
    assert [p["restarts"] for p in points] == [0, 0, 1, 1, 1]
    assert points[1]["throughput_sps"] == 128.0 and points[1]["goodput_sps"] == 128.0  # at M0: efficiency 1
    # phi = 64, M0 = 64, M = 128: efficiency (64 + 64) / (64 + 128) = 2/3
    assert points[3]["throughput_sps"] == 256.0 and points[3]["goodput_sps"] == pytest.approx(256.0 * 2 / 3)
    assert points[4]["goodput_sps"] is None  # no gradient statistics: not guessed
    assert points[1]["t"] == 2.0
