"""Stages a test registers are removed after it, so tests never see each other's stages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dlsched import plugins
from dlsched.policies.registry import STAGES


@pytest.fixture(autouse=True)
def fresh_registry() -> Iterator[None]:
    before = {kind: dict(table) for kind, table in STAGES.items()}
    users, files = dict(plugins._USER), dict(plugins._FILES)
    yield
    for kind, table in STAGES.items():
        table.clear()
        table.update(before[kind])
    plugins._USER.clear()
    plugins._USER.update(users)
    plugins._FILES.clear()
    plugins._FILES.update(files)
