"""Explanations stored as changes: a record stands for rounds ``round_no`` through ``last_round``.

The service used to write a record per job, stage and round; it now writes one when a job's decision at a
stage changes, open (``last_round`` NULL: it still holds) until the decision changes or the job leaves the
stage. Rows written before stand for their own round.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("explanations") as batch:
        batch.add_column(sa.Column("last_round", sa.Integer(), nullable=True))
    op.execute("UPDATE explanations SET last_round = round_no")
    op.create_index("ix_explanations_last_round", "explanations", ["last_round"])


def downgrade() -> None:
    op.drop_index("ix_explanations_last_round", "explanations")
    with op.batch_alter_table("explanations") as batch:
        batch.drop_column("last_round")
