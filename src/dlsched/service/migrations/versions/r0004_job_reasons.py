"""Why a job waits, and how long its start-up took.

``reason`` and ``reason_detail`` hold the job's waiting reason in Slurm's terms (``Resources``,
``Priority``, ``Quota``, ``Profiling``, ``Held: <why>``, ``Starting``, ``Stopping``), derived each round
from the round's explanations; ``startup_s`` is the start-up its last measured incarnation took (launch to
its first step), which the policies' restart cost uses for that job. A job stored before this revision has
none of them until its next round.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("reason", sa.String(200), nullable=True))
        batch.add_column(sa.Column("reason_detail", sa.Text(), nullable=True))
        batch.add_column(sa.Column("startup_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("startup_s")
        batch.drop_column("reason_detail")
        batch.drop_column("reason")
