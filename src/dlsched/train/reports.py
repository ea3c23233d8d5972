"""``reports.jsonl``: what rank 0 tells the service, one JSON object a line.

Appending whole lines with one ``write`` of an ``O_APPEND`` file keeps each report intact even if the
service reads the file while it grows or the worker dies mid-run; every line carries the protocol's
``type``, ``incarnation`` and ``time`` so the service can tell incarnations apart after a restart.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

REPORTS_FILE = "reports.jsonl"


class ReportWriter:
    """Appends reports to ``job_dir/reports.jsonl``; a writer without a folder (standalone, rank > 0) is silent."""

    def __init__(self, job_dir: Path | None, incarnation: int) -> None:
        self.path = None if job_dir is None else job_dir / REPORTS_FILE
        self.incarnation = incarnation

    @property
    def active(self) -> bool:
        return self.path is not None

    def write(self, kind: str, **fields: Any) -> None:
        """Append one report of type ``kind`` with ``fields``."""
        if self.path is None:
            return
        record = {"type": kind, "incarnation": self.incarnation, "time": time.time(), **fields}
        line = (json.dumps(record, allow_nan=False, default=float) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def read_reports(job_dir: Path) -> list[dict[str, Any]]:
    """Every complete report in ``job_dir`` (a torn last line is skipped), in order."""
    path = job_dir / REPORTS_FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
