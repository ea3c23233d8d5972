"""Users' OS accounts: the account a dlsched user's jobs run as (``serve user add NAME --os-user ACCOUNT``).

NULL: the user's jobs run as the service's shared job account (``--job-user``).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("os_user", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("os_user")
