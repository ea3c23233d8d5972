"""Shared by the experiment tests: importing experiment modules without letting them change the environment."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def import_experiments(*names: str) -> list[ModuleType]:
    """The named modules of experiments/; ``DLSCHED_DATA`` is restored afterwards (some of them set it when
    it is unset)."""
    saved = os.environ.get("DLSCHED_DATA")
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    try:
        return [importlib.import_module(name) for name in names]
    finally:
        if saved is None:
            os.environ.pop("DLSCHED_DATA", None)
        else:
            os.environ["DLSCHED_DATA"] = saved
