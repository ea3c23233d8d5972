"""``dlsched serve``: the scheduler as a long-running service (see docs/service.md).

The modules here are imported one by one, never from this package's namespace, so that the client commands
and the job-spec checks load neither the database layer nor the web framework they do not use:

* :mod:`~dlsched.service.spec`: the job spec a user submits (:class:`JobSubmission`);
* :mod:`~dlsched.service.records`, :mod:`~dlsched.service.models`, :mod:`~dlsched.service.store`: durable state
  (SQLAlchemy on SQLite or PostgreSQL, schema made by the Alembic migrations in ``migrations/``);
* :mod:`~dlsched.service.api`: the HTTP API (FastAPI);
* :mod:`~dlsched.service.options`: the settings of ``dlsched serve`` (:class:`ServeOptions`);
* :mod:`~dlsched.service.extra`: the check that the optional ``service`` extra is installed.
"""
