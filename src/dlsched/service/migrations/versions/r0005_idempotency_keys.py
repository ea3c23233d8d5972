"""Idempotency keys: the job a user's ``Idempotency-Key`` created, so a retried submission stores one job.

A key is unique per user (two users may pick the same key) and is written in the same transaction as the
job it names: a submission either left both or neither.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("user", sa.String(64), sa.ForeignKey("users.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_s", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
