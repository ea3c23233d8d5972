"""Settling what a job's workers did: succeeded, failed, crashed in a profile, lost, hung.

A part of the round loop (:class:`~dlsched.service.loop.RoundLoop` mixes it in), kept apart because its
rules are what a team relies on to trust the service: a failure is counted and retried up to the job's
``max_failures`` from its last checkpoint; a command that cannot start at all (exit 126 or 127, as a shell
reports a missing program or working folder) fails at once, since no retry can help; a profile run that
crashes is a failure of the job like any other (its log is the job's, shown by ``dlsched logs``), never a
profile that silently measured nothing and left the job waiting for GPUs forever. Every terminal state
carries a one-line reason in the job's ``message``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlsched.core import Cluster
from dlsched.runtime.executor_api import Executor, RankStatus, log_path
from dlsched.service.intake import ReportIntake
from dlsched.service.loop_state import (
    EXIT_CANNOT_START,
    EXIT_NO_CHECKPOINT,
    PROFILE_START_S,
    JobMemory,
    LoopOptions,
)
from dlsched.service.records import JobRecord
from dlsched.service.reports import REPORTS_FILE, digest, read_new_reports, write_control
from dlsched.service.silent import SILENT, unit_speed
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

log = logging.getLogger(__name__)

Events = list[tuple[str, str, str, dict[str, Any]]]

#: How much of a log's end a failure's reason quotes.
_LOG_TAIL_BYTES = 4096


def last_log_line(path: Path) -> str | None:
    """The last non-empty line of a rank's log (the error a crash printed, usually), shortened to one line."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - _LOG_TAIL_BYTES))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip() and not ln.startswith("==== dlsched job")]
    if not lines:
        return None
    line = "".join(ch if ch.isprintable() else "?" for ch in lines[-1])
    return line if len(line) <= 200 else line[:197] + "..."


def cannot_start(codes: list[int | None]) -> int | None:
    """The exit code that says the command could not be started at all, if any rank exited so."""
    return next((c for c in codes if c in EXIT_CANNOT_START), None)


def reserved(submission: JobSubmission) -> dict[str, Any]:
    """What each rank of the job reserves on its node (Ray's CPUs and memory) and may use, from its spec's
    ``resources``; nothing reserved when the spec names none."""
    res = submission.resources
    if res is None:
        return {}
    return {"cpus_per_rank": res.cpus_per_worker, "memory_bytes_per_rank": int(res.memory_gb_per_worker * 2**30)}


class WorkerSettling:
    """The settling rules (see the module docstring), over the loop's executor, intake and memory."""

    executor: Executor
    options: LoopOptions
    intake: ReportIntake
    clock: Callable[[], float]
    store: Store
    cluster: Cluster | None

    def _job_dir(self, job_id: str) -> Path:
        return self.options.jobs_dir / job_id

    def _settle_workers(self, job: JobRecord, mem: JobMemory, now: float, up: dict[str, Any],
                        events: Events) -> None:
        ranks = self.executor.poll(job.id)
        states = [str(r.state) for r in ranks]
        if ranks and all(s == "running" for s in states):
            start = mem.launched_s or now
            if not mem.silent and not mem.started_report and now - start >= self.options.silent_after_s:
                self._mark_silent(job, mem, now, up, events)
            quiet = now - max(mem.last_report_s or start, start)
            if quiet > self.options.hang_s and not mem.silent:  # a script that reports nothing never hangs so
                self.executor.stop([job.id], grace_s=0.0)
                self._fail(job, up, events, f"no report for {quiet:.0f} s: hung")
            return
        if not ranks or "lost" in states:
            self.executor.stop([job.id], grace_s=0.0)
            mem.hold_until = now + 0.5 * self.options.round_s
            self._requeue(job, up, events, "lost", f"its workers were lost (node or process gone); resumes from "
                          f"checkpoint step {up.get('last_checkpoint_step', job.last_checkpoint_step)}")
            return
        codes = [r.exit_code for r in ranks if str(r.state) == "exited"]
        if any(s == "running" for s in states):
            if all(c == 0 for c in codes):
                return  # ranks finishing one after another
            self.executor.stop([job.id], grace_s=self.options.stop_grace_s)
        self.executor.forget(job.id)
        if self._missing_checkpoint(job, mem, codes):
            msg = up.get("message") or job.message or "its checkpoint could not be found on resume"
            self._end(job, up, events, "failed", msg, now)
        elif all(c == 0 for c in codes):
            up["progress"] = 1.0
            self._end(job, up, events, "succeeded",
                      f"finished at step {up.get('steps_done', job.steps_done)}", now)
        elif any(r.reason == "memory" for r in ranks):
            res = job.submission.resources
            limit = f"{res.memory_gb_per_worker:g} GB" if res is not None else "its memory"
            self._end(job, up, events, "failed", f"stopped: a worker's processes used more than the {limit} "
                      f"per worker it reserved (resources.memory_gb_per_worker)", now)
        elif (code := cannot_start(codes)) is not None:
            self._end(job, up, events, "failed", self._why_exit(job.id, ranks, code, start=True), now)
        else:
            bad = sorted({c for c in codes if c != 0}, key=lambda c: -1 if c is None else c)
            self._fail(job, up, events, self._why_exit(job.id, ranks, bad[0]))

    @staticmethod
    def _missing_checkpoint(job: JobRecord, mem: JobMemory, codes: list[int | None]) -> bool:
        """A rank exited with dlsched.train's "checkpoint to resume from is missing" code, and it can mean that:
        the incarnation was launched to resume (the job has a checkpoint step) and never stepped. Retrying
        cannot bring the checkpoint back, so the job fails at once; any other exit 3 (a script's own, or a
        first run's) is an ordinary failure, retried up to ``max_failures``."""
        return job.last_checkpoint_step > 0 and not mem.stepped and EXIT_NO_CHECKPOINT in codes

    def _mark_silent(self, job: JobRecord, mem: JobMemory, now: float, up: dict[str, Any], events: Events) -> None:
        """The job reports nothing (:mod:`dlsched.service.silent`): remembered in the store, never profiled
        again, valued at unit speed on every GPU type."""
        mem.silent = True
        self.store.meta_set(SILENT + job.id, repr(now))
        if self.cluster is not None:
            spec = job.submission.to_job_spec(job.id, 0.0, job.user)
            mem.new_tput.extend(unit_speed(spec, self.cluster, now))
            up["profiled_types"] = tuple(t for t in self.cluster.type_names if spec.allows_gpu_type(t))
        events.append((job.id, "no-reports", f"it ran {self.options.silent_after_s:g} s without dlsched.train's "
                       f"start report: scheduled without statistics, resumed from its own snapshots", {}))

    def _enforce_wall_time(self, job: JobRecord, now: float, since_s: float, up: dict[str, Any],
                           events: Events) -> bool:
        """A running job past its ``wall_time_s`` (its attained service, Slurm's time limit) is stopped with
        a checkpoint and ends ``timeout``. True when it was."""
        limit = job.submission.wall_time_s
        ran = job.attained_service_s + max(0.0, now - max(since_s, job.started_s or since_s))
        if limit is None or job.status != "running" or ran < limit:
            return False
        write_control(self._job_dir(job.id), incarnation=job.incarnation, batch_size=None, stop=True)
        self.executor.stop([job.id], grace_s=self.options.stop_grace_s)
        self.intake.catch_up(job, up, now)
        step = up.get("last_checkpoint_step", job.last_checkpoint_step)
        self._end(job, up, events, "timeout", f"reached its wall time of {limit:g} s; stopped with its "
                                              f"checkpoint at step {step}", now)
        return True

    def _why_exit(self, job_id: str, ranks: list[RankStatus], code: int | None, *, start: bool = False,
                  job_dir: Path | None = None, what: str = "a worker") -> str:
        """One line: which rank exited how, and the last line it printed."""
        rank = next((r.rank for r in ranks if r.exit_code == code), 0)
        line = last_log_line(log_path(job_dir or self._job_dir(job_id), rank))
        head = (f"the command could not start (exit {code}: not found, not executable, or its working_dir is "
                f"missing)" if start else f"{what} (rank {rank}) exited with code {code}")
        return head + (f": {line}" if line else "")

    def _end(self, job: JobRecord, up: dict[str, Any], events: Events, status: str, reason: str,
             now: float) -> None:
        """A terminal state, with its one-line reason."""
        self.executor.forget(job.id)
        up.update(status=status, finished_s=now, placement={}, gpus=0, gpu_type=None, message=reason)
        events.append((job.id, status, reason if status != "failed" else f"failed: {reason}", {}))

    def _fail(self, job: JobRecord, up: dict[str, Any], events: Events, why: str) -> None:
        failures = job.failures + 1
        limit = job.submission.max_failures
        if failures > limit:
            self.executor.forget(job.id)
            up.update(status="failed", finished_s=self.clock(), placement={}, gpus=0, gpu_type=None,
                      failures=failures, message=f"{why}; failed {failures} times (max_failures {limit})")
            events.append((job.id, "failed", up["message"], {"failures": failures}))
            return
        up["failures"] = failures
        self._requeue(job, up, events, "failure", f"{why} (failure {failures} of at most {limit}); resumes "
                      f"from checkpoint step {up.get('last_checkpoint_step', job.last_checkpoint_step)}")

    def _requeue(self, job: JobRecord, up: dict[str, Any], events: Events, kind: str, message: str) -> None:
        self.executor.forget(job.id)
        up.update(status="queued", placement={}, gpus=0, gpu_type=None)
        events.append((job.id, kind, message, {}))

    def _settle_profiles(self, job: JobRecord, mem: JobMemory, now: float, up: dict[str, Any],
                         events: Events) -> None:
        """Profile runs that ended (or ran their time) give the job its profiled types; one that crashed is
        a failure of the job."""
        if not mem.profiles:
            if job.status == "profiling":
                up["status"] = "queued"
            return
        finished: dict[str, list[RankStatus]] = {}
        for key, (gtype, _gpu, end_s) in mem.profiles.items():
            ranks = self.executor.poll(key)
            # a profile's time counts from its first step: start-up (imports, data, model) measures nothing
            reports, _ = read_new_reports(self._job_dir(job.id) / "profiles" / gtype / REPORTS_FILE, 0)
            started = [float(r.get("time", now)) for r in reports if r.get("type") == "start"]
            stepped = bool(started) and now - started[0] >= self.options.profile_s
            launched = end_s - self.options.profile_s - PROFILE_START_S
            if not started and now - launched >= self.options.silent_after_s and not mem.silent:
                self._mark_silent(job, mem, now, up, events)  # a profile of it measures nothing
            if now >= end_s or stepped or mem.silent or not ranks or all(str(r.state) != "running" for r in ranks):
                finished[key] = ranks
        if finished:
            self.executor.stop(list(finished), grace_s=0.0)
        crashed: tuple[str, list[RankStatus], int | None] | None = None
        for key, ranks in finished.items():
            gtype = mem.profiles.pop(key)[0]
            self.executor.forget(key)
            codes = [r.exit_code for r in ranks if str(r.state) == "exited"]
            ended_alone = bool(ranks) and all(str(r.state) == "exited" for r in ranks)
            if ended_alone and any(c not in (0, None) for c in codes) and crashed is None:
                crashed = (gtype, ranks, next(c for c in codes if c not in (0, None)))
                continue
            reports, _ = read_new_reports(self._job_dir(job.id) / "profiles" / gtype / REPORTS_FILE, 0)
            d = digest(reports, incarnation=0, gpu_type=gtype, num_nodes=1, now_s=now)
            types = tuple(sorted({*job.profiled_types, *up.get("profiled_types", ()), gtype}))
            up["profiled_types"] = types
            if d.throughput:
                self.intake.observe(job.id, d.throughput, [])
                mem.new_tput.extend(d.throughput)
            events.append((job.id, "profiled", f"profiled on {gtype}: {len(d.throughput)} step-time reports", {}))
        if crashed is not None:
            self._profile_crashed(job, mem, up, events, now, *crashed)
            return
        if not mem.profiles:
            up["status"] = "queued"
            if job.queue_entry_s is None:  # the first profile's end: the job enters the waiting queue
                up.update(queue_entry_s=now, service_at_entry_s=job.attained_service_s)

    def _profile_crashed(self, job: JobRecord, mem: JobMemory, up: dict[str, Any], events: Events, now: float,
                         gtype: str, ranks: list[RankStatus], code: int | None) -> None:
        """A profile run exited non-zero on its own: the job failed (retried as any failure, or at once when
        its command cannot start); the other profiles in flight are ended with it."""
        rest = list(mem.profiles)
        if rest:
            self.executor.stop(rest, grace_s=0.0)
            for key in rest:
                self.executor.forget(key)
            mem.profiles.clear()
        pdir = self._job_dir(job.id) / "profiles" / gtype
        start = code in EXIT_CANNOT_START
        why = self._why_exit(job.id, ranks, code, start=start, job_dir=pdir, what=f"its profile run on {gtype}")
        if start:
            self._end(job, up, events, "failed", why, now)
        else:
            self._fail(job, up, events, why)
