"""The measurement window: the jobs a run's metrics cover, by submission order or submission time.

Papers measure a loaded cluster, not its warm-up and cool-down: Gavel's scripts take ``--window-start`` and
``--window-end`` as job ids and report only the jobs submitted between them. A bound here is written
``100j`` (the 100th job by submission order, counting from 0) or ``2h`` / ``90m`` / ``3600s`` (submission
time since the trace's start); the window is ``[start, end)``, either bound may be left open, and the two may
use different units. The whole run is simulated either way; only the summary narrows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dlsched.core import InputError
from dlsched.sim.records import JobRecord

_BOUND = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(j|jobs?|h|m|s)\s*$", re.IGNORECASE)
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


@dataclass(frozen=True)
class Bound:
    """One end of the window: a job index (``jobs``) or a submission time in seconds (``seconds``)."""

    value: float
    unit: str  # "jobs" or "seconds"

    def text(self) -> str:
        if self.unit == "jobs":
            return f"{int(self.value)}j"
        hours = self.value / 3600.0
        return f"{hours:g}h" if hours.is_integer() or self.value >= 3600 else f"{self.value:g}s"


def parse_bound(text: str, field: str) -> Bound:
    """``100j`` -> job 100; ``2h``, ``90m``, ``3600s`` -> seconds; anything else an InputError naming ``field``."""
    m = _BOUND.match(str(text))
    if m is None:
        raise InputError(f"expected a number of jobs (100j) or a time (2h, 90m, 3600s), got {text!r}", field=field)
    number, unit = float(m.group(1)), m.group(2).lower()
    if unit.startswith("j"):
        if not number.is_integer():
            raise InputError(f"a job bound is a whole number of jobs, got {text!r}", field=field)
        return Bound(number, "jobs")
    return Bound(number * _SECONDS[unit], "seconds")


def describe(start: str | None, end: str | None) -> str | None:
    """``window 100j-1100j`` for a header, or None without a window."""
    if start is None and end is None:
        return None
    lo = parse_bound(start, "window_start").text() if start is not None else "start"
    hi = parse_bound(end, "window_end").text() if end is not None else "end"
    return f"window {lo}-{hi}"


def check_order(start: str | None, end: str | None) -> None:
    """Refuse a window whose end is not after its start (when both bounds use the same unit)."""
    if start is None or end is None:
        return
    lo, hi = parse_bound(start, "window_start"), parse_bound(end, "window_end")
    if lo.unit == hi.unit and lo.value >= hi.value:
        raise InputError(f"the window's end ({end}) must come after its start ({start})", field="window_end")


def _index_of(bound: Bound | None, ordered: Sequence[JobRecord], default: int) -> int:
    if bound is None:
        return default
    if bound.unit == "jobs":
        return min(int(bound.value), len(ordered))
    return next((i for i, j in enumerate(ordered) if j.submit_s >= bound.value), len(ordered))


def in_window(ordered: Sequence[JobRecord], start: str | None, end: str | None) -> list[JobRecord]:
    """The jobs of ``ordered`` (in submission order) submitted inside ``[start, end)``."""
    if start is None and end is None:
        return list(ordered)
    lo = _index_of(parse_bound(start, "window_start") if start is not None else None, ordered, 0)
    hi = _index_of(parse_bound(end, "window_end") if end is not None else None, ordered, len(ordered))
    return list(ordered[lo:max(lo, hi)])


def window_note(total: int, covered: int, start: str | None, end: str | None) -> str | None:
    """A warning when the window keeps none of the run's jobs (its summary then covers nothing)."""
    what = describe(start, end)
    if what is None or covered > 0:
        return None
    return f"the {what} holds none of the run's {total} jobs; the summary covers no job"
