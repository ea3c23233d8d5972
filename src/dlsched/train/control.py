"""What the service asks of a running job: ``control.json`` and SIGTERM.

Rank 0 looks at ``control.json`` at most once per step and parses it only when its modification time
changed, so polling costs one ``stat``; what it read travels to the other ranks in the step's small
all-reduce (see ``session``). A SIGTERM to any rank only raises a flag: stopping happens at the next step
boundary, where all ranks agree, so a checkpoint is never taken half-way through an update.
"""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

CONTROL_FILE = "control.json"


@dataclass(frozen=True)
class Control:
    """One reading of ``control.json``."""

    incarnation: int | None
    batch_size: int | None
    stop: bool


class ControlReader:
    """Reads ``job_dir/control.json`` when it changed since the last reading."""

    def __init__(self, job_dir: Path | None, incarnation: int = 0) -> None:
        self.path = None if job_dir is None else job_dir / CONTROL_FILE
        self.incarnation = incarnation
        self._seen: int | None = None

    def poll(self) -> Control | None:
        """The file's content if it changed since the last call (None if unchanged, absent or unreadable).

        A file written for an earlier incarnation is stale (the ``stop`` that ended the previous workers, say)
        and is ignored until the service writes this incarnation's.

        A file that does not parse is left unseen, so the next step tries again (the service writes it by
        rename, so this only happens if someone edits it by hand).
        """
        if self.path is None:
            return None
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if mtime == self._seen:
            return None
        try:
            raw = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        self._seen = mtime
        if not isinstance(raw, dict):
            return None
        batch = raw.get("batch_size")
        incarnation = raw.get("incarnation")
        if isinstance(incarnation, int) and incarnation < self.incarnation:
            return None
        return Control(incarnation=incarnation if isinstance(incarnation, int) else None,
                       batch_size=batch if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0
                       else None,
                       stop=raw.get("stop") is True)


def superseded(job_dir: Path | None, incarnation: int) -> bool:
    """Whether ``control.json`` already names a newer incarnation than ``incarnation``.

    The fence of the stop protocol: once the service has started the next incarnation (it writes that
    incarnation's ``control.json`` before launching it), a straggler of an older one (a worker that outlived
    its stop, a rank on a node that came back) may no longer write a checkpoint, or it could overwrite the
    step the new incarnation resumed from."""
    if job_dir is None:
        return False
    try:
        raw = json.loads((job_dir / CONTROL_FILE).read_text())
    except (OSError, ValueError):
        return False
    newer = raw.get("incarnation") if isinstance(raw, dict) else None
    return isinstance(newer, int) and not isinstance(newer, bool) and newer > incarnation


class StopSignal:
    """A flag raised by SIGTERM (installed only from the main thread, where Python allows handlers)."""

    def __init__(self) -> None:
        self.raised = False

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.raised = True
