"""Settings every test shares, made before any test module imports Ray."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

#: Ray 2.60 turns token authentication on for a local cluster when nothing says otherwise, and its
#: ``ray.init()`` then writes ``RAY_AUTH_MODE=token`` into this process's environment: every Ray a later test
#: starts from the same pytest worker (and every process it spawns) inherits it, while the clusters the tests
#: start with ``ray start`` run without tokens, and their workers never register ("actor creation
#: cancelled"). The tests' Rays all run on loopback, without tokens.
RAY_AUTH_MODE = "disabled"
os.environ["RAY_AUTH_MODE"] = RAY_AUTH_MODE

#: The services the tests start keep their state under pytest's folders, which only the test's own account
#: may pass (0700), so their jobs run as the test's account (``--isolation none``, ``dlsched serve``'s
#: documented variables) and may serve several users. The tests of isolation itself
#: (tests/service/test_permissions.py, test_hostile_job.py) start theirs with these taken out.
ISOLATION_ENV = {"DLSCHED_ISOLATION": "none", "DLSCHED_ALLOW_SHARED_ACCOUNT": "1"}
os.environ.update(ISOLATION_ENV)


@pytest.fixture(autouse=True)
def _ray_auth_mode_kept() -> Iterator[None]:
    """Whatever a test's code did to ``RAY_AUTH_MODE``, the next test starts with the suite's."""
    yield
    os.environ["RAY_AUTH_MODE"] = RAY_AUTH_MODE
