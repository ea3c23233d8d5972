"""Checkpoint files: ``step-<n>.pt`` under the job's checkpoint folder, written whole or not at all.

Rank 0 writes a temporary file beside the target and renames it, so a reader (a resuming incarnation, on
any node of the shared folder) sees either the old set of checkpoints or the new one, never a torn file.
The last two are kept: the service learns of a checkpoint from its report, and a crash between the rename
and the report must leave the checkpoint the service knows of in place.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

KEEP = 2
_NAME = re.compile(r"^step-(\d+)\.pt$")


def checkpoint_file(directory: Path, step: int) -> Path:
    """Where the checkpoint of ``step`` lives."""
    return directory / f"step-{step}.pt"


def saved_steps(directory: Path) -> list[int]:
    """Steps with a checkpoint in ``directory``, ascending."""
    if not directory.is_dir():
        return []
    steps = []
    for entry in directory.iterdir():
        match = _NAME.match(entry.name)
        if match:
            steps.append(int(match.group(1)))
    return sorted(steps)


def save(directory: Path, step: int, blob: dict[str, Any]) -> Path:
    """Write ``blob`` as the checkpoint of ``step`` (temporary file, then rename); keep only the last two."""
    directory.mkdir(parents=True, exist_ok=True)
    path = checkpoint_file(directory, step)
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    torch.save(blob, tmp)
    os.replace(tmp, path)
    for old in saved_steps(directory)[:-KEEP]:
        checkpoint_file(directory, old).unlink(missing_ok=True)
    return path


def load(path: Path) -> dict[str, Any]:
    """The checkpoint at ``path`` on the CPU (moved to devices by the objects that own each part)."""
    blob: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    return blob
