"""The database tables as SQLAlchemy 2 declarative models.

The schema itself is made by the Alembic migrations (``migrations/versions``); these models are what the
queries use, and a test checks the two agree. Times are Unix seconds (float) so SQLite and PostgreSQL store
them alike; structured values (a job's spec, a placement, a round's decision) are JSON columns.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    team: Mapped[str | None] = mapped_column(String(64))
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_s: Mapped[float] = mapped_column(Float)
    #: When ``dlsched serve user remove`` removed the user (None: active). The row stays, since the user's
    #: jobs name it; the name is never given to anyone else.
    removed_s: Mapped[float | None] = mapped_column(Float)
    #: The OS account the user's jobs run as (None: the service's job account; dlsched.service.isolation).
    os_user: Mapped[str | None] = mapped_column(String(32))


class Token(Base):
    """An API token, kept only as its SHA-256 hash: a leaked database leaks no usable token."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user: Mapped[str] = mapped_column(String(64), ForeignKey("users.name", ondelete="CASCADE"), index=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_s: Mapped[float] = mapped_column(Float)


class Quota(Base):
    __tablename__ = "quotas"

    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    gpus: Mapped[int] = mapped_column(Integer)
    borrowing_limit: Mapped[int | None] = mapped_column(Integer)


class Job(Base):
    """A job's row. ``seq`` numbers jobs in submission order (never reused); ``id`` is ``job-<seq>``."""

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_status", "status"), Index("ix_jobs_user", "user"),
                      {"sqlite_autoincrement": True})

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str | None] = mapped_column(String(32), unique=True)
    user: Mapped[str] = mapped_column(String(64), ForeignKey("users.name"))
    name: Mapped[str] = mapped_column(String(64))
    submission: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    submitted_s: Mapped[float] = mapped_column(Float)
    started_s: Mapped[float | None] = mapped_column(Float)
    finished_s: Mapped[float | None] = mapped_column(Float)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    gpu_type: Mapped[str | None] = mapped_column(String(32))
    placement: Mapped[dict[str, Any]] = mapped_column(JSON)
    batch_size: Mapped[int | None] = mapped_column(Integer)
    incarnation: Mapped[int] = mapped_column(Integer, default=0)
    steps_done: Mapped[int] = mapped_column(Integer, default=0)
    last_checkpoint_step: Mapped[int] = mapped_column(Integer, default=0)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    preemptions: Mapped[int] = mapped_column(Integer, default=0)
    attained_gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    attained_service_s: Mapped[float] = mapped_column(Float, default=0.0)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    message: Mapped[str | None] = mapped_column(Text)
    profiled_types: Mapped[list[str]] = mapped_column(JSON)
    #: Unix time the job entered the waiting queue (its first profile's end; None before) and its service then.
    queue_entry_s: Mapped[float | None] = mapped_column(Float)
    service_at_entry_s: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    #: Why the job waits (Slurm's REASON) and the detail; the measured start-up of its last incarnation.
    reason: Mapped[str | None] = mapped_column(String(200))
    reason_detail: Mapped[str | None] = mapped_column(Text)
    startup_s: Mapped[float | None] = mapped_column(Float)


class Event(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    time_s: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class Round(Base):
    """One scheduling round: the decision as JSON, the policy's run time and the round's summary."""

    __tablename__ = "rounds"

    round_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    time_s: Mapped[float] = mapped_column(Float)
    decision: Mapped[dict[str, Any]] = mapped_column(JSON)
    policy_s: Mapped[float] = mapped_column(Float)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)


class Explanation(Base):
    """Why one stage decided what it did for one job, from round ``round_no`` through ``last_round`` (NULL:
    the decision still holds), the record of docs/service.md, "Explanations", kept whole as JSON. ``stage``
    is the record's stage, or ``silent`` for the record that says how a job without statistics is treated."""

    __tablename__ = "explanations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_no: Mapped[int] = mapped_column(Integer, index=True)
    last_round: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    stage: Mapped[str] = mapped_column(String(16))
    record: Mapped[dict[str, Any]] = mapped_column(JSON)


class Telemetry(Base):
    """One report from a job's ``reports.jsonl`` (docs/service.md), kept whole as JSON."""

    __tablename__ = "telemetry"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    time_s: Mapped[float | None] = mapped_column(Float)
    type: Mapped[str | None] = mapped_column(String(16))
    report: Mapped[dict[str, Any]] = mapped_column(JSON)


class Observation(Base):
    """A throughput or gradient observation (``dlsched.core.view``) the estimators learn from."""

    __tablename__ = "observations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    time_s: Mapped[float] = mapped_column(Float)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class IdempotencyKey(Base):
    """The job a user's ``Idempotency-Key`` created (unique per user), written with the job itself."""

    __tablename__ = "idempotency_keys"

    user: Mapped[str] = mapped_column(String(64), ForeignKey("users.name", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"))
    created_s: Mapped[float] = mapped_column(Float)


class Audit(Base):
    """Who did what to the service, and when: a submission, a cancel, a quota set, a user added or removed,
    a token rotated or revoked, a reconfiguration. Written in the same transaction as the action, so the
    trail names exactly what the database holds."""

    __tablename__ = "audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time_s: Mapped[float] = mapped_column(Float, index=True)
    #: the dlsched user (API) or ``os:<account>`` (a ``dlsched serve`` subcommand run on the host)
    actor: Mapped[str] = mapped_column(String(80), index=True)
    action: Mapped[str] = mapped_column(String(32))
    #: what it acted on: a job id, a user, ``team:<name>``, the state
    target: Mapped[str | None] = mapped_column(String(200))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)


class Meta(Base):
    """Key/value facts about the service itself (its epoch, ...)."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
