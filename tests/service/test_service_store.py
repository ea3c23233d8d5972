"""The store on both databases: the schema from nothing, hashed tokens, durable and atomic writes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from dlsched.core import GradientObservation, InputError, ThroughputObservation
from dlsched.service.records import ConsumedReports
from dlsched.service.spec import parse_submission
from dlsched.service.store import Store, hash_token

TABLES = {"users", "tokens", "quotas", "jobs", "events", "rounds", "telemetry", "observations", "meta",
          "explanations", "idempotency_keys"}


def submission(name: str = "demo", **extra: object):
    return parse_submission({"name": name, "command": "python train.py", "working_dir": "/tmp", "gpus": 2,
                             **extra})


@pytest.fixture
def store(db_url: str):
    s = Store(db_url)
    yield s
    s.close()


def test_migrations_create_the_schema_from_nothing_matching_the_models(db_url: str):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from dlsched.service.models import Base

    engine = sa.create_engine(db_url)
    assert not TABLES & set(sa.inspect(engine).get_table_names())
    Store(db_url).close()
    Store(db_url).close()  # a second open finds the schema at head and changes nothing
    assert TABLES <= set(sa.inspect(engine).get_table_names())
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one() == _head()
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diffs == []


def test_a_database_one_revision_old_upgrades_and_keeps_its_jobs(db_url: str):
    from alembic import command
    from alembic.config import Config

    from dlsched.service.store import MIGRATIONS

    store = Store(db_url)
    store.add_user("ann")
    job = store.add_job("ann", submission(), now_s=100.0)
    store.update_job(job.id, status="profiling", attained_service_s=5.0)
    store.close()
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:  # back to the schema before the waiting queue was stored
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")
        assert "queue_entry_s" not in {c["name"] for c in sa.inspect(conn).get_columns("jobs")}
    engine.dispose()
    store = Store(db_url)  # opening upgrades it again
    try:
        again = store.job(job.id)
        assert again is not None
        assert (again.status, again.attained_service_s, again.submitted_s) == ("profiling", 5.0, 100.0)
        assert (again.queue_entry_s, again.service_at_entry_s) == (None, 0.0)  # its wait counts from submission
        store.update_job(job.id, queue_entry_s=130.0, service_at_entry_s=5.0)
        assert (store.job(job.id).queue_entry_s, store.job(job.id).service_at_entry_s) == (130.0, 5.0)
    finally:
        store.close()


def test_tokens_are_kept_only_as_hashes(store: Store, db_url: str):
    token = store.add_user("alice", team="vision")
    second = store.add_token("alice")
    assert token != second
    for t in (token, second):
        assert store.user_by_token(t) == store.users()[0]
    assert store.user_by_token("not-a-token") is None
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        rows = [tuple(str(v) for v in r) for r in conn.execute(sa.text("SELECT * FROM tokens"))]
    engine.dispose()
    stored = " ".join(" ".join(r) for r in rows)
    assert token not in stored and second not in stored
    assert hash_token(token) in stored
    if db_url.startswith("sqlite"):  # not in the file at all, nor in its write-ahead log
        path = Path(db_url.removeprefix("sqlite:///"))
        for f in path.parent.iterdir():
            assert token.encode() not in f.read_bytes()


def test_users_and_quotas_refuse_bad_input(store: Store):
    store.add_user("alice")
    with pytest.raises(InputError, match="exists already"):
        store.add_user("alice")
    with pytest.raises(InputError, match="field 'name'"):
        store.add_user("bad name")
    with pytest.raises(InputError, match="no user"):
        store.add_token("bob")
    with pytest.raises(InputError, match="field 'user'"):
        store.set_quota("user", "bob", 4)
    with pytest.raises(InputError, match="field 'kind'"):
        store.set_quota("group", "x", 4)
    with pytest.raises(InputError, match="field 'gpus'"):
        store.set_quota("team", "x", -1)
    store.set_quota("user", "alice", 4, 2)
    store.set_quota("team", "vision", 8)
    store.set_quota("user", "alice", 6)  # replaces
    assert [(q.kind, q.name, q.gpus, q.borrowing_limit) for q in store.quotas()] == [
        ("team", "vision", 8, None), ("user", "alice", 6, None)]


def test_add_job_is_committed_and_visible_from_a_second_store(store: Store, db_url: str):
    store.add_user("alice")
    job = store.add_job("alice", submission(), 1000.0)
    assert (job.id, job.status, job.user, job.submitted_s) == ("job-1", "queued", "alice", 1000.0)
    other = Store(db_url)
    try:
        seen = other.job("job-1")
        assert seen == job
        assert [e.kind for e in other.events("job-1")] == ["submitted"]
        assert other.add_job("alice", submission("second"), 1001.0).id == "job-2"
        assert [j.id for j in store.jobs()] == ["job-1", "job-2"]
    finally:
        other.close()


def test_concurrent_submissions_get_distinct_ids(store: Store):
    store.add_user("alice")
    ids: list[str] = []
    lock = threading.Lock()

    def submit(k: int) -> None:
        for i in range(5):
            job = store.add_job("alice", submission(f"j{k}-{i}"), float(i))
            with lock:
                ids.append(job.id)

    threads = [threading.Thread(target=submit, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(ids, key=lambda s: int(s.split("-")[1])) == [f"job-{n}" for n in range(1, 21)]
    assert store.count_jobs() == 20


def test_update_job_sets_only_the_given_columns(store: Store):
    store.add_user("alice")
    job = store.add_job("alice", submission(), 1.0)
    store.request_cancel(job.id, 2.0)  # queued: cancelled at once
    assert store.job(job.id).status == "cancelled"
    running = store.add_job("alice", submission("b"), 3.0)
    store.update_job(running.id, status="running", placement={"node-0": [0, 1]}, gpus=2, gpu_type="a100",
                     started_s=4.0, profiled_types=("a100", "t4"))
    store.request_cancel(running.id, 5.0)  # running: only marked
    store.update_job(running.id, steps_done=40, attained_gpu_s=12.5)
    got = store.job(running.id)
    assert (got.status, got.cancel_requested, got.steps_done, got.placement, got.profiled_types) == (
        "running", True, 40, {"node-0": [0, 1]}, ("a100", "t4"))
    assert [e.kind for e in store.events(running.id)] == ["submitted", "cancel-requested"]
    assert [j.id for j in store.active_jobs()] == [running.id]
    with pytest.raises(ValueError, match="nonsense"):
        store.update_job(running.id, nonsense=1)
    with pytest.raises(ValueError, match="status"):
        store.update_job(running.id, status="exploded")
    with pytest.raises(KeyError):
        store.update_job("job-99", steps_done=1)
    with pytest.raises(KeyError):
        store.request_cancel("job-99", 1.0)


def test_commit_round_is_one_transaction(store: Store):
    store.add_user("alice")
    a = store.add_job("alice", submission("a"), 1.0)
    b = store.add_job("alice", submission("b"), 1.0)
    decision = {"allocations": {a.id: {"node-0": [0, 1]}}}
    store.commit_round(1, 10.0, decision, 0.02, {"running": 1}, {a.id: {"status": "running", "gpus": 2}},
                       [(a.id, "placed", "on node-0", {"gpus": 2})])
    assert store.last_round_no() == 1
    assert store.rounds() == [{"round_no": 1, "time_s": 10.0, "decision": decision, "policy_s": 0.02,
                               "summary": {"running": 1}}]
    # round 1 again: the job update and the event that came before the failing insert are rolled back
    with pytest.raises(sa.exc.IntegrityError):
        store.commit_round(1, 20.0, {}, 0.0, {}, {b.id: {"status": "running"}}, [(b.id, "placed", "x", {})])
    assert store.job(b.id).status == "queued"
    assert [e.kind for e in store.events(b.id)] == ["submitted"]
    # an update of an unknown job rolls back the whole round too
    with pytest.raises(KeyError):
        store.commit_round(2, 20.0, {}, 0.0, {}, {b.id: {"steps_done": 7}, "job-99": {"steps_done": 1}}, [])
    assert store.job(b.id).steps_done == 0 and store.last_round_no() == 1


def test_events_telemetry_observations_and_meta_round_trip(store: Store):
    store.add_user("alice")
    job = store.add_job("alice", submission(), 1.0)
    store.add_event(job.id, "note", "hello", {"k": [1, 2]}, now_s=5.0)
    assert store.events(job.id)[-1].data == {"k": [1, 2]}
    with pytest.raises(KeyError):
        store.add_event("job-99", "note", "x", now_s=1.0)
    reports = [{"type": "start", "incarnation": 0, "time": 10.5, "resumed_step": 0},
               {"type": "progress", "incarnation": 0, "time": 12.0, "first_step": 1, "last_step": 9,
                "grad_sqr": None, "loss": 2.5}]
    tput = [ThroughputObservation(1.0, "a100", 1, 2, 32, 1, 0.25, 0.01, servers=((0, 2),),
                                  components=(("T_f", 0.1),), data_load_s=(0.01, 0.02))]
    grad = [GradientObservation(2.0, 64, 0.5, 1.5)]
    consumed = ConsumedReports()
    consumed.add_reports(job.id, reports, 123)
    consumed.add_observations(job.id, tput, grad)
    store.commit_changes(13.0, {job.id: {"steps_done": 9}}, [], consumed)
    assert store.telemetry(job.id) == reports
    assert store.observations(job.id) == (tput, grad)
    assert store.reports_offset(job.id) == 123 and store.job(job.id).steps_done == 9
    assert store.meta_get("epoch") is None
    store.meta_set("epoch", "1")
    store.meta_set("epoch", "2")
    assert store.meta_get("epoch") == "2"


def test_open_makes_the_state_folder_and_refuses_bad_urls(tmp_path: Path):
    store = Store.open(tmp_path / "state")
    assert (tmp_path / "state" / "dlsched.db").is_file()
    store.close()
    with pytest.raises(InputError, match="field 'database'"):
        Store("mysql://x@y/z")
    with pytest.raises(InputError, match="field 'database'"):
        Store("not a url")
    with pytest.raises(InputError, match="cannot open"):
        Store("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_migrations_are_packaged():
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dlsched"]
    package = root / "src" / "dlsched"
    for path in (package / "service" / "migrations").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(package).as_posix()
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


def _head() -> str:
    """The newest migration's revision, as the migrations folder says (never a number copied here)."""
    from alembic.script import ScriptDirectory

    from dlsched.service.store import MIGRATIONS

    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None
    return head


def test_many_job_reads_and_the_metrics_totals_agree_with_reading_every_row(store: Store):
    """The batched reads a round uses (flags, rows by id, meta, observations) and the totals ``/metrics``
    reports equal what one-by-one reads and a full scan give, across more ids than one ``IN`` holds."""
    store.add_user("alice")
    ids = store.add_jobs("alice", [submission(f"j{i}") for i in range(2000)], 1.0)
    store.request_cancel(ids[5], 2.0)
    store.update_job(ids[7], status="running", restarts=3)
    store.update_job(ids[9], status="succeeded", restarts=2)
    store.meta_set(f"reports_offset:{ids[1500]}", "42")
    store.commit_changes(3.0, {}, [], ConsumedReports(gradient={ids[1999]: [GradientObservation(1.0, 4, 2.0, 3.0)]}))
    every = store.jobs()
    assert store.active_job_flags() == {j.id: j.cancel_requested for j in every
                                        if j.status not in ("cancelled", "succeeded")}
    assert store.jobs_by_id([ids[1999], "job-nope", ids[0], *ids[900:1000]]) == [store.job(i) for i in
                                                                                [ids[0], *ids[900:1000], ids[1999]]]
    assert store.meta_many([f"reports_offset:{i}" for i in ids]) == {f"reports_offset:{ids[1500]}": "42"}
    assert store.observations_of(ids) == {ids[1999]: store.observations(ids[1999])}
    counts, restarts = store.job_totals()
    assert counts == {s: sum(1 for j in every if j.status == s) for s in {j.status for j in every}}
    assert restarts == sum(j.restarts for j in every) == 5
