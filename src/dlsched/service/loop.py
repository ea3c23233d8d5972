"""The service's round loop: the simulator's scheduler deciding, the team's own jobs running on Ray.

Each round, as the simulator's engine does: follow the executor's node membership, fold what every job's
workers reported into the job's row (progress, checkpoints, throughput and gradient observations), settle
jobs whose workers ended (done, preempted, crashed, lost with their node, hung), show the scheduler a
:class:`~dlsched.core.ClusterView` built only from those reports, check its decision with the simulator's
invariant checker, and carry it out.

A job whose placement does not change keeps running: its workers are not touched (an adaptive job whose
batch changes is told through ``control.json`` and adapts between two steps). Only a job that moves, shrinks,
grows or is preempted is stopped (it checkpoints on the way out) and started again on its new GPUs.

Nothing accepted is lost when the service dies at any moment: a round writes its decision, the new
placements and incarnations to the database in one transaction *before* it starts any worker, so a restarted
service either finds the workers of the incarnation the database names (and re-attaches) or knows they never
started or died (and starts the job again from its last checkpoint). Stops happen before that write: a
crash after a stop leaves a database that names workers that are gone, which is again the restart case.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlsched.core import Adaptivity, Cluster, ClusterView, InputError, JobStatus, JobView, Placement
from dlsched.core.view import waiting_queue_wait_s
from dlsched.estimators.goodput import LearnedGoodputEstimator
from dlsched.policies import Scheduler
from dlsched.runtime.executor_api import Executor, LaunchSpec
from dlsched.service import membership
from dlsched.service.active_jobs import ActiveJobs
from dlsched.service.admission_check import cluster_refusal
from dlsched.service.batch import choose_batch
from dlsched.service.explain_log import ExplanationLog
from dlsched.service.intake import ReportIntake
from dlsched.service.isolation import lookup, prepare_job
from dlsched.service.launcher import rank_command
from dlsched.service.loop_state import FINISHED, PROFILE_START_S, JobMemory, LoopOptions
from dlsched.service.pinning import pin
from dlsched.service.quotas import service_quotas
from dlsched.service.reports import digest, write_control
from dlsched.service.round_record import decision_record, round_summary, where
from dlsched.service.settle import WorkerSettling, reserved
from dlsched.service.silent import SILENT, unit_speed
from dlsched.service.spec import JobSubmission
from dlsched.service.store import JobRecord, Store
from dlsched.service.waiting import waiting_reasons
from dlsched.sim.invariants import PolicyError, check_decision

log = logging.getLogger(__name__)

class RoundLoop(WorkerSettling):
    """One service's rounds over its store and executor (see the module docstring)."""

    def __init__(self, store: Store, executor: Executor, make_scheduler: Callable[[], Scheduler], *,
                 options: LoopOptions, cluster_name: str, clock: Callable[[], float] = time.time) -> None:
        self.store, self.executor, self.options = store, executor, options
        self.make_scheduler, self.cluster_name, self.clock = make_scheduler, cluster_name, clock
        self.scheduler: Scheduler = make_scheduler()
        self.cluster: Cluster | None = None
        self.batches = LearnedGoodputEstimator(mode="none")
        self.memory: dict[str, JobMemory] = {}
        self.intake = ReportIntake(store, options.jobs_dir)
        self.active = ActiveJobs(store)
        self.explained = ExplanationLog(options.explain_keep_rounds)
        self._refusals: tuple[Cluster | None, dict[str, InputError | None]] = (None, {})
        epoch = store.meta_get("epoch_s")
        if epoch is None:
            epoch = repr(self.clock())
            store.meta_set("epoch_s", epoch)
        self.epoch_s = float(epoch)
        last = store.last_round_no()
        self.round_no = 0 if last is None else last + 1
        self.last_round_s: float | None = None
        #: When the round thread last started a round (time.monotonic), for its cadence.
        self.last_monotonic: float | None = None
        self.last_policy_s = 0.0

    # -- start-up ------------------------------------------------------------------------------------
    def recover(self) -> None:
        """After a start: re-attach every running job whose workers live; the others resume from their last
        checkpoint (a restart, not a failure)."""
        now = self.clock()
        active = {j.id: j for j in self.store.active_jobs()}
        updates: dict[str, dict[str, Any]] = {}
        events: list[tuple[str, str, str, dict[str, Any]]] = []
        for key in self.executor.hosted():  # workers the database does not name as running: leftovers
            job = active.get(key.split(".", 1)[0])
            if job is None or job.status != "running" or "." in key:
                self.executor.forget(key)
        for job in active.values():
            if job.status == "profiling":
                updates[job.id] = {"status": "queued"}
                continue
            if job.status != "running":
                continue
            world = sum(len(v) for v in job.placement.values())
            if self.executor.attach(job.id, job.incarnation, world):
                self._first_sight([job])  # its observations replayed, as for every job after a start
                self.memory[job.id].launched_s = self.memory[job.id].last_report_s = now
                ranks = self.executor.poll(job.id)
                running = sum(1 for r in ranks if str(r.state) == "running")
                said = ("found alive" if running == world else
                        f"found, {world - running} of {world} ranks no longer running (settled this round)")
                events.append((job.id, "reattached", f"workers of incarnation {job.incarnation} {said} after "
                               f"the service restarted", {"running_ranks": running}))
            else:  # what they wrote before they went still counts: its newest checkpoint above all
                up = updates[job.id] = {}
                self.intake.catch_up(job, up, now)
                up.update(status="queued", placement={}, gpus=0, gpu_type=None, restarts=job.restarts + 1)
                events.append((job.id, "requeued", f"workers of incarnation {job.incarnation} gone after the "
                               f"service restarted; resumes from checkpoint step "
                               f"{up.get('last_checkpoint_step', job.last_checkpoint_step)}", {}))
        self._commit_changes(now, updates, events)

    def shutdown(self) -> None:
        """A graceful stop: every running job checkpoints and stops, and waits in the queue as preempted
        (never a failure) for the service's next start."""
        now = self.clock()
        jobs = [j for j in self.store.active_jobs() if j.status in ("running", "profiling")]
        for job in jobs:
            if job.status == "running":
                write_control(self._job_dir(job.id), incarnation=job.incarnation, batch_size=None, stop=True)
        keys = [j.id for j in jobs] + [k for m in self.memory.values() for k in m.profiles]
        if keys:
            self.executor.stop(keys, grace_s=self.options.stop_grace_s)
        for key in keys:
            self.executor.forget(key)
        updates: dict[str, dict[str, Any]] = {}
        events: list[tuple[str, str, str, dict[str, Any]]] = []
        self.intake.begin()
        for job in jobs:
            up = updates[job.id] = {}
            self.intake.catch_up(job, up, now)
            up.update(status="queued", placement={}, gpus=0, gpu_type=None)
            if job.status == "running":
                up["preemptions"] = job.preemptions + 1
            events.append((job.id, "preempted", "the service stopped; resumes from checkpoint step "
                           f"{up.get('last_checkpoint_step', job.last_checkpoint_step)} at its next start", {}))
        self._commit_changes(now, updates, events)

    def _commit_changes(self, now: float, updates: dict[str, dict[str, Any]],
                        events: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        consumed = self.intake.take()
        self.store.commit_changes(now, updates, events, consumed)
        self.intake.committed(consumed)
        self.active.committed(updates)

    # -- one round -----------------------------------------------------------------------------------
    def run_round(self) -> dict[str, Any]:
        """Run one round; returns its summary (what the round row records)."""
        r0 = time.perf_counter()
        now = self.clock()
        t = now - self.epoch_s
        self._follow_membership(now)
        assert self.cluster is not None
        self.intake.begin()
        jobs = self.active.current()
        self._first_sight([j for j in jobs.values() if j.id not in self.memory])
        updates: dict[str, dict[str, Any]] = {}
        events: list[tuple[str, str, str, dict[str, Any]]] = []
        for job in jobs.values():
            self._reconcile(job, now, updates, events)
        self._account(jobs, updates, now)
        live = {k: _merged(j, updates.get(k, {})) for k, j in jobs.items()}
        live = {k: j for k, j in live.items() if j.status not in FINISHED}
        self._hold(live, updates, events)
        live = {k: _merged(j, updates.get(k, {})) for k, j in live.items()}
        view = self._view({k: j for k, j in live.items() if j.status != "held"}, t)
        p0 = time.perf_counter()
        decision = self.scheduler.schedule(view)
        policy_s = time.perf_counter() - p0
        explanations = self.explained.take(self.scheduler, self.round_no, t, {
            jv.job_id: jv.spec for jv in view.jobs if (m := self.memory.get(jv.job_id)) is not None and m.silent})
        self.last_policy_s = policy_s
        young = {j for j, job in live.items() if job.status == "running" and self._young(j, now)}
        for job_id in pin(decision, view.jobs, young, allows_packing=self.scheduler.traits.allows_packing):
            log.info("round %d: job %s kept where it is (no move before its first step and checkpoint, "
                     "min_run_s %g)", self.round_no, job_id, self.options.min_run_s)
        current = {k: (jv.placement, jv.batch_size) for k, jv in ((jv.job_id, jv) for jv in view.jobs) if jv.placement}
        try:
            check_decision(decision, self.cluster, {jv.job_id: jv.spec for jv in view.jobs},
                           allows_packing=self.scheduler.traits.allows_packing, rigid=self.scheduler.traits.rigid,
                           policy=self.scheduler.name, profiling={jv.job_id for jv in view.jobs if jv.profiling},
                           current=current,
                           profile_held={jv.job_id: jv.profile_placement for jv in view.jobs if jv.profile_placement})
        except PolicyError as exc:  # a broken decision is never carried out: everyone keeps what they have
            log.error("round %d: %s; decision dropped", self.round_no, exc)
            decision.allocations = {k: _keep(jv) for k, jv in ((jv.job_id, jv) for jv in view.jobs) if jv.placement}
            decision.profiles = {}
        launches = self._apply(decision, view, live, updates, events, now)
        self._reasons(view, decision, live, updates, launches)
        summary = round_summary(self.cluster, view, decision, policy_s, t)
        summary["round_s"] = time.perf_counter() - r0  # up to the round's commit
        consumed = self.intake.take()
        self.store.commit_round(self.round_no, now, decision_record(decision, self.cluster), policy_s, summary,
                                updates, events, explanations, consumed)
        self.intake.committed(consumed)
        self.active.committed(updates)
        self.explained.committed()
        for job_id, spec, control in launches:
            self._launch(job_id, spec, control, now)
        self.round_no += 1
        self.last_round_s = now
        return summary

    def refusal(self, submission: JobSubmission) -> InputError | None:
        """Why the cluster as it stands can never hold a submission (the API's 422), or None."""
        cluster = self.cluster
        if cluster is None:
            return None
        return cluster_refusal(submission, cluster, rigid=self.scheduler.traits.rigid)

    def _young(self, job_id: str, now: float) -> bool:
        """A placed incarnation that has not yet reported a step and a checkpoint, within ``min_run_s``."""
        mem = self.memory.get(job_id)
        if mem is None or mem.launched_s is None or (mem.stepped and mem.checkpointed):
            return False
        return now - mem.launched_s < self.options.min_run_s

    def _hold(self, jobs: dict[str, JobRecord], updates: dict[str, dict[str, Any]],
              events: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        """Queued jobs the cluster as it stands can never hold wait as ``held`` (outside the scheduler's
        view, so they block no one); held jobs it can hold again are released."""
        known = self._refusals[1] if self._refusals[0] is self.cluster else {}  # holds while the membership does
        now_known: dict[str, InputError | None] = {}
        self._refusals = (self.cluster, now_known)
        for job in jobs.values():
            if job.status not in ("queued", "held"):
                continue
            why = now_known[job.id] = known[job.id] if job.id in known else self.refusal(job.submission)
            up = updates.setdefault(job.id, {})
            if why is not None and job.status == "queued":
                up.update(status="held", message=f"held: {why}")
                events.append((job.id, "held", f"held: the cluster as it stands can never hold it: {why}", {}))
            elif why is None and job.status == "held":
                up.update(status="queued", message=None)
                events.append((job.id, "released", "released: the cluster can hold it again", {}))

    def _reasons(self, view: ClusterView, decision: Any, jobs: dict[str, JobRecord],
                 updates: dict[str, dict[str, Any]], launches: list[Any]) -> None:
        """Each active job's waiting reason and its detail, written only when they changed."""
        launched = {key for key, _spec, _c in launches}
        starting = {j for j in decision.allocations
                    if j in launched or not (self.memory.get(j) or JobMemory()).stepped}
        reasons: dict[str, tuple[str | None, str | None]] = waiting_reasons(
            view, decision, self.explained.current, starting=starting, ranks=self.explained.ranks)
        for job_id, job in jobs.items():
            up = updates.setdefault(job_id, {})
            status = up.get("status", job.status)
            if status in FINISHED:
                reason: tuple[str | None, str | None] = (None, None)
            elif status == "held":
                why = str(up.get("message", job.message) or "held").removeprefix("held: ")
                reason = (f"Held: {why}"[:200], "next: it is released when the cluster can hold it again")
            elif job.cancel_requested:
                reason = ("Stopping", "its cancel was asked for; next: its workers are stopped")
            else:
                reason = reasons.get(job_id, (None, None))
            if reason != (job.reason, job.reason_detail):
                up.update(reason=reason[0], reason_detail=reason[1])

    # -- membership ----------------------------------------------------------------------------------
    def _follow_membership(self, now: float) -> None:
        cluster = membership.build_cluster(self.cluster_name, self.executor.nodes())
        if self.cluster is not None and membership.signature(cluster) == membership.signature(self.cluster):
            return
        if self.cluster is not None:
            before = {n.name for n in self.cluster.nodes}
            after = {n.name for n in cluster.nodes}
            log.warning("membership changed: left %s, joined %s", sorted(before - after), sorted(after - before))
            # stages keep per-cluster state (leases, configurations): start them afresh, with every job's
            # observations replayed from the database
            self.scheduler = self.make_scheduler()
            self.explained.restart()
            for job_id, mem in self.memory.items():
                tput, grad = self.store.observations(job_id)
                mem.new_tput, mem.new_grad, mem.spec = list(tput), list(grad), None
                if mem.silent:  # the unit speed it is valued at, for the new stages too
                    job = self.store.job(job_id)
                    if job is not None:
                        mem.new_tput.extend(unit_speed(job.submission.to_job_spec(job_id, 0.0, job.user), cluster,
                                                       now))
        self.cluster = cluster

    # -- what the workers did ------------------------------------------------------------------------
    def _reconcile(self, job: JobRecord, now: float, updates: dict[str, dict[str, Any]],
                   events: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        mem = self.memory[job.id]  # run_round saw to every job's first sight
        up = updates.setdefault(job.id, {})
        assert self.cluster is not None
        placement = membership.to_global(self.cluster, job.placement) if job.placement else Placement.empty()
        conf = placement.configuration(self.cluster) if placement else None
        reports = self.intake.read(job.id)
        if reports:
            d = digest(reports, incarnation=job.incarnation, gpu_type=conf.gpu_type if conf else None,
                       num_nodes=conf.num_nodes if conf else 1, now_s=now)
            if d.steps_done is not None and d.steps_done > job.steps_done:
                up["steps_done"] = d.steps_done
            if d.last_checkpoint_step is not None and d.last_checkpoint_step > job.last_checkpoint_step:
                up["last_checkpoint_step"] = d.last_checkpoint_step
            if d.progress is not None:
                up["progress"] = d.progress
            if d.last_report_s is not None:
                mem.last_report_s = now
            mem.started_report = mem.started_report or d.started
            if d.first_step_s is not None and not mem.stepped:
                mem.stepped = True
                if mem.measure_startup and mem.launched_s is not None:  # launch to first step: a restart's cost
                    up["startup_s"] = max(0.0, d.first_step_s - mem.launched_s)
                    mem.measure_startup = False
            mem.checkpointed = mem.checkpointed or d.checkpointed
            if d.throughput or d.gradient:
                self.intake.observe(job.id, d.throughput, d.gradient)
                mem.new_tput.extend(d.throughput)
                mem.new_grad.extend(d.gradient)
                if d.gradient:
                    mem.last_grad = (d.gradient[-1].grad_sqr, d.gradient[-1].grad_var)
            events.extend((job.id, k, m, data) for k, m, data in d.events)
            if d.error is not None:
                up["message"] = d.error
        self._settle_profiles(job, mem, now, up, events)
        if job.cancel_requested and job.status not in FINISHED:
            keys = [job.id, *mem.profiles]
            self.executor.stop(keys, grace_s=self.options.stop_grace_s)
            for key in keys:
                self.executor.forget(key)
            mem.profiles.clear()
            up.update(status="cancelled", finished_s=now, placement={}, gpus=0, gpu_type=None)
            events.append((job.id, "cancelled", "cancelled by its user", {}))
            return
        if job.status != "running":
            return
        if placement is None:  # a node it ran on left the cluster
            self.executor.stop([job.id], grace_s=0.0)
            mem.hold_until = now + 0.5 * self.options.round_s
            self._requeue(job, up, events, "lost", f"a node of its placement left the cluster; resumes from "
                          f"checkpoint step {up.get('last_checkpoint_step', job.last_checkpoint_step)}")
            return
        since = self.last_round_s if self.last_round_s is not None else now
        if not self._enforce_wall_time(job, now, since, up, events):
            self._settle_workers(job, mem, now, up, events)

    def _first_sight(self, jobs: list[JobRecord]) -> None:
        """Jobs seen for the first time since the start: their observations replayed for the estimators, the
        silent ones marked, their report offsets read; a few queries for all of them, not three per job."""
        if not jobs:
            return
        ids = [j.id for j in jobs]
        seen = self.store.observations_of(ids)
        silent = self.store.meta_many([SILENT + j for j in ids])
        self.intake.prefetch(ids)
        now = self.clock()
        for job in jobs:
            mem = self.memory[job.id] = JobMemory()
            tput, grad = seen.get(job.id, ([], []))
            mem.new_tput, mem.new_grad = list(tput), list(grad)
            if grad:
                mem.last_grad = (grad[-1].grad_sqr, grad[-1].grad_var)
            if SILENT + job.id in silent and self.cluster is not None:
                mem.silent = True
                mem.new_tput.extend(unit_speed(job.submission.to_job_spec(job.id, 0.0, job.user), self.cluster,
                                               now))

    def _account(self, jobs: dict[str, JobRecord], updates: dict[str, dict[str, Any]], now: float) -> None:
        """Charge running jobs the time since the last round (or since they started)."""
        for job in jobs.values():
            if job.status != "running" or not job.placement:
                continue
            since = self.last_round_s if self.last_round_s is not None else now
            held = max(0.0, now - max(since, job.started_s or since))
            n = sum(len(v) for v in job.placement.values())
            up = updates.setdefault(job.id, {})
            up["attained_service_s"] = job.attained_service_s + held
            up["attained_gpu_s"] = job.attained_gpu_s + n * held

    # -- the scheduler's view ------------------------------------------------------------------------
    def _view(self, jobs: dict[str, JobRecord], t: float) -> ClusterView:
        assert self.cluster is not None
        views = []
        for job in sorted(jobs.values(), key=lambda j: (j.submitted_s, j.id)):
            mem = self.memory.setdefault(job.id, JobMemory())
            if mem.spec is None:
                mem.spec = job.submission.to_job_spec(job.id, job.submitted_s - self.epoch_s, job.user)
            spec = mem.spec
            placement = membership.to_global(self.cluster, job.placement) if job.placement else Placement.empty()
            held = Placement.of(sorted(g for _t, g, _e in mem.profiles.values()))
            age = max(0.0, t - (job.submitted_s - self.epoch_s))
            views.append(JobView(
                spec=spec, status=_status(job.status), placement=placement or Placement.empty(),
                batch_size=job.batch_size if placement else None, age_s=age,
                wait_s=max(0.0, age - job.attained_service_s), attained_gpu_s=job.attained_gpu_s,
                attained_service_s=job.attained_service_s, restarts=job.restarts, progress_fraction=job.progress,
                start_time_s=None if job.started_s is None else job.started_s - self.epoch_s,
                throughput_obs=mem.new_tput, gradient_obs=mem.new_grad, profiled_types=job.profiled_types,
                profiling=bool(mem.profiles), profile_placement=held,
                measured_startup_s=job.startup_s,
                queue_wait_s=waiting_queue_wait_s(t + self.epoch_s, job.queue_entry_s, job.attained_service_s,
                                                  job.service_at_entry_s),
                batch_limits=(spec.batch_size or 1, job.submission.max_batch_size or spec.batch_size or 1)
                if spec.adaptivity is Adaptivity.ADAPTIVE else None))
            mem.new_tput, mem.new_grad = [], []
        view = ClusterView(time_s=t, round_s=self.options.round_s, cluster=self.cluster, jobs=views,
                           quotas=service_quotas(self.store))
        self.batches.update(view)
        return view

    # -- carrying the decision out -------------------------------------------------------------------
    def _apply(self, decision: Any, view: ClusterView, jobs: dict[str, JobRecord],
               updates: dict[str, dict[str, Any]], events: list[tuple[str, str, str, dict[str, Any]]],
               now: float) -> list[tuple[str, Any, dict[str, Any]]]:
        assert self.cluster is not None
        moving: list[str] = []
        plans: dict[str, tuple[Placement, int | None]] = {}
        for jv in view.jobs:
            job = jobs[jv.job_id]
            alloc = decision.allocations.get(jv.job_id)
            new = alloc.placement if alloc is not None else Placement.empty()
            batch = self._batch(job, jv, new, alloc.batch_size if alloc is not None else None)
            if new == jv.placement and jv.placement:
                if batch != job.batch_size:
                    updates.setdefault(job.id, {})["batch_size"] = batch
                    write_control(self._job_dir(job.id), incarnation=job.incarnation, batch_size=batch, stop=False)
                continue
            if jv.placement:
                moving.append(job.id)
            plans[job.id] = (new, batch)
        if moving:  # checkpoint and stop every job that moves or is preempted, all at once
            for job_id in moving:
                write_control(self._job_dir(job_id), incarnation=jobs[job_id].incarnation, batch_size=None, stop=True)
            self.executor.stop(moving, grace_s=self.options.stop_grace_s)
            for job_id in moving:
                self.executor.forget(job_id)
                self.intake.catch_up(jobs[job_id], updates.setdefault(job_id, {}), now)
        launches: list[tuple[str, Any, dict[str, Any]]] = []
        for job_id, (new, batch) in plans.items():
            job = jobs[job_id]
            up = updates.setdefault(job_id, {})
            if new and self.memory.setdefault(job_id, JobMemory()).hold_until > now:
                continue  # lost with its node this round: placed again next round, from its newest checkpoint
            if not new:
                if job_id in moving:
                    up.update(status="queued", placement={}, gpus=0, gpu_type=None,
                              preemptions=job.preemptions + 1)
                    events.append((job_id, "preempted", "preempted: its GPUs went to other jobs; resumes from "
                                   f"checkpoint step {up.get('last_checkpoint_step', job.last_checkpoint_step)}", {}))
                continue
            conf = new.configuration(self.cluster)
            incarnation = job.incarnation + 1
            resumed = job.started_s is not None
            up.update(status="running", placement=membership.to_stored(self.cluster, new), gpus=len(new),
                      gpu_type=conf.gpu_type, batch_size=batch, incarnation=incarnation)
            if job.started_s is None:
                up["started_s"] = now
            if resumed:
                up["restarts"] = job.restarts + 1
            step = up.get("last_checkpoint_step", job.last_checkpoint_step)
            events.append((job_id, "placed", f"placed on {where(self.cluster, new)} at batch {batch}"
                           + (f", resuming from checkpoint step {step}" if step else ""),
                           {"placement": up["placement"], "incarnation": incarnation}))
            launches.append((job_id, self._launch_spec(job, new, batch, incarnation, step),
                             {"incarnation": incarnation, "batch_size": batch}))
        for job_id, placement in decision.profiles.items():
            launches.extend(self._profile_launches(jobs[job_id], placement, updates, events, now))
        return launches

    def _batch(self, job: JobRecord, jv: JobView, placement: Placement, given: int | None) -> int | None:
        sub = job.submission
        if not placement:
            return None
        if sub.adaptivity == "per-gpu-batch":
            return None if sub.batch_size is None else sub.batch_size * len(placement)
        if sub.adaptivity != "adaptive":
            return sub.batch_size
        if given is not None:
            return given
        assert self.cluster is not None
        init = sub.batch_size or 1
        return choose_batch(self.batches, jv, self.cluster, placement, init_batch=init,
                            max_batch=sub.max_batch_size or init, adaptive=True,
                            last_grad=self.memory[job.id].last_grad, current=job.batch_size)

    def _launch_spec(self, job: JobRecord, placement: Placement, batch: int | None, incarnation: int,
                     resume_step: int, *, job_dir: Path | None = None, extra: dict[str, str] | None = None) -> LaunchSpec:
        assert self.cluster is not None
        job_dir = job_dir or self._job_dir(job.id)
        ckpt = self.options.checkpoint_dir / job.id
        gtype = placement.configuration(self.cluster).gpu_type
        slowdown = max((self._slowdown(n) for n, _ in membership.ranks_of(self.cluster, placement)), default=1.0)
        env = {**job.submission.env,
               "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               "DLSCHED_JOB_ID": job.id, "DLSCHED_JOB_DIR": str(job_dir), "DLSCHED_CHECKPOINT_DIR": str(ckpt),
               "DLSCHED_INCARNATION": str(incarnation), "DLSCHED_RESUME_STEP": str(resume_step),
               "DLSCHED_BATCH_SIZE": "" if batch is None else str(batch),
               "DLSCHED_GPU_TYPE": gtype, "DLSCHED_SLOWDOWN": f"{slowdown:.6g}",
               "PYTHONUNBUFFERED": "1", **(extra or {})}
        return LaunchSpec(job_id=job.id if job_dir == self._job_dir(job.id) else f"{job.id}.{job_dir.name}",
                          incarnation=incarnation, command=rank_command(job.submission.command),
                          working_dir=job.submission.working_dir, env=env,
                          ranks=membership.ranks_of(self.cluster, placement), job_dir=job_dir,
                          run_as=self._run_as(job.user), max_log_bytes=self.options.max_log_bytes,
                          **reserved(job.submission))

    def _run_as(self, user: str) -> str | None:
        """The OS account the jobs of ``user`` run as (None: the service's; dlsched.service.isolation)."""
        isolation = self.options.isolation
        if isolation is None or isolation.mode == "none":
            return None
        os_user = next((u.os_user for u in self.store.users() if u.name == user), None)
        account = isolation.account_for(os_user)
        return None if account is None else account.name

    def _profile_launches(self, job: JobRecord, placement: Placement, updates: dict[str, dict[str, Any]],
                          events: list[tuple[str, str, str, dict[str, Any]]],
                          now: float) -> list[tuple[str, Any, dict[str, Any]]]:
        """One short single-GPU run per GPU type of the profile placement, in folders of their own (their
        checkpoints never mix with the job's)."""
        assert self.cluster is not None
        mem = self.memory.setdefault(job.id, JobMemory())
        out = []
        firsts = self.cluster.first_gpu_of_each_type(placement.gpus)
        for gtype, g in firsts.items():
            pdir = self._job_dir(job.id) / "profiles" / gtype
            spec = self._launch_spec(job, Placement.of([g]), job.submission.batch_size, 0, 0, job_dir=pdir,
                                     extra={"DLSCHED_CHECKPOINT_DIR": str(pdir / "checkpoints"),
                                            "DLSCHED_PROFILE_S": f"{self.options.profile_s:g}",
                                            "DLSCHED_REPORT_S": "1"})
            mem.profiles[spec.job_id] = (gtype, int(g), now + self.options.profile_s + PROFILE_START_S)
            out.append((spec.job_id, spec, {"incarnation": 0, "batch_size": job.submission.batch_size}))
        updates.setdefault(job.id, {})["status"] = "profiling"
        events.append((job.id, "profiling", f"profiling on {', '.join(sorted(firsts))}", {}))
        return out

    def _launch(self, key: str, spec: Any, control: dict[str, Any], now: float) -> None:
        try:  # the job's folders made its account's (dlsched.service.isolation), then its control file
            account = None if spec.run_as is None else lookup(spec.run_as, field="os_user")
            prepare_job(self.options.jobs_dir, spec.job_dir, Path(spec.env["DLSCHED_CHECKPOINT_DIR"]), account)
            write_control(spec.job_dir, incarnation=control["incarnation"], batch_size=control["batch_size"],
                          stop=False)
            self.executor.launch(spec)
        except Exception as exc:  # the job waits for the next round, as after a crash
            job_id = key.split(".", 1)[0]
            log.warning("job %s could not start: %s", key, exc)
            mem = self.memory.get(job_id)
            if mem is not None and key in mem.profiles:
                mem.profiles.pop(key)
            else:
                self.store.update_job(job_id, status="queued", placement={}, gpus=0, gpu_type=None)
                self.active.forget(job_id)
            self.store.add_event(job_id, "start-failed", f"could not start: {exc}", now_s=now)
            return
        mem = self.memory.setdefault(key.split(".", 1)[0], JobMemory())
        if "." not in key:
            mem.launched_s, mem.last_report_s = now, now
            mem.stepped = mem.checkpointed = mem.started_report = False
            mem.measure_startup = True

    # -- helpers ---------------------------------------------------------------------------------------
    def _slowdown(self, node_name: str) -> float:
        for n in self.executor.nodes():
            if n.name == node_name:
                return float(getattr(n, "slowdown", 1.0))
        return 1.0

def _merged(job: JobRecord, up: dict[str, Any]) -> JobRecord:
    import dataclasses

    return dataclasses.replace(job, **up) if up else job


def _keep(jv: JobView) -> Any:
    from dlsched.core.decision import Allocation

    return Allocation(jv.placement, jv.batch_size)


def _status(status: str) -> JobStatus:
    return {"running": JobStatus.RUNNING, "profiling": JobStatus.PROFILING}.get(status, JobStatus.QUEUED)


