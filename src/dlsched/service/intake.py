"""Taking in jobs' reports so that a crash at any moment neither loses one nor counts one twice.

The loop reads each job's ``reports.jsonl`` past the offset the database holds. What it read stays pending
(:class:`~dlsched.service.records.ConsumedReports`) until the round that acts on it commits, and the store
writes the new offsets, the lines as telemetry and the observations made of them in the same transaction as
the job updates they cause. A round that fails, or a service killed before the commit, leaves the offsets
where they were: the next round, or the next start, reads the same lines again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dlsched.core.view import GradientObservation, ThroughputObservation
from dlsched.service.records import ConsumedReports, JobRecord
from dlsched.service.reports import REPORTS_FILE, digest, read_new_reports
from dlsched.service.store import REPORTS_OFFSET, Store


class ReportIntake:
    """The reports a round has read and not yet committed, over the offsets the database holds."""

    def __init__(self, store: Store, jobs_dir: Path) -> None:
        self.store, self.jobs_dir = store, jobs_dir
        self._jobs_dir = str(jobs_dir)
        #: Offsets known to be committed (read from the database on first use).
        self._committed: dict[str, int] = {}
        self.pending = ConsumedReports()

    def begin(self) -> None:
        """Start a round afresh: what a failed round read and never committed is read again."""
        self.pending = ConsumedReports()

    def read(self, job_id: str) -> list[dict[str, Any]]:
        """The job's complete report lines past what was read, held pending until :meth:`take`."""
        path, at = self._path(job_id), self._offset(job_id)
        try:  # a stat, not an open, for the many jobs that wrote nothing since (most of a long queue)
            if os.stat(path).st_size <= at:
                return []
        except OSError:
            return []
        reports, offset = read_new_reports(Path(path), at)
        if reports:
            self.pending.add_reports(job_id, reports, offset)
        return reports

    def observe(self, job_id: str, throughput: list[ThroughputObservation],
                gradient: list[GradientObservation]) -> None:
        """Observations made of reports read this round, stored with them."""
        if throughput or gradient:
            self.pending.add_observations(job_id, throughput, gradient)

    def take(self) -> ConsumedReports:
        """What was read since :meth:`begin`, for the commit that acts on it."""
        consumed, self.pending = self.pending, ConsumedReports()
        return consumed

    def committed(self, consumed: ConsumedReports) -> None:
        """The commit of ``consumed`` succeeded: its offsets are the new starting points."""
        self._committed.update(consumed.offsets)

    def catch_up(self, job: JobRecord, up: dict[str, Any], now_s: float) -> None:
        """Read what a stopped job wrote on its way out, so it resumes from its newest checkpoint."""
        reports = self.read(job.id)
        if not reports:
            return
        d = digest(reports, incarnation=job.incarnation, gpu_type=None, num_nodes=1, now_s=now_s)
        if d.last_checkpoint_step is not None:
            up["last_checkpoint_step"] = max(d.last_checkpoint_step, up.get("last_checkpoint_step", 0),
                                             job.last_checkpoint_step)
        if d.steps_done is not None:
            up["steps_done"] = max(d.steps_done, up.get("steps_done", job.steps_done))

    def prefetch(self, job_ids: list[str]) -> None:
        """Read the committed offsets of many jobs at once (jobs never read have none: 0)."""
        todo = [j for j in job_ids if j not in self._committed]
        known = self.store.meta_many([REPORTS_OFFSET + j for j in todo])
        for j in todo:
            self._committed[j] = int(known.get(REPORTS_OFFSET + j) or 0)

    def _offset(self, job_id: str) -> int:
        pending = self.pending.offsets.get(job_id)
        if pending is not None:
            return pending
        if job_id not in self._committed:
            self._committed[job_id] = self.store.reports_offset(job_id)
        return self._committed[job_id]

    def _path(self, job_id: str) -> str:
        return f"{self._jobs_dir}{os.sep}{job_id}{os.sep}{REPORTS_FILE}"  # no pathlib: called per job and round
