"""Alembic's environment for the service's schema.

Migrations run only from :func:`dlsched.service.store.migrate`, which hands over an open connection in
``config.attributes["connection"]``; there is no alembic.ini and no URL here, so the schema an installed
wheel creates is exactly the one these files describe.
"""

from __future__ import annotations

from alembic import context

from dlsched.service.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
