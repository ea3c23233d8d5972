"""The waiting queue: when each job entered it (the end of its first profile) and its service then.

Hops's latency ratio counts a job's wait from that moment (section 3.1), as the simulator does; a job stored
before this revision has not entered it on record and keeps counting its wait from submission.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("queue_entry_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("service_at_entry_s", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("service_at_entry_s")
        batch.drop_column("queue_entry_s")
