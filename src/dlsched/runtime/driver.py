"""The runtime's round loop: the simulator's scheduler objects deciding, real jobs on Ray training.

Round by round, as the simulator's engine does: admit the jobs that have arrived, show the scheduler a
:class:`~dlsched.core.view.ClusterView` built only from what the jobs reported (step times per placement,
gradient statistics, progress), check its decision with the simulator's invariant checker, then carry it
out. A job whose placement changed has its workers stopped (after the last round's checkpoint) and new ones
started in a placement group on the new nodes; they resume from the checkpoint with the new world size and
batch. A job whose worker dies loses its GPUs and the steps since its last checkpoint; the next round the
scheduler places it again and it resumes from that checkpoint.

Time is wall-clock time from the start of the run. Jobs are described by a runtime trace
(:mod:`dlsched.runtime.workload`); what they report feeds the same estimators the simulator's jobs feed.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dlsched.core import Adaptivity, Cluster, Decision, InputError, JobSpec, JobStatus, Placement
from dlsched.core.view import (
    ClusterView,
    GradientObservation,
    JobView,
    ThroughputObservation,
    waiting_queue_wait_s,
)
from dlsched.estimators.goodput import LearnedGoodputEstimator, statistical_efficiency
from dlsched.policies import Scheduler
from dlsched.runtime.emulation import slowdowns
from dlsched.runtime.training import TrainSpec
from dlsched.runtime.worker import TrainWorker, node_resource, node_resources, profile_steps
from dlsched.runtime.workload import RuntimeJob, RuntimeTrace
from dlsched.sim.invariants import check_decision
from dlsched.sim.metrics import summarize
from dlsched.sim.records import JobRecord, RoundRecord

log = logging.getLogger(__name__)

#: Called after each round's training has been launched: (round number, the run).
RoundHook = Callable[[int, "RuntimeRun"], None]


@dataclass(frozen=True)
class RuntimeOptions:
    """How the runtime runs rounds."""

    round_s: float = 20.0
    #: When the next round starts. ``boundary`` (default): no earlier than ``round_s`` after the last one
    #: started, as a scheduler on a fixed interval (Sia's and Pollux's) and the simulator run, so GPUs a job
    #: frees mid-round stay idle until then; a round that overruns is followed at once. ``early``: as soon
    #: as every job of the round has reported (a round whose jobs all finish early ends early).
    round_start: Literal["boundary", "early"] = "boundary"
    #: Where the jobs' checkpoints live (one folder per job), shared by every Ray node.
    checkpoint_dir: Path = Path("dlsched-checkpoints")
    checkpoint_every: int = 20
    max_time_s: float | None = None
    #: Extra seconds a round may overrun (worker start-up, the last step) before a job counts as failed.
    grace_s: float = 120.0
    #: Local batch sizes profiling tries, as multiples of the job's initial batch.
    profile_multiples: tuple[int, ...] = (1, 2, 4)
    profile_steps: int = 2
    #: Failed starts and lost workers a job may have before the run ends with an error: a job that can
    #: never run (a node that cannot start its workers, a training script that always fails) must not keep
    #: the run going round after round.
    max_failures: int = 10


class RuntimeJobFailed(RuntimeError):
    """A job's workers failed more than ``RuntimeOptions.max_failures`` times; the message says why."""


@dataclass
class _Live:
    """One job as the runtime tracks it (the runtime's counterpart of the engine's job state)."""

    job: RuntimeJob
    spec: JobSpec
    train: TrainSpec
    status: JobStatus = JobStatus.PENDING
    placement: Placement = field(default_factory=Placement.empty)
    batch_size: int | None = None
    #: Share of its GPUs the decision gave the job (below 1: co-located jobs; on GPUs an MPS share).
    gpu_share: float = 1.0
    #: The decision's per-worker thread limits (percent, placement order; empty: none) and split of the
    #: global batch among the workers (fractions; empty: equal), as Gimbal's coordinator sets them.
    mps_pct: tuple[int, ...] = ()
    batch_split: tuple[float, ...] = ()
    start_s: float | None = None
    finish_s: float | None = None
    attained_gpu_s: float = 0.0
    attained_service_s: float = 0.0
    restarts: int = 0
    restart_gpu_s: float = 0.0
    progress: float = 0.0
    profiled_types: tuple[str, ...] = ()
    profiling: bool = False
    #: When the job entered the waiting queue (its first profile's end) and its service then: see
    #: :func:`dlsched.core.view.waiting_queue_wait_s`. None for a job never profiled.
    queue_entry_s: float | None = None
    service_at_entry_s: float = 0.0
    gpu_s_by_type: dict[str, float] = field(default_factory=dict)
    new_tput: list[ThroughputObservation] = field(default_factory=list)
    new_grad: list[GradientObservation] = field(default_factory=list)
    actors: list[Any] = field(default_factory=list)
    #: Process ids of the workers, by rank (what an operator would kill).
    pids: list[int] = field(default_factory=list)
    group: Any = None
    reports: list[dict[str, Any]] = field(default_factory=list)
    failures: int = 0
    #: The latest gradient statistics the job reported (grad_sqr, grad_var at its initial batch).
    last_grad: tuple[float, float] | None = None
    #: Every observation the job ever reported (the estimators' copies are drained each round).
    observed_tput: list[ThroughputObservation] = field(default_factory=list)
    observed_grad: list[GradientObservation] = field(default_factory=list)


@dataclass
class RuntimeResult:
    jobs: list[JobRecord]
    rounds: list[RoundRecord]
    summary: dict[str, Any]
    #: Every round report of every job, in order (what the workers returned).
    reports: dict[str, list[dict[str, Any]]]
    failures: dict[str, int]
    wall_s: float
    #: Whether the workers trained on real GPUs (else GPU types were emulated).
    real_gpus: bool
    #: Every step-time and gradient observation each job reported (profiling included): the job's own
    #: profile, from which a simulator world can be fitted (experiments/runtime_fidelity.py).
    throughput_obs: dict[str, list[ThroughputObservation]] = field(default_factory=dict)
    gradient_obs: dict[str, list[GradientObservation]] = field(default_factory=dict)


class RuntimeRun:
    """One run of a scheduler over real jobs on the Ray cluster this process is connected to."""

    def __init__(self, cluster: Cluster, trace: RuntimeTrace, scheduler: Scheduler, options: RuntimeOptions,
                 *, on_round: RoundHook | None = None) -> None:
        import ray

        self.ray = ray
        self.cluster, self.scheduler, self.options = cluster, scheduler, options
        self.on_round = on_round
        self.real_gpus = ray.cluster_resources().get("GPU", 0) > 0
        self.slowdown = {t: 1.0 for t in cluster.type_names} if self.real_gpus else slowdowns(cluster)
        self._check_resources()
        self.pending = sorted((_Live(job=j, spec=j.job_spec(), train=_train_spec(j)) for j in trace.jobs),
                              key=lambda s: (s.job.submit_s, s.job.job_id))
        self.active: dict[str, _Live] = {}
        self.done: list[_Live] = []
        self.rounds: list[RoundRecord] = []
        self.batches = LearnedGoodputEstimator(mode="none")  # the jobs' own batch choice (Pollux's agent)
        self._worker = ray.remote(num_cpus=0, max_restarts=0)(TrainWorker)
        self._profile = ray.remote(num_cpus=0, max_retries=0)(profile_steps)
        self._t0 = 0.0

    # -- set-up ----------------------------------------------------------------------------------------
    def _check_resources(self) -> None:
        have = self.ray.cluster_resources()
        for node, wanted in zip(self.cluster.nodes, node_resources(self.cluster), strict=True):
            for name, amount in wanted.items():
                if have.get(name, 0) < amount and name.startswith("dlsched_node_"):
                    raise InputError(f"the Ray cluster lacks resource {name} ({amount:g} needed for node "
                                     f"{node.name}); start its Ray node with --resources "
                                     f"'{{\"{name}\": {amount:g}}}'", field="cluster")

    def now(self) -> float:
        return time.monotonic() - self._t0

    def ckpt_dir(self, job_id: str) -> Path:
        return self.options.checkpoint_dir / job_id

    # -- the loop --------------------------------------------------------------------------------------
    def run(self) -> RuntimeResult:
        self._t0 = time.monotonic()
        for live in self.pending:
            shutil.rmtree(self.ckpt_dir(live.job.job_id), ignore_errors=True)
        nxt = 0
        round_no = 0
        last_t: float | None = None  # when the last round started
        due = 0.0  # the earliest start of the next round
        boundary = self.options.round_start == "boundary"
        try:
            while nxt < len(self.pending) or self.active:
                t = self.now()
                if self.options.max_time_s is not None and t >= self.options.max_time_s:
                    break
                if boundary and t < due:
                    time.sleep(due - t)
                    continue
                while nxt < len(self.pending) and self.pending[nxt].job.submit_s <= t:
                    live = self.pending[nxt]
                    live.status = JobStatus.QUEUED
                    self.active[live.job.job_id] = live
                    nxt += 1
                if not self.active:
                    arrival = self.pending[nxt].job.submit_s
                    if boundary and last_t is not None:  # keep the cadence through an idle spell
                        due = last_t + math.ceil((arrival - last_t) / self.options.round_s) * self.options.round_s
                    time.sleep(max(0.0, min(arrival - t, self.options.round_s)))
                    continue
                self._round(round_no, t)
                round_no += 1
                last_t, due = t, t + self.options.round_s
        finally:
            for live in self.active.values():
                self._stop(live)
        return self._result()

    def _round(self, round_no: int, t: float) -> None:
        view = self._view(t)
        self.batches.update(view)
        p0 = time.perf_counter()
        decision = self.scheduler.schedule(view)
        policy_s = time.perf_counter() - p0
        check_decision(decision, self.cluster, {k: s.spec for k, s in self.active.items()},
                       allows_packing=self.scheduler.traits.allows_packing, rigid=self.scheduler.traits.rigid,
                       policy=self.scheduler.name, profiling=set(),
                       current={k: (s.placement, s.batch_size) for k, s in self.active.items() if s.placement})
        restarts = self._apply(decision, view)
        record = self._round_record(round_no, t, policy_s, restarts, decision.profiles)
        budget = max(1.0, self.options.round_s - (self.now() - t))
        launched = self.now()
        calls = self._launch(budget)
        profiles = self._launch_profiles(decision.profiles)
        if self.on_round is not None:
            self.on_round(round_no, self)
        self._collect(calls, profiles, t, launched)
        self.rounds.append(record)

    # -- decisions ------------------------------------------------------------------------------------
    def _apply(self, decision: Decision, view: ClusterView) -> int:
        """Carry the decision out: stop every job that moves or stops first, so the GPUs it frees are free
        before any job starts on them, then start the moved and new ones."""
        restarts = 0
        starting: list[_Live] = []
        for job_id, live in self.active.items():
            alloc = decision.allocations.get(job_id)
            new = alloc.placement if alloc is not None else Placement.empty()
            batch = alloc.batch_size if alloc is not None else None
            live.gpu_share = alloc.gpu_share if alloc is not None else 1.0
            live.mps_pct = alloc.mps_pct if alloc is not None else ()
            live.batch_split = alloc.batch_split if alloc is not None else ()
            if new and (batch is None or live.job.adaptivity is not Adaptivity.ADAPTIVE):
                batch = self._choose_batch(live, new, view)
            if new == live.placement and live.actors:
                live.batch_size = batch
                continue
            self._stop(live)
            live.placement, live.batch_size = new, (batch if new else None)
            if not new:
                live.status = JobStatus.QUEUED
                continue
            if live.start_s is None:
                live.start_s = self.now()
            else:
                live.restarts += 1
                restarts += 1
            live.status = JobStatus.RUNNING
            starting.append(live)
        for live in starting:
            try:
                self._start(live)
            except self.ray.exceptions.RayError as exc:
                # the placement group or a worker did not come up in time, or Ray cancelled an actor's
                # creation: the job waits for the next round
                log.warning("job %s could not start on its GPUs (%s); it waits for the next round",
                            live.job.job_id, type(exc).__name__)
                self._lose(live, f"its workers did not start ({type(exc).__name__}: {exc})")
        for job_id in decision.profiles:
            self.active[job_id].profiling = True
        return restarts

    def _choose_batch(self, live: _Live, placement: Placement, view: ClusterView) -> int:
        """The global batch the job runs: its request unless adaptive; then the goodput-optimal batch from
        its own reports, as Pollux's job agent picks it: step times predicted by the throughput model fitted
        to the job's step-time reports, times Pollux's statistical efficiency from its latest gradient
        statistics, over batches between ``max(init_batch, GPUs)`` and the job's ``max_batch`` (a job's
        declared maximum is its memory bound here, as AdaptDL's local batch bounds are)."""
        n = len(placement)
        job = live.job
        low = max(job.init_batch, n)
        if job.adaptivity is not Adaptivity.ADAPTIVE or live.last_grad is None or low >= job.max_batch:
            return min(max(job.init_batch, n), max(job.max_batch, n))
        conf = placement.configuration(self.cluster)
        batches = np.unique(np.geomspace(low, job.max_batch, 32).round().astype(int))
        local = np.ceil(batches / n)
        step = self.batches.predict_step_time(view.job(job.job_id), conf.gpu_type.split("+")[0], conf.num_nodes,
                                              n, local)
        if step is None or not np.all(np.isfinite(step)) or np.any(step <= 0):
            return live.batch_size or low
        sqr, var = live.last_grad
        goodput = batches / step * statistical_efficiency(batches, job.init_batch, sqr, var)
        return int(batches[int(np.argmax(goodput))])

    def _start(self, live: _Live) -> None:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundles = []
        for g in live.placement.gpus:
            bundle: dict[str, float] = {node_resource(self.cluster, int(self.cluster.gpu_node[g])): 1.0}
            if self.real_gpus:
                bundle["GPU"] = 1.0
            bundles.append(bundle)
        live.group = placement_group(bundles, strategy="PACK", name=f"dlsched-{live.job.job_id}")
        self.ray.get(live.group.ready(), timeout=self.options.grace_s)
        live.actors = [
            self._worker.options(
                num_gpus=1 if self.real_gpus else 0, resources=bundle,
                scheduling_strategy=PlacementGroupSchedulingStrategy(live.group, placement_group_bundle_index=i),
            ).remote()
            for i, bundle in enumerate(bundles)]
        live.pids = self.ray.get([a.pid.remote() for a in live.actors], timeout=self.options.grace_s)

    def _lose(self, live: _Live, why: str) -> None:
        """A job whose workers failed gives its GPUs back and waits; it resumes from its checkpoint. Past
        ``max_failures`` the run ends with :class:`RuntimeJobFailed` naming the job and the last reason."""
        live.failures += 1
        self._stop(live)
        if live.failures > self.options.max_failures:
            raise RuntimeJobFailed(f"job {live.job.job_id} failed {live.failures} times (max_failures "
                                   f"{self.options.max_failures}); last: {' '.join(why.split())[:500]}")
        live.placement, live.batch_size, live.status = Placement.empty(), None, JobStatus.QUEUED

    def _stop(self, live: _Live) -> None:
        from ray.util.placement_group import remove_placement_group

        for actor in live.actors:
            self.ray.kill(actor)
        live.actors, live.pids = [], []
        if live.group is not None:
            remove_placement_group(live.group)
            live.group = None

    # -- a round's work --------------------------------------------------------------------------------
    def _launch(self, budget_s: float) -> dict[str, list[Any]]:
        calls: dict[str, list[Any]] = {}
        for job_id, live in self.active.items():
            if not live.actors:
                continue
            n = len(live.actors)
            gtype = self.cluster.gpu_type_of[live.placement.gpus[0]]
            try:
                master = self.ray.get(live.actors[0].rendezvous.remote(), timeout=self.options.grace_s) \
                    if n > 1 else ""
            except (self.ray.exceptions.GetTimeoutError, self.ray.exceptions.RayActorError):
                log.warning("job %s lost a worker before the round; it resumes next round", job_id)
                self._lose(live, "a worker was lost before the round")
                continue
            spec = _as_dict(live.train)
            mps = worker_mps_percent(live.mps_pct, live.gpu_share, n) if self.real_gpus else [None] * n
            calls[job_id] = [
                actor.train.remote(spec, {"rank": r, "world_size": n, "master": master,
                                          "batch_size": live.batch_size or live.job.init_batch,
                                          "shares": worker_shares(live.batch_split, n),
                                          "slowdown": self.slowdown[gtype], "budget_s": budget_s,
                                          "checkpoint_every": self.options.checkpoint_every,
                                          "mps_percent": mps[r], "lr": live.spec.learning_rate(n)},
                                   str(self.ckpt_dir(job_id)))
                for r, actor in enumerate(live.actors)]
        return calls

    def _launch_profiles(self, profiles: dict[str, Placement]) -> dict[str, list[tuple[str, Any]]]:
        out: dict[str, list[tuple[str, Any]]] = {}
        for job_id, placement in profiles.items():
            live = self.active[job_id]
            bszs = sorted({min(live.job.max_batch, m * live.job.init_batch) for m in self.options.profile_multiples})
            for gtype, g in self.cluster.first_gpu_of_each_type(placement.gpus).items():
                res = {node_resource(self.cluster, int(self.cluster.gpu_node[g])): 1.0}
                ref = self._profile.options(resources=res).remote(_as_dict(live.train), bszs,
                                                                 self.options.profile_steps, self.slowdown[gtype])
                out.setdefault(job_id, []).append((gtype, ref))
        return out

    def _collect(self, calls: dict[str, list[Any]], profiles: dict[str, list[tuple[str, Any]]], t: float,
                 launched: float) -> None:
        ray = self.ray
        owner = {ref: job_id for job_id, refs in calls.items() for ref in refs}
        remaining = list(owner)
        failed: dict[str, str] = {}  # job -> why
        deadline = time.monotonic() + self.options.round_s + self.options.grace_s
        results: dict[Any, dict[str, Any]] = {}
        while remaining:
            ready, remaining = ray.wait(remaining, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                for r in remaining:
                    failed.setdefault(owner[r], f"no report within the round and {self.options.grace_s:g} s grace")
                break
            ref = ready[0]
            job_id = owner[ref]
            try:
                results[ref] = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
                if job_id not in failed:
                    log.warning("job %s lost a worker (%s); it resumes from its last checkpoint",
                                job_id, type(exc).__name__)
                    failed[job_id] = f"a worker failed ({type(exc).__name__}: {exc})"
                    self._stop(self.active[job_id])  # the other ranks would wait for the dead one
        end = self.now()
        for job_id, refs in calls.items():
            live = self.active[job_id]
            n = len(live.placement)
            gtype = self.cluster.gpu_type_of[live.placement.gpus[0]]
            if job_id in failed:
                self._charge(live, n, gtype, end - t)
                self._lose(live, failed[job_id])
                continue
            report = results[refs[0]]
            # with the round's wall-clock length, which per-round overheads (start-up, checkpoints) make
            # longer than its steps
            live.reports.append({**report, "round_wall_s": end - t})
            live.progress = report["progress_fraction"]
            # a job that finished held its GPUs from the round's start to its last step
            held = min(end - t, launched - t + max(0.0, report["wall_s"])) if report["done"] else end - t
            self._charge(live, n, gtype, held)
            self._observe(live, report, end)
            if report["done"]:
                live.finish_s = t + held
                live.status = JobStatus.COMPLETED
                self._stop(live)
                live.placement = Placement.empty()
        for job_id, refs in profiles.items():
            live = self.active[job_id]
            for gtype, ref in refs:
                try:
                    timings = ray.get(ref, timeout=self.options.grace_s)
                except (ray.exceptions.RayTaskError, ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError):
                    log.warning("profiling job %s on %s failed", job_id, gtype)
                    continue
                spent = sum(step * (self.options.profile_steps + 1) for _, step in timings)
                live.attained_gpu_s += spent
                live.restart_gpu_s += spent
                live.gpu_s_by_type[gtype] = live.gpu_s_by_type.get(gtype, 0.0) + spent
                seen = [ThroughputObservation(time_s=end, gpu_type=gtype, num_nodes=1, num_gpus=1, local_bsz=b,
                                              accum_steps=1, step_time_s=s, sync_time_s=0.0) for b, s in timings]
                live.new_tput.extend(seen)
                live.observed_tput.extend(seen)
                live.profiled_types = tuple(sorted({*live.profiled_types, gtype}))
            live.profiling = False
            if live.queue_entry_s is None:
                live.queue_entry_s, live.service_at_entry_s = end, live.attained_service_s
        for job_id in [k for k, s in self.active.items() if s.status is JobStatus.COMPLETED]:
            self.done.append(self.active.pop(job_id))

    def _charge(self, live: _Live, n: int, gtype: str, held: float) -> None:
        live.attained_service_s += held
        live.attained_gpu_s += n * held
        live.gpu_s_by_type[gtype] = live.gpu_s_by_type.get(gtype, 0.0) + n * held

    def _observe(self, live: _Live, report: dict[str, Any], t: float) -> None:
        """What the job's workers measured becomes the observations its estimators read."""
        if report["steps"] <= 0:
            return
        conf = live.placement.configuration(self.cluster)
        tput = ThroughputObservation(
            time_s=t, gpu_type=conf.gpu_type, num_nodes=conf.num_nodes, num_gpus=conf.num_gpus,
            local_bsz=int(report["local_bsz"]), accum_steps=1, step_time_s=float(report["step_time_s"]),
            sync_time_s=float(report["sync_time_s"]))
        live.new_tput.append(tput)
        live.observed_tput.append(tput)
        if report["grad_sqr"] is not None and report["grad_var"] is not None:
            live.last_grad = (float(report["grad_sqr"]), float(report["grad_var"]))
            grad = GradientObservation(time_s=t, batch_size=int(report["batch_size"]),
                                       grad_sqr=float(report["grad_sqr"]), grad_var=float(report["grad_var"]))
            live.new_grad.append(grad)
            live.observed_grad.append(grad)

    # -- what the scheduler sees ------------------------------------------------------------------------
    def _view(self, t: float) -> ClusterView:
        views = []
        for live in self.active.values():
            views.append(JobView(
                spec=live.spec, status=live.status, placement=live.placement, batch_size=live.batch_size,
                age_s=t - live.job.submit_s, wait_s=max(0.0, t - live.job.submit_s - live.attained_service_s),
                attained_gpu_s=live.attained_gpu_s, attained_service_s=live.attained_service_s,
                restarts=live.restarts, progress_fraction=live.progress, start_time_s=live.start_s,
                throughput_obs=live.new_tput, gradient_obs=live.new_grad, profiled_types=live.profiled_types,
                profiling=live.profiling,
                queue_wait_s=waiting_queue_wait_s(t, live.queue_entry_s, live.attained_service_s,
                                                  live.service_at_entry_s),
                batch_limits=(live.job.init_batch, live.job.max_batch)
                if live.job.adaptivity is Adaptivity.ADAPTIVE else None))
            live.new_tput, live.new_grad = [], []
        return ClusterView(time_s=t, round_s=self.options.round_s, cluster=self.cluster, jobs=views)

    # -- records ----------------------------------------------------------------------------------------
    def _round_record(self, round_no: int, t: float, policy_s: float, restarts: int,
                      profiles: dict[str, Placement]) -> RoundRecord:
        used: set[int] = {g for p in profiles.values() for g in p.gpus}
        running = 0
        for live in self.active.values():
            if live.placement:
                running += 1
                used |= set(live.placement.gpus)
        by_type = {tn: 0 for tn in self.cluster.type_names}
        for g in used:
            by_type[self.cluster.gpu_type_of[g]] += 1
        idle = self.cluster.num_gpus - len(used)
        queue = len(self.active) - running
        profiling = sum(1 for k, live in self.active.items() if not live.placement and k in profiles)
        return RoundRecord(round=round_no, time_s=t, allocated_gpus=len(used), idle_gpus=idle,
                           fragments=idle if queue > 0 else 0, queue_len=queue, running_jobs=running,
                           active_jobs=len(self.active), policy_s=policy_s, restarts=restarts,
                           gpus_by_type=by_type, profiling_jobs=profiling)

    def _result(self) -> RuntimeResult:
        end = self.now()
        records = []
        everyone = [*self.done, *self.active.values(), *[p for p in self.pending if p.status is JobStatus.PENDING]]
        for live in everyone:
            stop = live.finish_s if live.finish_s is not None else end
            wait = max(0.0, stop - live.job.submit_s - live.attained_service_s)
            records.append(JobRecord(
                job_id=live.job.job_id, model=live.job.model, user="default", adaptivity=str(live.job.adaptivity),
                requested_gpus=live.job.gpus, submit_s=live.job.submit_s, start_s=live.start_s,
                finish_s=live.finish_s, wait_s=wait, gpu_s=live.attained_gpu_s, restarts=live.restarts,
                restart_gpu_s=live.restart_gpu_s, deadline_s=None,
                # a real job's run time alone is not known without running it alone: no latency ratio or
                # finish-time fairness for runtime runs
                ideal_runtime_s=math.nan, gpu_s_by_type=dict(live.gpu_s_by_type)))
        records.sort(key=lambda r: (r.submit_s, r.job_id))
        wall = end
        summary = summarize(records, self.rounds, num_gpus=self.cluster.num_gpus, sim_wall_s=wall)
        return RuntimeResult(jobs=records, rounds=self.rounds, summary=summary,
                             reports={lv.job.job_id: lv.reports for lv in everyone},
                             failures={lv.job.job_id: lv.failures for lv in everyone}, wall_s=wall,
                             real_gpus=self.real_gpus,
                             throughput_obs={lv.job.job_id: lv.observed_tput for lv in everyone},
                             gradient_obs={lv.job.job_id: lv.observed_grad for lv in everyone})


def worker_shares(batch_split: tuple[float, ...], n: int) -> list[float]:
    """Each worker's share of the global batch: the decision's split (Gimbal's stealing moves samples from
    slow workers to fast ones), else equal shares."""
    if len(batch_split) == n and all(s >= 0 for s in batch_split) and sum(batch_split) > 0:
        total = sum(batch_split)
        return [s / total for s in batch_split]
    return [1.0 / n] * n


def worker_mps_percent(mps_pct: tuple[int, ...], gpu_share: float, n: int) -> list[int | None]:
    """Each worker's CUDA MPS thread limit on a real GPU: the decision's per-worker limits when it gives
    them; otherwise a job sharing its GPUs (``gpu_share`` below 1) gets that share of each; else none. An
    emulated GPU type cannot be split, so on CPUs no limit applies (the run is labelled emulated)."""
    if len(mps_pct) == n:
        return [None if p >= 100 else max(1, int(p)) for p in mps_pct]
    if gpu_share < 1.0:
        return [max(1, round(100 * gpu_share))] * n
    return [None] * n


def _train_spec(job: RuntimeJob) -> TrainSpec:
    return TrainSpec(job_id=job.job_id, model=job.model, samples=job.samples, init_batch=job.init_batch,
                     max_batch=job.max_batch, lr=job.lr, epochs=job.epochs, target_loss=job.target_loss,
                     seed=job.seed)


def _as_dict(spec: TrainSpec) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(spec)
