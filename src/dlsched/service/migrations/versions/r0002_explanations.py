"""Explanations: per round, job and stage, why the scheduler decided what it did (docs/service.md).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "explanations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("round_no", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
    )
    op.create_index("ix_explanations_round_no", "explanations", ["round_no"])
    op.create_index("ix_explanations_job_id", "explanations", ["job_id"])


def downgrade() -> None:
    op.drop_table("explanations")
