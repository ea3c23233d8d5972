"""The service's first schema: users, tokens, quotas, jobs, events, rounds, telemetry, observations, meta.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("team", sa.String(64), nullable=True),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("created_s", sa.Float(), nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user", sa.String(64), sa.ForeignKey("users.name", ondelete="CASCADE"), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_s", sa.Float(), nullable=False),
    )
    op.create_index("ix_tokens_user", "tokens", ["user"])
    op.create_table(
        "quotas",
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("borrowing_limit", sa.Integer(), nullable=True),
    )
    op.create_table(
        "jobs",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=True, unique=True),
        sa.Column("user", sa.String(64), sa.ForeignKey("users.name"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("submission", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("submitted_s", sa.Float(), nullable=False),
        sa.Column("started_s", sa.Float(), nullable=True),
        sa.Column("finished_s", sa.Float(), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_type", sa.String(32), nullable=True),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=True),
        sa.Column("incarnation", sa.Integer(), nullable=False),
        sa.Column("steps_done", sa.Integer(), nullable=False),
        sa.Column("last_checkpoint_step", sa.Integer(), nullable=False),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("preemptions", sa.Integer(), nullable=False),
        sa.Column("attained_gpu_s", sa.Float(), nullable=False),
        sa.Column("attained_service_s", sa.Float(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("profiled_types", sa.JSON(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_index("ix_jobs_user", "jobs", ["user"])
    children: tuple[tuple[str, list[Any]], ...] = (
        ("events", [sa.Column("time_s", sa.Float(), nullable=False), sa.Column("kind", sa.String(32), nullable=False),
                    sa.Column("message", sa.Text(), nullable=False), sa.Column("data", sa.JSON(), nullable=False)]),
        ("telemetry", [sa.Column("time_s", sa.Float(), nullable=True), sa.Column("type", sa.String(16), nullable=True),
                       sa.Column("report", sa.JSON(), nullable=False)]),
        ("observations", [sa.Column("kind", sa.String(16), nullable=False),
                          sa.Column("time_s", sa.Float(), nullable=False), sa.Column("data", sa.JSON(), nullable=False)]),
    )
    for table, columns in children:
        op.create_table(
            table,
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
            *columns,
        )
        op.create_index(f"ix_{table}_job_id", table, ["job_id"])
    op.create_table(
        "rounds",
        sa.Column("round_no", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("time_s", sa.Float(), nullable=False),
        sa.Column("decision", sa.JSON(), nullable=False),
        sa.Column("policy_s", sa.Float(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
    )
    op.create_table(
        "meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    for table in ("meta", "rounds", "observations", "telemetry", "events", "jobs", "quotas", "tokens", "users"):
        op.drop_table(table)
