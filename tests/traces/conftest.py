"""Fixtures for the trace tests: the data directory (skipping when absent) and a temp-file writer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dlsched.datadir import data_dir


@pytest.fixture
def data() -> Path:
    """The measured-data directory; tests that read real traces skip with a reason when it is absent."""
    base = data_dir()
    if base is None:
        pytest.skip("measured data directory not found (set DLSCHED_DATA or check out ../shared/data)")
    return base


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a small hand-made trace file and return its path."""
    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return _write

