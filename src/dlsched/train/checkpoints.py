"""Checkpoint files: ``step-<n>.pt`` under the job's checkpoint folder, written whole or not at all.

Rank 0 writes a temporary file beside the target, fsyncs it, renames it into place and fsyncs the folder, so
a reader (a resuming incarnation, on any node of the shared folder) sees either the old set of checkpoints or
the new one, never a torn file, and a power loss after the rename cannot bring back the old directory entry
or a file whose data never reached the disk. A process killed between writing and renaming leaves only its
temporary file, which no reader takes for a checkpoint and the next save removes.

The two newest *written* are kept: the service learns of a checkpoint from its report, and a crash between
the rename and the report must leave the checkpoint the service knows of in place. Newest means by write
order, not by step number: a rerun in a used folder starts again at low steps beside the old run's high ones,
and pruning by step number would delete each new checkpoint right after writing it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

KEEP = 2
_NAME = re.compile(r"^step-(\d+)\.pt$")
_TMP = re.compile(r"^\.step-\d+\.pt\.(\d+)\.tmp$")


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


def _by_age(directory: Path) -> list[Path]:
    """The checkpoints in ``directory``, oldest written first (modification time, then step)."""
    found = []
    for step in saved_steps(directory):
        path = checkpoint_file(directory, step)
        try:
            found.append((path.stat().st_mtime_ns, step, path))
        except FileNotFoundError:  # pruned by someone else meanwhile
            continue
    return [path for _, _, path in sorted(found)]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_tmp(directory: Path) -> None:
    """Temporary files of writers that died before their rename (not those of a live process)."""
    for entry in directory.iterdir():
        match = _TMP.match(entry.name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid != os.getpid():
            try:
                os.kill(pid, 0)
                continue  # still running (another writer sharing the folder)
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        entry.unlink(missing_ok=True)


def save(directory: Path, step: int, blob: dict[str, Any]) -> Path:
    """Write ``blob`` as the checkpoint of ``step`` (temporary file, fsync, rename, fsync of the folder);
    keep it and the one written before it."""
    directory.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(directory)
    path = checkpoint_file(directory, step)
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        torch.save(blob, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(directory)
    older = [p for p in _by_age(directory) if p != path]
    for old in older[: max(0, len(older) - (KEEP - 1))]:
        old.unlink(missing_ok=True)
    return path


def load(path: Path) -> dict[str, Any]:
    """The checkpoint at ``path`` on the CPU (moved to devices by the objects that own each part)."""
    blob: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    return blob
