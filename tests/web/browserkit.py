"""Debian's Chromium driven by Playwright, for the dashboard's tests: browsers cannot be downloaded here,
so Playwright is pointed at ``/usr/bin/chromium`` (``apt-get install chromium``; CI installs it)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("DLSCHED_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


@contextmanager
def browser_page(tmp_path: Path) -> Iterator[Any]:
    """A page of a fresh Chromium with a user-data folder of its own under ``tmp_path``. Without Chromium or
    Playwright the test fails under CI (which installs both) and is skipped elsewhere."""
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed (pip install playwright)"
    if missing is None and not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    profile = tmp_path / "chromium-profile"
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                        args=ARGS, viewport={"width": 1280, "height": 900})
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(20_000)
            yield page
        finally:
            context.close()


def non_blank(png: Path) -> float:
    """The variance of the screenshot's grey levels; a blank (one-colour) page gives 0."""
    import numpy as np
    from matplotlib.image import imread

    pixels = imread(str(png))
    grey = pixels[..., :3].mean(axis=-1)
    return float(np.var(grey))
