"""The round loop's copy of the active jobs' rows, kept between rounds so that a round reads what changed.

A round needs every active job (queued, held, profiling, running), and with 100,000 queued jobs reading and
validating every row each round costs seconds. The loop itself writes almost every change to these rows
(in its round's commit); it folds what it committed into its copy. The rest comes from other writers, and
only through two doors: the API adds jobs and asks for cancels (a queued job's cancel ends it at once). So
each round reads every active job's id and cancel flag (one narrow query, no row validated) and loads the
full rows only of jobs it has not seen, or whose flag moved; jobs no longer active leave the copy. A write
the loop makes outside a commit (a launch that failed) drops that job's row, which the next round reads
again. After a restart the copy starts empty: the first round reads every row, as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dlsched.service.records import FINISHED_STATUSES, JobRecord
from dlsched.service.store import Store


class ActiveJobs:
    """The active jobs' rows as of the last commit (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._rows: dict[str, JobRecord] = {}

    def current(self) -> dict[str, JobRecord]:
        """Every active job's row, in submission order, read from the database only where it may differ."""
        flags = self.store.active_job_flags()
        for gone in [j for j in self._rows if j not in flags]:
            del self._rows[gone]
        stale = [j for j, cancel in flags.items()
                 if (row := self._rows.get(j)) is None or row.cancel_requested != cancel]
        for row in self.store.jobs_by_id(stale):
            self._rows[row.id] = row
        return {j: self._rows[j] for j in flags if j in self._rows}

    def committed(self, updates: dict[str, dict[str, Any]]) -> None:
        """``updates`` are in the database now: the copy takes them (a job that ended leaves it)."""
        for job_id, fields in updates.items():
            row = self._rows.get(job_id)
            if row is None or not fields:
                continue
            row = dataclasses.replace(row, **_as_read(fields))
            if row.status in FINISHED_STATUSES:
                del self._rows[job_id]
            else:
                self._rows[job_id] = row

    def forget(self, job_id: str) -> None:
        """The job's row was written outside a commit: read it again next round."""
        self._rows.pop(job_id, None)


def _as_read(fields: dict[str, Any]) -> dict[str, Any]:
    """Fields as a row read back from the database holds them (the store normalises these two on write)."""
    out = dict(fields)
    if "placement" in out:
        out["placement"] = {str(k): [int(g) for g in v] for k, v in (out["placement"] or {}).items()}
    if "profiled_types" in out:
        out["profiled_types"] = tuple(out["profiled_types"])
    return out
