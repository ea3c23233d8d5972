"""A service that says what it does: one logfmt line per thing that happened, on stderr and in ``serve.log``.

An operator reading ``STATE/serve.log`` (rotated: 10 MB, three old files kept) or the service's stderr
sees the start with its configuration, each round's decisions in one line (round number, the jobs placed,
moved and preempted, the policy's time), every job transition as it is committed, and the warnings and
errors of the round loop and the executor. Each line is ``key=value`` pairs (logfmt: values with spaces
or quotes are quoted), so ``grep event=transition`` or a log shipper reads them without a parser of its own.

Job transitions are logged from :class:`LoggedStore`, the store the service runs on: its commits are where
the round loop's updates and events become true, so a line is written only for what the database holds.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlsched.service.explanation_store import ExplanationChanges
from dlsched.service.records import ConsumedReports, JobRecord
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

LOG_FILE = "serve.log"
LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 3
#: The logger every service module's logger is under (``dlsched.service.loop``, ...).
SERVICE_LOGGER = "dlsched"

log = logging.getLogger("dlsched.service")


def _value(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list | tuple | set | frozenset):
        text = ",".join(str(v) for v in value)
    elif value is None:
        text = ""
    else:
        text = str(value)
    if text == "" or any(c in text for c in ' "=\\\n\t'):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
    return text


class LogfmtFormatter(logging.Formatter):
    """``time=... level=... logger=... event=... msg="..." key=value ...``: always one line."""

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        fields: dict[str, Any] = {"time": when, "level": record.levelname.lower(), "logger": record.name}
        extra = getattr(record, "fields", None)
        event = getattr(record, "event", None)
        if event:
            fields["event"] = event
        fields["msg"] = record.getMessage()
        if isinstance(extra, dict):
            fields.update({k: v for k, v in extra.items() if k not in ("time", "level", "logger", "msg")})
        if record.exc_info and record.exc_info[0] is not None:
            fields["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
            fields["traceback"] = "".join(traceback.format_exception(*record.exc_info)).strip()
        return " ".join(f"{k}={_value(v)}" for k, v in fields.items())


def setup_logging(state: Path) -> list[logging.Handler]:
    """Send the service's log lines (INFO and above) to stderr and ``STATE/serve.log``; returns the handlers,
    for :func:`teardown_logging`."""
    formatter = LogfmtFormatter()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr),
                                       logging.handlers.RotatingFileHandler(state / LOG_FILE, maxBytes=LOG_BYTES,
                                                                            backupCount=LOG_BACKUPS,
                                                                            encoding="utf-8")]
    root = logging.getLogger(SERVICE_LOGGER)
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False  # not twice on stderr through the command's own root handler
    return handlers


def teardown_logging(handlers: Sequence[logging.Handler]) -> None:
    root = logging.getLogger(SERVICE_LOGGER)
    for handler in handlers:
        root.removeHandler(handler)
        handler.close()
    root.propagate = True


def event(kind: str, message: str, level: int = logging.INFO, /, **fields: Any) -> None:
    """Log one structured line: ``event=kind msg=message`` and the fields."""
    log.log(level, message, extra={"event": kind, "fields": fields})


class LoggedStore(Store):
    """The store the service runs on: every committed round and job transition is also one log line."""

    def commit_round(self, round_no: int, time_s: float, decision: dict[str, Any], policy_s: float,
                     summary: dict[str, Any], job_updates: dict[str, dict[str, Any]],
                     events: list[tuple[str, str, str, dict[str, Any]]],
                     explanations: ExplanationChanges | None = None, consumed: ConsumedReports | None = None) -> None:
        placed = sorted({j for j, kind, _m, _d in events if kind == "placed"})
        before = {j: job.status for j in placed if (job := self.job(j)) is not None}
        super().commit_round(round_no, time_s, decision, policy_s, summary, job_updates, events, explanations,
                             consumed)
        moved = [j for j in placed if before.get(j) == "running"]
        fresh = [j for j in placed if before.get(j) != "running"]
        preempted = sorted({j for j, kind, _m, _d in events if kind == "preempted"})
        profiling = sorted({j for j, kind, _m, _d in events if kind == "profiling"})
        allocations = decision.get("allocations", {}) if isinstance(decision, dict) else {}
        event("round", f"round {round_no}", round=round_no, placed=fresh, moved=moved, preempted=preempted,
              profiling=profiling, running=len(allocations), policy_s=policy_s)
        self._log_transitions(job_updates, events)

    def commit_changes(self, time_s: float, job_updates: dict[str, dict[str, Any]],
                       events: list[tuple[str, str, str, dict[str, Any]]],
                       consumed: ConsumedReports | None = None) -> None:
        super().commit_changes(time_s, job_updates, events, consumed)
        self._log_transitions(job_updates, events)

    def _log_transitions(self, job_updates: dict[str, dict[str, Any]],
                         events: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        for job_id, kind, message, _data in events:
            status = job_updates.get(job_id, {}).get("status")
            level = logging.WARNING if kind == "failed" else logging.INFO
            event("transition", message, level, job=job_id, kind=kind, status=status)

    def request_cancel(self, job_id: str, now_s: float, *, actor: str | None = None) -> JobRecord:
        before = self.job(job_id)
        job = super().request_cancel(job_id, now_s, actor=actor)
        if before is not None and (job.status, job.cancel_requested) != (before.status, before.cancel_requested):
            kind = "cancelled" if job.status == "cancelled" else "cancel-requested"
            event("transition", job.message if kind == "cancelled" and job.message else kind.replace("-", " "),
                  job=job.id, kind=kind, status=job.status)
        return job

    def submit_job(self, user: str, submission: JobSubmission, now_s: float,
                   idempotency_key: str | None = None) -> tuple[JobRecord, bool]:
        job, created = super().submit_job(user, submission, now_s, idempotency_key)
        if created:
            event("transition", f"submitted by {user}", job=job.id, kind="submitted", status=job.status,
                  user=user, name=job.name)
        else:
            event("resubmitted", f"Idempotency-Key of {job.id} sent again by {user}: answered with it", job=job.id,
                  user=user)
        return job, created
