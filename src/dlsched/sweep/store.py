"""Finished cells, one JSON file each under ``<sweep folder>/cells/``: what makes a sweep resumable.

A cell's file is named by the digest of its configuration (:attr:`~dlsched.sweep.config.Cell.key`) and
written to a temporary file then renamed, so an interrupted sweep leaves only whole results behind and a
rerun skips exactly the cells that finished.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dlsched.core import InputError
from dlsched.sweep.config import Cell


class CellStore:
    """The ``cells/`` folder of a sweep."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder).expanduser()
        self.cells_dir = self.folder / "cells"
        if self.folder.exists() and not self.folder.is_dir():
            raise InputError("exists and is not a folder", source=str(self.folder))

    def path(self, cell: Cell) -> Path:
        return self.cells_dir / f"{cell.key}.json"

    def done(self, cell: Cell) -> bool:
        return self.path(cell).is_file()

    def load(self, cell: Cell) -> dict[str, Any]:
        """The stored record of a finished cell (label, resolved configuration, summary)."""
        path = self.path(cell)
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"unreadable cell result ({exc}); delete it to rerun the cell", source=str(path)) \
                from None

    def save(self, cell: Cell, record: dict[str, Any]) -> Path:
        """Write one finished cell's record atomically."""
        self.cells_dir.mkdir(parents=True, exist_ok=True)
        target = self.path(cell)
        fd, tmp = tempfile.mkstemp(prefix=".cell-", suffix=".json", dir=self.cells_dir)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump({**record, "cell": cell.label, "key": cell.key}, fh, indent=1)
                fh.write("\n")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target
