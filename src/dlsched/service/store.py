"""The service's durable state: one :class:`Store` over SQLite (the default) or PostgreSQL.

Every accepted job must survive a crash at any moment, so every method that writes commits before it
returns, and what belongs together (a round's decision with the job updates and events it causes) is one
transaction. The API's threads and the round loop's thread share one Store: each call opens its own
Session on the shared engine, so no ORM object or transaction crosses threads; what comes out is a frozen
record (:mod:`dlsched.service.records`).

Writes start with the write itself (an INSERT or a conditional UPDATE), never with a read whose answer
they depend on: under SQLite's locking a read-then-write transaction can fail at once when another writer
got in between, while a write-first one waits its turn (``busy_timeout``). The schema is made by the
Alembic migrations in ``migrations/``, run at open.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    CursorResult,
    Engine,
    Table,
    Update,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from dlsched.core import InputError
from dlsched.service import models as m
from dlsched.service.accounts import Accounts, cancel_in, hash_token, record
from dlsched.service.accounts import check_name as _check_name
from dlsched.service.explanation_store import ExplanationChanges, Explanations, write_explanations
from dlsched.service.job_reports import IN_CHUNK, REPORTS_OFFSET, JobReports
from dlsched.service.records import (
    ACTIVE_STATUSES,
    FINISHED_STATUSES,
    STATUSES,
    ConsumedReports,
    EventRecord,
    JobRecord,
    QuotaRecord,
    UserRecord,
)
from dlsched.service.spec import JobSubmission

__all__ = ["EventRecord", "JobRecord", "QuotaRecord", "Store", "UserRecord", "hash_token", "migrate"]

_log = logging.getLogger("dlsched.service")
#: How long a SQLite writer waits for another's lock before giving up (milliseconds).
SQLITE_BUSY_MS = 30_000
#: The key PostgreSQL's advisory lock takes while migrating, so two services starting at once queue.
_MIGRATION_LOCK = 0x646C7363
MIGRATIONS = Path(__file__).parent / "migrations"
#: The meta row ``/healthz``'s write probe rewrites, and how long a good probe is trusted (seconds).
PROBE_KEY = "health_probe"
PROBE_EVERY_S = 5.0

#: Columns :meth:`Store.update_job` may set, by JobRecord field name.
_UPDATABLE = frozenset(f for f in JobRecord.__dataclass_fields__ if f not in ("id", "user"))


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration (creates every table in an empty database)."""
    from alembic import command
    from alembic.config import Config

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")  # first: switching to WAL may wait for a lock
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class Store(Accounts, JobReports, Explanations):
    """Users, tokens, quotas, jobs, events, rounds, telemetry, observations, the audit trail and meta, in one
    database (users, tokens and the audit trail: :class:`dlsched.service.accounts.Accounts`)."""

    def __init__(self, url: str) -> None:
        try:
            parsed = make_url(url)
            if parsed.get_backend_name() == "sqlite":
                if parsed.database and parsed.database != ":memory:":
                    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                engine = create_engine(parsed, connect_args={"check_same_thread": False,
                                                             "timeout": SQLITE_BUSY_MS / 1000})
                event.listen(engine, "connect", _sqlite_pragmas)
            elif parsed.get_backend_name() == "postgresql":
                engine = create_engine(parsed, pool_pre_ping=True)
            else:
                raise InputError(f"unsupported database {parsed.get_backend_name()!r} (use sqlite:///FILE or "
                                 "postgresql+psycopg://USER@HOST/DB)", field="database")
        except (ArgumentError, NoSuchModuleError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"not a database URL: {exc}", field="database") from None
        self.url = parsed.render_as_string(hide_password=True)
        self._engine = engine
        #: The last write that failed for the database's sake (time, reason), None once one succeeds again.
        self.write_failure: tuple[float, str] | None = None
        self._probed_at = float("-inf")
        self._probe_lock = threading.Lock()
        try:
            migrate(engine)
        except OperationalError as exc:
            engine.dispose()
            reason = " ".join(str(exc.orig).split()) if exc.orig is not None else str(exc)
            raise InputError(f"cannot open {self.url}: {reason}", field="database") from None

    @classmethod
    def open(cls, state_dir: Path, database: str | None = None) -> Store:
        """The store of a service whose state lives in ``state_dir`` (``dlsched.db`` there by default)."""
        state_dir = Path(state_dir)
        if database is None:
            try:
                state_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"cannot create {state_dir}: {exc.strerror}", field="state") from None
            database = f"sqlite:///{state_dir.resolve() / 'dlsched.db'}"
        return cls(database)

    def close(self) -> None:
        self._engine.dispose()

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._engine.dialect.name

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """A session whose transaction commits when the block ends (rolls back on an exception). A write
        the database refused (disk full, read-only, gone) is remembered for ``/healthz``; the next write that
        commits clears it."""
        try:
            with Session(self._engine) as session, session.begin():
                yield session
        except (OperationalError, DatabaseError) as exc:
            if not isinstance(exc, IntegrityError) and not _busy(exc):
                self._write_failed(exc)
            raise
        self._write_succeeded()

    def _write_failed(self, exc: Exception) -> None:
        """Remember a refused write (and log the first of a run of them: the operator learns the cause once,
        not once per request)."""
        if self.write_failure is None:
            _log.warning("the database refused a write: %s", _reason(exc),
                         extra={"event": "database-write-failed", "fields": {"cause": _reason(exc)}})
        self.write_failure = (time.time(), _reason(exc))

    def _write_succeeded(self) -> None:
        if self.write_failure is not None:
            _log.warning("the database takes writes again", extra={"event": "database-writes-again", "fields": {}})
        self.write_failure = None

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with Session(self._engine) as session:
            yield session

    def ping(self) -> None:
        """Raise if the database cannot answer a query (what ``/healthz`` checks)."""
        with self._read() as s:
            s.execute(text("SELECT 1"))

    def write_health(self) -> tuple[float, str] | None:
        """Whether the database takes writes: None when it does, else (since when, why). A write that failed
        is probed again at once (so a freed disk reads as healthy at the next call); otherwise one cheap
        write of a meta row every :data:`PROBE_EVERY_S` seconds, waiting at most a quarter second for a lock
        (a lock held by the round loop is busy, not broken)."""
        if self.write_failure is None and time.monotonic() - self._probed_at < PROBE_EVERY_S:
            return None
        if not self._probe_lock.acquire(blocking=False):  # another request probes right now
            return self.write_failure
        try:
            self._probe()
            self._probed_at = time.monotonic()
        except (OperationalError, DatabaseError) as exc:
            if not isinstance(exc, IntegrityError) and not _busy(exc):
                self._write_failed(exc)
        finally:
            self._probe_lock.release()
        return self.write_failure

    def _probe(self) -> None:
        with self._engine.connect() as conn:
            sqlite = conn.dialect.name == "sqlite"
            if sqlite:
                conn.exec_driver_sql("PRAGMA busy_timeout=250")
                conn.commit()  # the PRAGMA's autobegun transaction, so the probe's own can begin
            try:
                with conn.begin():
                    if not sqlite:
                        conn.exec_driver_sql("SET LOCAL lock_timeout = '250ms'")
                    now = f"{time.time():.3f}"
                    changed = conn.execute(update(m.Meta).where(m.Meta.key == PROBE_KEY).values(value=now))
                    if not changed.rowcount:
                        conn.execute(insert(m.Meta).values(key=PROBE_KEY, value=now))
            finally:
                if sqlite:
                    conn.rollback()
                    conn.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
                    conn.commit()
        self._write_succeeded()

    # quotas

    def set_quota(self, kind: str, name: str, gpus: int, borrowing_limit: int | None = None, *,
                  actor: str | None = None) -> None:
        """Set (or replace) the GPU quota of a user or a team."""
        if kind not in ("user", "team"):
            raise InputError(f"must be 'user' or 'team', got {kind!r}", field="kind")
        _check_name(name, kind)
        if not isinstance(gpus, int) or not 0 <= gpus <= 1_000_000:
            raise InputError(f"must be an integer in [0, 1000000], got {gpus!r}", field="gpus")
        if borrowing_limit is not None and (not isinstance(borrowing_limit, int)
                                            or not 0 <= borrowing_limit <= 1_000_000):
            raise InputError(f"must be an integer in [0, 1000000], got {borrowing_limit!r}",
                             field="borrowing_limit")
        if kind == "user" and name not in {u.name for u in self.users()}:
            raise InputError(f"no user named {name!r}", field="user")
        with self._write() as s:
            s.execute(delete(m.Quota).where(m.Quota.kind == kind, m.Quota.name == name))
            s.execute(insert(m.Quota).values(kind=kind, name=name, gpus=gpus, borrowing_limit=borrowing_limit))
            record(s, actor, "quota-set", f"{kind}:{name}", {"gpus": gpus, "borrowing_limit": borrowing_limit})

    def quotas(self) -> list[QuotaRecord]:
        with self._read() as s:
            rows = s.execute(select(m.Quota).order_by(m.Quota.kind, m.Quota.name)).scalars()
            return [QuotaRecord(cast(Any, q.kind), q.name, q.gpus, q.borrowing_limit) for q in rows]

    # jobs

    def add_job(self, user: str, submission: JobSubmission, now_s: float) -> JobRecord:
        """Store a submitted job as ``queued`` with a ``submitted`` event; committed when this returns."""
        return self.submit_job(user, submission, now_s)[0]

    def submit_job(self, user: str, submission: JobSubmission, now_s: float,
                   idempotency_key: str | None = None) -> tuple[JobRecord, bool]:
        """Store a submitted job, and whether it is new: with ``idempotency_key``, the job the same user
        submitted with that key before comes back instead (False), so a client's retry stores one job. The
        key is written in the job's own transaction, and two racing submissions with one key leave one job:
        the unique (user, key) makes the second's transaction fail and roll back its job. A key used before
        for another spec is an InputError naming it."""
        if idempotency_key is None:
            with self._write() as s:
                return _insert_job(s, user, submission, now_s), True
        try:
            with self._write() as s:
                job = _insert_job(s, user, submission, now_s)
                s.execute(insert(m.IdempotencyKey).values(user=user, key=idempotency_key, job_id=job.id,
                                                          created_s=now_s))
                return job, True
        except IntegrityError:
            pass  # the key is there already: its job is the answer
        with self._read() as s:
            row = s.execute(select(m.Job).join(m.IdempotencyKey, m.IdempotencyKey.job_id == m.Job.id)
                            .where(m.IdempotencyKey.user == user, m.IdempotencyKey.key == idempotency_key)
                            ).scalar_one_or_none()
        if row is None:  # not reachable unless the key's job was deleted in between
            raise InputError(f"key {idempotency_key!r} could not be stored; retry", field="Idempotency-Key")
        existing = _job_record(row)
        if existing.submission.model_dump(mode="json") != submission.model_dump(mode="json"):
            raise InputError(f"key {idempotency_key!r} was used for {existing.id}, another job spec; use a new "
                             "key for a new job", field="Idempotency-Key")
        return existing, False

    def add_jobs(self, user: str, submissions: Sequence[JobSubmission], now_s: float) -> list[str]:
        """Store many submitted jobs of one user in one transaction (all or none), each as :meth:`add_job`
        stores it; their ids in order. For loading a queue at once (the scale benchmark, a migration)."""
        with self._write() as s:
            return [_insert_job(s, user, sub, now_s).id for sub in submissions]

    def job(self, job_id: str) -> JobRecord | None:
        with self._read() as s:
            row = s.execute(select(m.Job).where(m.Job.id == job_id)).scalar_one_or_none()
            return None if row is None else _job_record(row)

    def jobs(self, *, user: str | None = None, include_finished: bool = True) -> list[JobRecord]:
        """Jobs in submission order, of one user or all, finished ones too unless told otherwise."""
        query = select(m.Job).order_by(m.Job.seq)
        if user is not None:
            query = query.where(m.Job.user == user)
        if not include_finished:
            query = query.where(m.Job.status.in_(ACTIVE_STATUSES))
        with self._read() as s:
            return [_job_record(row) for row in s.execute(query).scalars()]

    def jobs_page(self, *, user: str | None = None, statuses: Sequence[str] | None = None,
                  include_finished: bool = True, since_s: float | None = None, after: int = 0,
                  limit: int = 1000) -> tuple[list[JobRecord], int | None]:
        """At most ``limit`` jobs submitted after the one numbered ``after`` (its ``seq``), in submission
        order, filtered by user, statuses and submission time; and the cursor of the next page (None: this
        was the last). One indexed range query per page, whatever the number of jobs."""
        query = select(m.Job).where(m.Job.seq > after).order_by(m.Job.seq).limit(limit + 1)
        if user is not None:
            query = query.where(m.Job.user == user)
        if statuses:
            query = query.where(m.Job.status.in_(list(statuses)))
        elif not include_finished:
            query = query.where(m.Job.status.in_(ACTIVE_STATUSES))
        if since_s is not None:
            query = query.where(m.Job.submitted_s >= since_s)
        with self._read() as s:
            rows = list(s.execute(query).scalars())
            more = len(rows) > limit
            rows = rows[:limit]
            return [_job_record(row) for row in rows], (rows[-1].seq if more and rows else None)

    def active_jobs(self) -> list[JobRecord]:
        """Jobs the round loop still schedules: queued, profiling or running."""
        return self.jobs(include_finished=False)

    def active_job_flags(self) -> dict[str, bool]:
        """Every active job's id and whether its cancel was asked for, in submission order: the two things
        other writers than the round loop change (the API cancels, submits), read without the rows."""
        with self._read() as s:
            rows = s.execute(select(m.Job.id, m.Job.cancel_requested).where(m.Job.status.in_(ACTIVE_STATUSES))
                             .order_by(m.Job.seq))
            return {str(i): bool(c) for i, c in rows}

    def jobs_by_id(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """The rows of these jobs (unknown ids left out), in submission order, a bounded ``IN`` at a time."""
        rows: list[m.Job] = []
        with self._read() as s:
            for i in range(0, len(job_ids), IN_CHUNK):
                rows.extend(s.execute(select(m.Job).where(m.Job.id.in_(list(job_ids[i:i + IN_CHUNK])))).scalars())
            return [_job_record(r) for r in sorted(rows, key=lambda r: r.seq)]

    def job_totals(self) -> tuple[dict[str, int], int]:
        """Jobs in each status and the restarts summed over every job, counted by the database (what
        ``/metrics`` reports on each scrape, without reading a row)."""
        with self._read() as s:
            counts = {str(st): int(n) for st, n in
                      s.execute(select(m.Job.status, func.count()).group_by(m.Job.status))}
            restarts = int(s.execute(select(func.coalesce(func.sum(m.Job.restarts), 0))).scalar_one())
        return counts, restarts

    def count_jobs(self) -> int:
        with self._read() as s:
            return int(s.execute(select(func.count()).select_from(m.Job)).scalar_one())

    def update_job(self, job_id: str, **fields: Any) -> None:
        """Set exactly the given columns (KeyError for an unknown job, ValueError for an unknown field)."""
        with self._write() as s:
            _update_job(s, job_id, fields)

    def request_cancel(self, job_id: str, now_s: float, *, actor: str | None = None) -> JobRecord:
        """Ask for a job to end: a queued job is cancelled at once; a placed one is stopped by the round
        loop, which sees ``cancel_requested``. A finished job is left as it is. KeyError if unknown. The
        request is audited under ``actor`` when it changed the job."""
        with self._write() as s:
            if cancel_in(s, job_id, now_s):
                record(s, actor, "cancel", job_id, {}, now_s)
            row = s.execute(select(m.Job).where(m.Job.id == job_id)).scalar_one_or_none()
            if row is None:
                raise KeyError(job_id)
            return _job_record(row)

    # events and rounds

    def add_event(self, job_id: str, kind: str, message: str, data: dict[str, Any] | None = None, *,
                  now_s: float) -> None:
        try:
            with self._write() as s:
                _insert_event(s, job_id, kind, message, data, now_s)
        except IntegrityError:
            raise KeyError(job_id) from None

    def events(self, job_id: str) -> list[EventRecord]:
        with self._read() as s:
            rows = s.execute(select(m.Event).where(m.Event.job_id == job_id).order_by(m.Event.id)).scalars()
            return [EventRecord(e.time_s, e.kind, e.message, dict(e.data or {})) for e in rows]

    def commit_round(self, round_no: int, time_s: float, decision: dict[str, Any], policy_s: float,
                     summary: dict[str, Any], job_updates: dict[str, dict[str, Any]],
                     events: list[tuple[str, str, str, dict[str, Any]]],
                     explanations: ExplanationChanges | None = None, consumed: ConsumedReports | None = None) -> None:
        """Record a round, the job updates it causes, its events (job_id, kind, message, data), the changes
        of its explanation records (docs/service.md, "Explanations"; :mod:`dlsched.service.explanation_store`)
        and the reports it consumed in ONE transaction: after a crash either all of it is there or none. An
        update of an unknown job raises KeyError; an event of an unknown job or a round number used before,
        IntegrityError."""
        with self._write() as s:
            if explanations is not None:
                write_explanations(s, round_no, explanations)
            _write_changes(s, time_s, job_updates, events, consumed)
            s.execute(insert(m.Round).values(round_no=round_no, time_s=time_s, decision=decision,
                                             policy_s=policy_s, summary=summary))

    def commit_changes(self, time_s: float, job_updates: dict[str, dict[str, Any]],
                       events: list[tuple[str, str, str, dict[str, Any]]],
                       consumed: ConsumedReports | None = None) -> None:
        """Job updates, events and consumed reports outside a round (the service starting or stopping), in
        one transaction, as :meth:`commit_round` writes them."""
        with self._write() as s:
            _write_changes(s, time_s, job_updates, events, consumed)

    def rounds(self) -> list[dict[str, Any]]:
        with self._read() as s:
            return [{"round_no": r.round_no, "time_s": r.time_s, "decision": r.decision, "policy_s": r.policy_s,
                     "summary": r.summary} for r in s.execute(select(m.Round).order_by(m.Round.round_no)).scalars()]

    def recent_rounds(self, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` rounds, oldest first (what ``/metrics`` reads on every scrape, without the
        whole history)."""
        with self._read() as s:
            rows = s.execute(select(m.Round).order_by(m.Round.round_no.desc()).limit(limit)).scalars().all()
            return [{"round_no": r.round_no, "time_s": r.time_s, "decision": r.decision, "policy_s": r.policy_s,
                     "summary": r.summary} for r in reversed(rows)]

    def last_round_no(self) -> int | None:
        with self._read() as s:
            return s.execute(select(func.max(m.Round.round_no))).scalar_one()

    # meta

    def meta_get(self, key: str) -> str | None:
        with self._read() as s:
            return s.execute(select(m.Meta.value).where(m.Meta.key == key)).scalar_one_or_none()

    def meta_set(self, key: str, value: str) -> None:
        with self._write() as s:
            s.execute(delete(m.Meta).where(m.Meta.key == key))
            s.execute(insert(m.Meta).values(key=key, value=value))


def _write_changes(s: Session, time_s: float, job_updates: dict[str, dict[str, Any]],
                   events: list[tuple[str, str, str, dict[str, Any]]], consumed: ConsumedReports | None) -> None:
    _update_jobs(s, job_updates)
    for job_id, kind, message, data in events:
        _insert_event(s, job_id, kind, message, data, time_s)
    if consumed is None:
        return
    telemetry = [{"job_id": job_id, "time_s": _float_or_none(r.get("time")),
                  "type": str(r["type"])[:16] if r.get("type") is not None else None, "report": r}
                 for job_id, reports in consumed.telemetry.items() for r in reports]
    if telemetry:
        s.execute(insert(m.Telemetry), telemetry)
    observations = ([{"job_id": j, "kind": "throughput", "time_s": o.time_s, "data": asdict(o)}
                     for j, obs in consumed.throughput.items() for o in obs]
                    + [{"job_id": j, "kind": "gradient", "time_s": o.time_s, "data": asdict(o)}
                       for j, obs in consumed.gradient.items() for o in obs])
    if observations:
        s.execute(insert(m.Observation), observations)
    for job_id, offset in consumed.offsets.items():
        key = f"{REPORTS_OFFSET}{job_id}"
        s.execute(delete(m.Meta).where(m.Meta.key == key))
        s.execute(insert(m.Meta).values(key=key, value=str(offset)))


def _busy(exc: Exception) -> bool:
    """A lock another writer holds (SQLite's "database is locked", PostgreSQL's lock timeout): a wait, not a
    failure of the database."""
    orig = getattr(exc, "orig", None)
    return "database is locked" in str(orig).lower() or getattr(orig, "sqlstate", None) == "55P03"


def _reason(exc: Exception) -> str:
    orig = getattr(exc, "orig", None)
    return " ".join(str(orig if orig is not None else exc).split())[:300]


def _rowcount(s: Session, statement: Update) -> int:
    """How many rows an UPDATE matched."""
    return int(cast(CursorResult[Any], s.execute(statement)).rowcount)


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _column_values(fields: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(fields) - _UPDATABLE)
    if unknown:
        raise ValueError(f"not job fields that can be updated: {', '.join(unknown)}")
    values = dict(fields)
    if "status" in values and values["status"] not in STATUSES:
        raise ValueError(f"unknown job status {values['status']!r} (known: {', '.join(STATUSES)})")
    if "submission" in values and isinstance(values["submission"], JobSubmission):
        values["submission"] = values["submission"].model_dump(mode="json")
    if "placement" in values:
        values["placement"] = {str(k): [int(g) for g in v] for k, v in (values["placement"] or {}).items()}
    if "profiled_types" in values:
        values["profiled_types"] = list(values["profiled_types"])
    return values


def _update_job(s: Session, job_id: str, fields: dict[str, Any]) -> None:
    _update_jobs(s, {job_id: fields})


def _update_jobs(s: Session, job_updates: dict[str, dict[str, Any]]) -> None:
    """Many jobs' updates as one executemany per set of columns (a round updates thousands of rows; one
    ORM UPDATE each took most of its commit); an unknown job is a KeyError, found after the writes (so
    the transaction still starts with a write) and rolling all of it back."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for job_id, fields in job_updates.items():
        values = _column_values(fields)
        if not values:
            continue
        if values.get("status") in FINISHED_STATUSES:  # a job that ended waits for nothing: no reason is left shown
            values.setdefault("reason", None)
            values.setdefault("reason_detail", None)
        groups.setdefault(tuple(sorted(values)), []).append({**{f"v_{k}": v for k, v in values.items()},
                                                             "v__id": job_id})
    table = m.Job.__table__
    assert isinstance(table, Table)
    for columns, rows in groups.items():
        statement = (update(table).where(table.c.id == bindparam("v__id"))
                     .values({k: bindparam(f"v_{k}") for k in columns}))
        s.connection().execute(statement, rows)
    ids = [row["v__id"] for rows in groups.values() for row in rows]
    for i in range(0, len(ids), IN_CHUNK):
        chunk = ids[i:i + IN_CHUNK]
        found = set(s.execute(select(m.Job.id).where(m.Job.id.in_(chunk))).scalars())
        missing = [j for j in chunk if j not in found]
        if missing:
            raise KeyError(missing[0])


def _insert_event(s: Session, job_id: str, kind: str, message: str, data: dict[str, Any] | None,
                  now_s: float) -> None:
    s.execute(insert(m.Event).values(job_id=job_id, time_s=now_s, kind=kind, message=message, data=data or {}))


def _insert_job(s: Session, user: str, submission: JobSubmission, now_s: float) -> JobRecord:
    """A new ``queued`` job and its ``submitted`` event, in the caller's transaction."""
    try:
        seq = s.execute(insert(m.Job).values(
            user=user, name=submission.name, submission=submission.model_dump(mode="json"),
            status="queued", submitted_s=now_s, gpus=0, placement={}, incarnation=0, steps_done=0,
            last_checkpoint_step=0, restarts=0, failures=0, preemptions=0, attained_gpu_s=0.0,
            attained_service_s=0.0, progress=0.0, cancel_requested=False, profiled_types=[],
            service_at_entry_s=0.0,
        ).returning(m.Job.seq)).scalar_one()
    except IntegrityError:
        raise InputError(f"no user named {user!r}", field="user") from None
    job_id = f"job-{seq}"
    s.execute(update(m.Job).where(m.Job.seq == seq).values(id=job_id))
    s.execute(insert(m.Event).values(job_id=job_id, time_s=now_s, kind="submitted",
                                     message=f"submitted by {user}", data={}))
    record(s, user, "submit", job_id, {"name": submission.name}, now_s)
    row = s.execute(select(m.Job).where(m.Job.seq == seq)).scalar_one()
    return _job_record(row)


def _job_record(row: m.Job) -> JobRecord:
    return JobRecord(
        id=cast(str, row.id), user=row.user, name=row.name,
        submission=JobSubmission.model_validate(row.submission), status=row.status,
        submitted_s=row.submitted_s, started_s=row.started_s, finished_s=row.finished_s, gpus=row.gpus,
        gpu_type=row.gpu_type, placement={str(k): [int(g) for g in v] for k, v in (row.placement or {}).items()},
        batch_size=row.batch_size, incarnation=row.incarnation, steps_done=row.steps_done,
        last_checkpoint_step=row.last_checkpoint_step, restarts=row.restarts, failures=row.failures,
        preemptions=row.preemptions, attained_gpu_s=row.attained_gpu_s,
        attained_service_s=row.attained_service_s, progress=row.progress,
        cancel_requested=bool(row.cancel_requested), message=row.message,
        profiled_types=tuple(row.profiled_types or ()), queue_entry_s=row.queue_entry_s,
        service_at_entry_s=row.service_at_entry_s or 0.0, reason=row.reason, reason_detail=row.reason_detail,
        startup_s=row.startup_s)
