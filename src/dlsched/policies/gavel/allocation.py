"""Gavel (OSDI'20): the allocation stage, Gavel's round-based mechanism around its LPs (:mod:`.lp`).

The mechanism turns fractions into leases: rounds last ``lease_s`` (360 s). Every job keeps, per type,
the time it has received; its priority on a type is ``X[j, t] / (time received on t / time given on t)``
(new jobs start with half a round on every type). Jobs are taken greedily by priority (a job at most once,
if its whole gang fits in the type's remaining GPUs) and placed: a job staying on its type keeps its GPUs
when they are still free, the others are packed on as few nodes as possible, biggest gangs first. Leases
hold for the whole round even when the engine's round is shorter: a job that finishes early leaves its GPUs
idle and a job that arrives waits for the next round, as in Gavel. A job moved or preempted pays the
checkpoint-restore the engine charges on every placement change.

Jobs are rigid: each runs on exactly its requested GPU count with its requested batch size.

Throughputs. Gavel assumes every job's throughput on every GPU type is known (profiled offline). With
``throughputs=profiled`` (the default) they are the simulator's truth: the stage asks for the oracle
(:meth:`needs_oracle`) and ``T[j, t]`` is the world's throughput of the job's rigid configuration packed on
type ``t``; no profiling rounds. With ``throughputs=bootstrap`` they come from Sia's goodput estimator: a new
job is first profiled on one GPU of each type (through ``Decision.profiles``, on GPUs no lease holds; the
engine charges the time), and ``T[j, t]`` is the estimator's throughput for the job's configuration (eq. 3.1
extrapolates from the one-GPU profile until the job has run multi-GPU), so throughputs cost what they cost
Sia and improve as jobs report. Either way ``T`` is in steps per second (samples per second over the job's
batch size), Gavel's unit, which max-sum-throughput adds up across jobs as it is.

Finish-time fairness needs each job's remaining steps: the job's duration estimate times the fraction left
(on its best type, so times the job's best throughput). Gavel's denominator counts the isolated time a job
has accumulated from the work it did (``ftf_age=isolated-time``): the stage keeps, per job, that time and the
remaining steps and isolated throughput of the previous solve, and hands the time to the LP.

The stage hands placement its leases in Gavel's order (biggest gangs first); the ``gavel-lease`` placement
keeps a job on its GPUs when it stays on its type and they are free, and packs the rest.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dlsched.core import Adaptivity, ClusterView, JobView
from dlsched.core.ranges import DAY_S, ranged
from dlsched.policies.gavel.lp import (
    FTF_ISOLATED,
    LP_METHODS,
    MAXMIN_REFERENCES,
    OBJECTIVES,
    reference_throughputs,
    solve_allocation,
)
from dlsched.policies.stages import AllocationTraits, Demand, EstimatingAllocation, Plan, ProfileRequest


def rigid_view(job: JobView) -> JobView:
    """The job as Gavel runs it: its requested GPU count and batch size, nothing adaptive."""
    if job.spec.adaptivity is Adaptivity.RIGID:
        return job
    return dataclasses.replace(job, spec=dataclasses.replace(job.spec, adaptivity=Adaptivity.RIGID))


def rigid_batch(job: JobView) -> int | None:
    """The batch size a rigid run uses: the requested one, else the initial batch of its model."""
    if job.spec.batch_size is not None:
        return job.spec.batch_size
    if job.spec.adaptivity is Adaptivity.RIGID:
        return None
    return job.batch_limits[0] if job.batch_limits else None


#: Where throughputs come from: the simulator's truth (Gavel's offline profiles) or Sia's estimator.
THROUGHPUT_SOURCES = ("profiled", "bootstrap")
#: What rho's denominator adds to the remaining isolated time: Gavel's accumulated isolated time, or the age.
FTF_AGES = ("isolated-time", "wall-clock")


@dataclass
class GavelAllocation(EstimatingAllocation):
    """Gavel's policies and leases; the fields are its tunables, defaults as Gavel's code (:mod:`.lp`).

    State carried across rounds: the estimator, the time each job received per type and the time given
    per type (priorities), the current lease's start and its holders (job -> GPU type), the last LP
    solution (``time_fractions``, job -> {type: fraction}), each LP's wall time (``lp_s``) and, for
    finish-time fairness, each job's accumulated isolated time (``isolated_time_s``) with the remaining
    steps and isolated throughput of the previous solve it was in.
    """

    #: The policy: max-sum-throughput, finish-time-fairness or max-min.
    objective: str = "max-sum-throughput"
    #: Round (lease) length in seconds; leases are kept this long even if the engine's round is shorter.
    lease_s: float = ranged(360.0, 1.0, DAY_S)
    #: ``profiled``: throughputs from the simulator's truth, as Gavel's offline profiles; ``bootstrap``:
    #: from Sia's estimator, learnt by profiling new jobs and from what jobs report.
    throughputs: str = "profiled"
    #: With ``throughputs=bootstrap``: profile new jobs on one GPU of each type before scheduling them (off:
    #: throughputs are learnt as jobs run).
    profile: bool = True
    #: Divide each job's throughputs by their sum over types before solving (Gavel uses them raw; this
    #: changes max-sum-throughput only, the fairness objectives are ratios of a job's own throughputs).
    normalize_throughputs: bool = False
    #: Max-min's reference throughput: ``proportional`` (Gavel) or ``max-min-lp`` (max-min over unit throughputs).
    maxmin_reference: str = "proportional"
    #: Finish-time fairness's isolated throughput: ``equal-share`` (Gavel) or ``max-min-lp``.
    ftf_isolated: str = "equal-share"
    #: Finish-time fairness's denominator: ``isolated-time`` (Gavel's, from the work done) or ``wall-clock``.
    ftf_age: str = "isolated-time"
    #: LP algorithm: ``ipm`` behaves like Gavel's interior-point solver, ``simplex`` returns a vertex.
    lp_method: str = "ipm"
    name: str = "gavel"
    #: The scheduler's ordering stage (set by the registry): under ``latency-ratio`` leases go to jobs in
    #: that queue's order, each on the type its LP time fractions favour (the Hops paper's Gavel baseline);
    #: under ``fifo`` Gavel ranks jobs by its own priorities.
    ordering: str = "fifo"

    traits: ClassVar[AllocationTraits] = AllocationTraits(rigid=True, uses_order=False, names_gpu_type=True,
                                                          follows_orderings=("latency-ratio",))

    def __post_init__(self) -> None:
        for field_name, allowed in (("objective", OBJECTIVES), ("lp_method", LP_METHODS),
                                    ("throughputs", THROUGHPUT_SOURCES), ("maxmin_reference", MAXMIN_REFERENCES),
                                    ("ftf_isolated", FTF_ISOLATED), ("ftf_age", FTF_AGES)):
            value = getattr(self, field_name)
            if value not in allowed:
                raise ValueError(f"unknown {field_name} '{value}' (one of: {', '.join(allowed)})")
        self.estimator = None
        if self.throughputs == "bootstrap":
            from dlsched.estimators.goodput import LearnedGoodputEstimator

            self.estimator = LearnedGoodputEstimator(mode="bootstrap" if self.profile else "none",
                                                     hetero_aware=True)
        self._job_time: dict[str, dict[str, float]] = {}
        self._cluster_time: dict[str, float] = {}
        self._lease_start = -math.inf
        self._leases: dict[str, str] = {}
        self.time_fractions: dict[str, dict[str, float]] = {}
        self.lp_s: list[float] = []
        self.isolated_time_s: dict[str, float] = {}
        self._prev_remaining: dict[str, float] = {}
        self._prev_isolated: dict[str, float] = {}

    def needs_oracle(self) -> bool:
        return self.throughputs == "profiled"

    def _profiles_jobs(self) -> bool:
        return self.throughputs == "bootstrap" and self.profile

    def describe(self) -> str:
        return (f"{self.name} (objective={self.objective}, lease_s={self.lease_s:g}, throughputs={self.throughputs}"
                f"{', normalized' if self.normalize_throughputs else ''}, maxmin_reference={self.maxmin_reference}, "
                f"ftf_isolated={self.ftf_isolated}, ftf_age={self.ftf_age})")

    # -- throughputs -----------------------------------------------------------------------------------
    def throughput(self, job: JobView, gpu_type: str, per_node: int, gpus_of_type: int) -> float:
        """Steps per second of the job's fixed configuration, packed on ``gpu_type`` (0: cannot run there).

        Steps are the job's batches; a job without a batch size (duration traces) reports work units.
        """
        k = job.spec.num_gpus
        if k > gpus_of_type or not job.spec.allows_gpu_type(gpu_type):
            return 0.0
        nodes = max(1, math.ceil(k / max(per_node, 1)))
        out = self.require_estimator().evaluate_many(rigid_view(job), gpu_type, np.array([[nodes, k]]))
        if not out.goodput[0] > 0:
            return 0.0
        value = float(out.throughput_sps[0])
        batch = int(out.batch_size[0])
        if batch > 0:
            value /= batch
        return value if math.isfinite(value) and value > 0 else 0.0

    @staticmethod
    def _remaining_s(job: JobView) -> float:
        rem = job.remaining_estimate_s()
        if rem is None and job.progress_fraction > 0 and job.attained_service_s > 0:
            rem = job.attained_service_s * (1.0 - job.progress_fraction) / job.progress_fraction
        return float(rem) if rem is not None and math.isfinite(rem) and rem > 0 else 3600.0

    # -- one engine round ------------------------------------------------------------------------------
    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        t_est = time.perf_counter()
        self.require_estimator().update(view)
        t_est = time.perf_counter() - t_est
        active = {j.job_id: j for j in view.jobs}
        for job_id in [k for k in self._job_time if k not in active]:
            del self._job_time[job_id]
        for job_id in [k for k in self.isolated_time_s if k not in active]:
            del self.isolated_time_s[job_id]
        new_round = view.round_s >= self.lease_s - 1e-9 or view.time_s >= self._lease_start + self.lease_s - 1e-6
        free = dict(view.cluster.gpus_per_type)
        for gtype, held in view.profiling_gpus_by_type().items():  # profiles that outlast their round
            free[gtype] -= held
        plan = Plan()
        if new_round:
            self._lease_start = view.time_s
            if self._profiles_jobs():
                self._profile(view, free, plan, new_only=True)
            queue = {j.job_id: i for i, j in enumerate(ordered)} if self.ordering != "fifo" else None
            self._leases = self._new_lease(view, free, plan, queue)
        else:
            self._leases = {k: g for k, g in self._leases.items() if k in active and not active[k].profiling}
            for k, g in self._leases.items():
                free[g] -= active[k].spec.num_gpus
            if self._profiles_jobs():
                self._profile(view, free, plan, new_only=False)
        plan.demands = [Demand(job=active[k], num_gpus=active[k].spec.num_gpus, gpu_type=g,
                               batch_size=rigid_batch(active[k]), pinned=not new_round)
                        for k, g in self._leases.items()]
        plan.info["gavel.estimator_s"] = t_est
        return plan

    def facts_for(self, job_id: str) -> dict[str, object] | None:
        """The job's LP time fractions per GPU type and the type its lease names (explanations)."""
        x = self.time_fractions.get(job_id)
        if x is None:
            return None
        lease = self._leases.get(job_id)
        parts = ", ".join(f"{g} {v:.2f}" for g, v in sorted(x.items(), key=lambda kv: -kv[1]))
        got = f"lease on {lease}" if lease else "no lease: the types it favours are taken by higher priorities"
        return {"time_fractions": dict(x), "objective": self.objective, "lease": lease,
                "why": f"Gavel's {self.objective} time fractions {parts}; {got}"}

    def _isolated_time(self, jobs: list[JobView], remaining: np.ndarray) -> np.ndarray:
        """Each job's isolated time so far, Gavel's way: the steps done since the previous solve the job was
        in, over its isolated throughput then, added up (0 for a job seen for the first time).

        Remaining steps come from duration estimates, which may rise between solves; such a rise counts as
        no work done rather than negative time.
        """
        out = np.zeros(len(jobs))
        for i, j in enumerate(jobs):
            total = self.isolated_time_s.get(j.job_id, 0.0)
            before, iso = self._prev_remaining.get(j.job_id), self._prev_isolated.get(j.job_id, 0.0)
            if before is not None and iso > 0:
                total += max(0.0, before - float(remaining[i])) / iso
            self.isolated_time_s[j.job_id] = total
            out[i] = total
        return out

    def _hand_out(self, ranked: list[tuple[int, str]], gangs: list[int], free: dict[str, int]) -> dict[int, str]:
        """Leases for ``ranked`` (job index, GPU type) pairs, best first: each job at most once, on the first of
        its pairs whose type still has its whole gang (``gangs[i]`` GPUs) free; a job that fits nowhere is
        passed over and later jobs may still take GPUs (Gavel's greedy). Job index -> type."""
        left = dict(free)
        chosen: dict[int, str] = {}
        for i, g in ranked:
            if i in chosen or gangs[i] > left[g]:
                continue
            chosen[i] = g
            left[g] -= gangs[i]
        return chosen

    def _profile(self, view: ClusterView, free: dict[str, int], plan: Plan, *, new_only: bool) -> None:
        """Profile jobs on one free gang of each GPU type they have not been measured on.

        At a lease's start only jobs never profiled are (a partly profiled job takes its lease instead);
        inside a lease, a waiting job is also profiled on the types it missed.
        """
        cluster = view.cluster
        for j in sorted(view.jobs, key=lambda j: (j.spec.submit_time_s, j.job_id)):
            if j.profiling or j.job_id in self._leases or j.is_running:
                continue
            if new_only and j.profiled_types:
                continue
            unit = max(1, int(j.spec.gpu_unit))
            shapes = []
            for g in cluster.type_names:
                if g in j.profiled_types or not j.spec.allows_gpu_type(g) \
                        or cluster.gpus_per_type[g] < j.spec.num_gpus or free[g] < unit:
                    continue
                shapes.append((g, unit))
                free[g] -= unit
            if shapes:
                plan.profiles.append(ProfileRequest(j, tuple(shapes)))

    def _new_lease(self, view: ClusterView, free: dict[str, int], plan: Plan,
                   queue: dict[str, int] | None = None) -> dict[str, str]:
        """Solve the LP, rank (job, type) pairs by priority and hand out leases; job -> type, biggest first.

        With a ``queue`` (job id -> position) the pairs rank by the job's place in it first, then by the
        job's LP time fraction of the type.
        """
        cluster = view.cluster
        types = list(cluster.type_names)
        profiled = {r.job.job_id for r in plan.profiles}
        jobs = [j for j in sorted(view.jobs, key=lambda j: (j.spec.submit_time_s, j.job_id))
                if not j.profiling and j.job_id not in profiled]
        for j in jobs:
            if j.job_id not in self._job_time:
                self._job_time[j.job_id] = {g: self.lease_s / 2 for g in types}
                for g in types:
                    self._cluster_time[g] = self._cluster_time.get(g, 0.0) + self.lease_s / 2
        per_node = {g: max(cluster.nodes[n].num_gpus for n in cluster.nodes_of_type[g]) for g in types}
        tput = np.array([[self.throughput(j, g, per_node[g], cluster.gpus_per_type[g]) for g in types]
                         for j in jobs]).reshape(len(jobs), len(types))
        keep = tput.sum(axis=1) > 0
        jobs = [j for j, k in zip(jobs, keep, strict=True) if k]
        tput = tput[keep]
        if not jobs:
            self.time_fractions = {}
            self._prev_remaining, self._prev_isolated = {}, {}
            return {}
        scale = np.array([j.spec.num_gpus for j in jobs], dtype=float)
        capacity = np.array([free[g] for g in types], dtype=float)
        ages = np.array([j.age_s for j in jobs])
        remaining = np.array([self._remaining_s(j) for j in jobs]) * tput.max(axis=1)
        spent = None
        if self.objective == "finish-time-fairness":
            spent = ages if self.ftf_age == "wall-clock" else self._isolated_time(jobs, remaining)
        t0 = time.perf_counter()
        x = solve_allocation(self.objective, tput, scale, capacity, ages_s=ages, remaining=remaining,
                             isolated_time_s=spent, normalize=self.normalize_throughputs,
                             maxmin_reference=self.maxmin_reference, ftf_isolated=self.ftf_isolated,
                             method=self.lp_method)
        if self.objective == "finish-time-fairness" and self.ftf_age == "isolated-time":
            iso = reference_throughputs(self.ftf_isolated, tput, scale, capacity, self.lp_method)
            self._prev_remaining = {j.job_id: float(r) for j, r in zip(jobs, remaining, strict=True)}
            self._prev_isolated = {j.job_id: float(v) for j, v in zip(jobs, iso, strict=True)}
        self.lp_s.append(time.perf_counter() - t0)
        plan.info["gavel.lp_s"] = self.lp_s[-1]
        self.time_fractions = {j.job_id: {g: float(x[i, k]) for k, g in enumerate(types)} for i, j in enumerate(jobs)}
        # priorities: allocation over the fraction of the type's time the job has received
        entries = []
        rank = {g: i for i, g in enumerate(types)}
        for i, j in enumerate(jobs):
            for k, g in enumerate(types):
                if tput[i, k] <= 0:
                    continue
                total = self._cluster_time.get(g, 0.0)
                frac = self._job_time[j.job_id][g] / total if total > 0 else 0.0
                if x[i, k] <= 0:
                    prio = 0.0
                elif frac > 0:
                    prio = x[i, k] / frac
                else:
                    prio = x[i, k] * 1e9
                first = float(queue.get(j.job_id, len(queue))) if queue is not None else -prio
                entries.append((first, -x[i, k], j.spec.submit_time_s, -rank[g], i, g))
        entries.sort()
        chosen = self._hand_out([(i, g) for *_, i, g in entries], [j.spec.num_gpus for j in jobs], free)
        order = sorted(chosen, key=lambda i: (-jobs[i].spec.num_gpus, jobs[i].spec.submit_time_s, jobs[i].job_id))
        leases = {jobs[i].job_id: chosen[i] for i in order}
        for job_id, g in leases.items():  # every lease fits its type's free GPUs, so placement serves it
            self._job_time[job_id][g] += self.lease_s
            self._cluster_time[g] = self._cluster_time.get(g, 0.0) + self.lease_s
        return leases
