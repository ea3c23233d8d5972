"""The service tests' database fixture: ``db_url``, a fresh database of each kind (``apikit`` has the live API
server).

Persistence tests take ``db_url``, run once on SQLite and once on PostgreSQL. The PostgreSQL run needs
``DLSCHED_TEST_POSTGRES_URL`` (``.ci/run`` starts a server and sets it): without it the run is skipped
locally but fails under CI, so a CI machine without PostgreSQL cannot pass by skipping. Each test gets a
schema of its own in that database, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

POSTGRES_ENV = "DLSCHED_TEST_POSTGRES_URL"


@contextmanager
def postgres_schema(base_url: str) -> Iterator[str]:
    """A URL whose connections work in a fresh schema of ``base_url``'s database."""
    import sqlalchemy as sa

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in base_url else "?"
    try:
        yield f"{base_url}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of each kind."""
    if request.param == "sqlite":
        (tmp_path / "state").mkdir()
        yield f"sqlite:///{tmp_path / 'state' / 'dlsched.db'}"
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_ENV} is not set: CI must run the PostgreSQL tests (.ci/run starts a server)")
        pytest.skip(f"{POSTGRES_ENV} is not set (.ci/run starts a PostgreSQL server and sets it)")
    with postgres_schema(base) as url:
        yield url


@pytest.fixture(scope="module")
def ray_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local Ray emulating ray-local-4, one per test module that asks for it (stopped afterwards)."""
    pytest.importorskip("ray")
    from dlsched.runtime.executor import RayExecutor
    from dlsched.runtime.workload import load_cluster

    executor = RayExecutor.local(tmp_path_factory.mktemp("ray-state"), load_cluster("ray-local-4"))
    try:
        yield executor
    finally:
        executor.close(stop_ray=True)
