"""Explanations as the store keeps them: one row per change of a job's decision at a stage.

A round's records are mostly the round before's again: a queued job stays "rank 4", "allocated no GPUs",
round after round. Writing every one of them (three to five records per job and round) made the
explanations most of a round's database work at 10,000 GPUs and grew the table by millions of rows a day;
so the service stores what the recorder hands over as changes (:meth:`dlsched.policies.reasons.Recorder.
take_changes`): a row opens when a decision changes and closes (``last_round``) when it changes again or
the job leaves the stage. An open row stands for every round committed since it opened. A service that
starts, or rebuilds its stages, closes the open rows first: its recorder starts afresh. Retention
(``--explain-keep-rounds``) deletes the rows that closed longer ago than that; an open row, a job's
current reason, is never deleted.

A mixin of :class:`dlsched.service.store.Store`, as :class:`dlsched.service.job_reports.JobReports` is.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, and_, bindparam, delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from dlsched.service import models as m

#: The ``stage`` key of the record that says how a job without statistics is treated (its record's own
#: stage is ``admission``, which the recorder's admission record of the same job holds).
SILENT_STAGE = "silent"


@dataclass
class ExplanationChanges:
    """What one round changes in the explanations table."""

    #: (stage key, record): new rows; a record without ``last_round`` opens, one with it is closed already.
    opened: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: (job, stage key, last_round): open rows that close.
    closed: list[tuple[str, str, int]] = field(default_factory=list)
    #: Every open row closes at this round before anything else (a fresh recorder: a start, new stages).
    close_open_at: int | None = None
    #: Closed rows whose last round is more than this many rounds before the round are deleted (None: kept).
    keep_rounds: int | None = None


def write_explanations(s: Session, round_no: int, changes: ExplanationChanges) -> None:
    """Apply a round's changes inside its transaction (closings first, so that a decision that changed
    closes its old row before the new one opens)."""
    if changes.close_open_at is not None:
        s.execute(update(m.Explanation).where(m.Explanation.last_round.is_(None))
                  .values(last_round=changes.close_open_at))
    if changes.closed:
        table = m.Explanation.__table__
        assert isinstance(table, Table)
        s.connection().execute(
            update(table).where(and_(table.c.job_id == bindparam("j"), table.c.stage == bindparam("s"),
                                     table.c.last_round.is_(None)))
            .values(last_round=bindparam("lr")),
            [{"j": job, "s": stage, "lr": last} for job, stage, last in changes.closed])
    if changes.opened:
        s.execute(insert(m.Explanation), [
            {"round_no": int(r["round"]), "last_round": r.get("last_round"), "job_id": r["job"],
             "stage": stage[:16], "record": {k: v for k, v in r.items() if k != "last_round"}}
            for stage, r in changes.opened])
    if changes.keep_rounds is not None:
        s.execute(delete(m.Explanation).where(m.Explanation.last_round < round_no - changes.keep_rounds))


class Explanations:
    """Reads of the explanations table, over the store's sessions."""

    if TYPE_CHECKING:
        def _read(self) -> AbstractContextManager[Session]: ...

    def explanations(self, job_id: str, round_no: int | None = None) -> list[dict[str, Any]]:
        """The job's explanation records, each with the rounds it stands for (``round``..``last_round``; an
        open one through the last committed round), oldest first in the order the stages recorded them;
        with ``round_no``, the records that stand for that round."""
        q = select(m.Explanation).where(m.Explanation.job_id == job_id)
        if round_no is not None:
            q = q.where(m.Explanation.round_no <= round_no,
                        or_(m.Explanation.last_round.is_(None), m.Explanation.last_round >= round_no))
        with self._read() as s:
            last = s.execute(select(func.max(m.Round.round_no))).scalar_one()
            rows = s.execute(q.order_by(m.Explanation.round_no, m.Explanation.id)).scalars().all()
            out = []
            for e in rows:
                end = e.last_round if e.last_round is not None else max(e.round_no, last if last is not None else 0)
                if round_no is not None and e.last_round is None and round_no > end:
                    continue  # a round not committed yet
                out.append({**e.record, "last_round": end})
            return out
