"""The round loop's side of explanations stored as changes (:mod:`dlsched.service.explanation_store`).

Each round the scheduler's recorder hands over what changed (records opened, earlier ones closed); this
turns that into the round's :class:`ExplanationChanges` and keeps every job's current records, which the
waiting reasons are read from (:mod:`dlsched.service.waiting`), so a round builds and stores records only
for the jobs whose decision changed. The record saying how a job without statistics is treated
(:mod:`dlsched.service.silent`) opens once, when the job is found silent, and closes when it leaves the
scheduler's view.
"""

from __future__ import annotations

from typing import Any

from dlsched.core import JobSpec
from dlsched.explain.records import plain_records
from dlsched.policies.reasons import take_explanation_changes
from dlsched.service.explanation_store import SILENT_STAGE, ExplanationChanges
from dlsched.service.silent import explanation as silent_record

#: job -> stage -> its record that stands for the current round.
Current = dict[str, dict[str, dict[str, Any]]]


class ExplanationLog:
    """What the loop keeps of the explanations between rounds (see the module docstring)."""

    def __init__(self, keep_rounds: int | None = None) -> None:
        self.keep_rounds = keep_rounds
        self.current: Current = {}
        #: Each ordered job's exact rank in the last round.
        self.ranks: dict[str, int] = {}
        self._silent: set[str] = set()
        self._fresh = True
        #: The changes handed out and not yet committed (a round whose commit failed): they go with the next.
        self._pending: ExplanationChanges | None = None

    def restart(self) -> None:
        """The scheduler was built afresh (its recorder knows nothing): the next round closes every open row
        and stores every record again."""
        self.current, self.ranks, self._silent, self._fresh = {}, {}, set(), True

    def take(self, scheduler: Any, round_no: int, time_s: float, silent: dict[str, JobSpec]) -> ExplanationChanges:
        """The changes of round ``round_no`` (``silent``: the jobs in the view that report nothing, with
        their specs), and :attr:`current` and :attr:`ranks` brought up to it."""
        got = take_explanation_changes(scheduler, round_no)
        changes = ExplanationChanges(keep_rounds=self.keep_rounds)
        if self._fresh:
            changes.close_open_at, self._fresh = round_no - 1, False
        for job, stage, last in got.closed:
            changes.closed.append((job, stage, last))
            mine = self.current.get(job)
            if mine is not None:
                mine.pop(stage, None)
                if not mine:
                    del self.current[job]
        for rec in plain_records(got.opened):
            changes.opened.append((str(rec["stage"]), rec))
            if "last_round" not in rec:
                self.current.setdefault(str(rec["job"]), {})[str(rec["stage"])] = rec
        for job in sorted(self._silent - silent.keys()):
            changes.closed.append((job, SILENT_STAGE, round_no - 1))
        for job in sorted(silent.keys() - self._silent):
            changes.opened.append((SILENT_STAGE, silent_record(job, round_no, time_s, scheduler.name, silent[job])))
        self._silent = set(silent)
        self.ranks = got.ranks
        if self._pending is not None:
            changes = _after(self._pending, changes)
        self._pending = changes
        return changes

    def committed(self) -> None:
        """The changes last taken are in the database."""
        self._pending = None


def _after(old: ExplanationChanges, new: ExplanationChanges) -> ExplanationChanges:
    """The changes of a round whose commit failed followed by the next round's, as one: a record the first
    opened and the second closes goes in closed (its row does not exist yet to be updated)."""
    ends = {(job, stage): last for job, stage, last in new.closed}
    opened: list[tuple[str, dict[str, Any]]] = []
    for stage, rec in old.opened:
        if "last_round" not in rec:
            last = ends.pop((str(rec["job"]), stage), new.close_open_at)
            if last is not None:
                rec = {**rec, "last_round": last}
        opened.append((stage, rec))
    closed = old.closed + [(job, stage, last) for (job, stage), last in ends.items()]
    return ExplanationChanges(opened + new.opened, closed,
                              old.close_open_at if old.close_open_at is not None else new.close_open_at,
                              new.keep_rounds)
