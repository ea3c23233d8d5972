"""The audit trail, and users that can be removed.

``audit`` holds who submitted, cancelled, set a quota, added or removed a user, rotated or revoked a token,
or reconfigured the service, and when; each row is written in the transaction of the action it records.
``users.removed_s`` marks a removed user: the row stays because the user's jobs name it (their history is
kept), their tokens are deleted, and the name is not given out again.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("time_s", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(80), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.String(200)),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_audit_time_s", "audit", ["time_s"])
    op.create_index("ix_audit_actor", "audit", ["actor"])
    # a plain ALTER TABLE ADD COLUMN on both databases: a batch rebuild of ``users`` would delete every
    # token by its ON DELETE CASCADE while SQLite's foreign keys are on
    op.add_column("users", sa.Column("removed_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("removed_s")
    op.drop_index("ix_audit_actor", "audit")
    op.drop_index("ix_audit_time_s", "audit")
    op.drop_table("audit")
