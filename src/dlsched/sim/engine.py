"""The simulation engine: owns time, jobs and the world; asks a scheduler for a decision every round.

Rounds start at multiples of ``round_s`` (shifted by ``round_offset_s``, the phase of a service's clock when
the engine replays one). Inside a round, events happen at their exact times: a job's checkpoint-restore
ends, a job completes (its GPUs then idle until the next round). Arrivals join the active set at the next
round boundary; their wait counts from submission. When nothing is active the engine jumps to the round of
the next arrival. With ``completion_at_round`` a job's completion is what a round-based service sees: the
job holds its GPUs, and its JCT runs, until the round boundary after its last step.

The engine is the only part that reads the world. A scheduler receives a :class:`ClusterView` with the
facts a real cluster would give it, and the observations running jobs report.

Jobs whose workers share GPUs (packing) run at rates that depend on their partners: the engine hands the
world each job's co-location (:mod:`dlsched.sim.colocated`) and ends a stretch of a round when a job that
shares a GPU completes, so its partners speed up from that moment. Without packing nothing changes.

Inputs are range-checked before a run starts (the RunConfig, the trace, the cluster file); as a second line
of defence the engine itself refuses to loop forever: simulated time must move forward every step, and a
job that holds GPUs without making progress (its rate zero or not finite) for ``stall_rounds`` rounds in a
row stops the run with :class:`SimulationStuck`, which the CLI prints as one ``error:`` line.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dlsched.core import (
    Cluster,
    ClusterView,
    GradientObservation,
    InputError,
    Job,
    JobSpec,
    JobStatus,
    JobView,
    Placement,
    Quotas,
    ThroughputObservation,
)
from dlsched.policies.stages import Scheduler
from dlsched.sim.colocated import full_pct, has_partner, sharing_of
from dlsched.sim.holders import GpuHolders
from dlsched.sim.initial import InitialState, check_initial_state, start_from
from dlsched.sim.invariants import check_decision
from dlsched.sim.job_checks import validate_jobs
from dlsched.sim.job_records import job_records
from dlsched.sim.job_state import JobState
from dlsched.sim.metrics import FtfDefinition
from dlsched.sim.records import JobRecord, RoundRecord, Segment
from dlsched.sim.round_records import PendingRound, round_record, settle_waiting_queue
from dlsched.world.base import AdaptiveJobPhysics, JobPhysics, Rate, World, slowed
from dlsched.world.sharing import JobSharing

log = logging.getLogger("dlsched.sim")
#: Most plans a scheduler that plans inside a round may make after the round's first (one per completion).
MAX_PLANS_PER_ROUND = 64
#: Where a run's wall time goes (``SimulationResult.phase_s``): building the scheduler's view, the
#: scheduler, checking its decision, applying it (profiling included), advancing time (rates, progress,
#: completions, observations), the round records, and the job records at the end.
PHASES = ("view", "policy", "check", "apply", "advance", "round_record", "job_records")


class SimulationStuck(InputError):
    """Simulated time cannot advance, or a job holding GPUs can never progress: the run cannot finish.

    An :class:`InputError` because only inputs (a job the world cannot run at the given request, a round
    length the clock cannot add) get a run here; the message names the job or value to change.
    """


@dataclass(frozen=True)
class SimConfig:
    """Engine settings for one run."""

    round_s: float = 60.0
    seed: int = 0
    #: Stop at this simulated time even if jobs remain (they are reported as unfinished).
    max_time_s: float | None = None
    #: Stop when no job has run for this many consecutive rounds and no arrival is pending.
    stall_rounds: int = 200
    #: Which reading of finish-time fairness the job records carry (a metric only: the run is the same).
    ftf: FtfDefinition = field(default_factory=FtfDefinition)
    #: Charge the policy's own (measured) time to the simulation: a round's decision takes effect when it
    #: has been computed, ``min(policy_s, round_s)`` after the round starts; until then the previous
    #: allocation keeps running. Off: decisions take effect at once (as the papers simulate).
    charge_policy_time: bool = False
    quotas: Quotas | None = None  # per-user and per-team GPU quotas, handed to the scheduler in its view
    #: Rounds start at ``round_offset_s + k * round_s`` (0 <= offset < round_s): the phase of the clock of the
    #: service a replay reproduces, whose first round after the first submission is not at that submission.
    round_offset_s: float = 0.0
    #: A job that completes inside a round is seen complete at the round's end, as ``dlsched serve`` sees it
    #: (it learns of a finish when it polls the workers, once a round): it holds its GPUs and its JCT runs
    #: until then, and a scheduler that plans within rounds does not plan on its completion. Off: a job
    #: completes at its last step (its GPUs idle until the next round), as the papers simulate.
    completion_at_round: bool = False
    #: Start from a cluster's state rather than an empty cluster (:mod:`dlsched.sim.initial`): round 0 runs
    #: the state's placements from its time, the scheduler decides from round 1.
    initial: InitialState | None = None


@dataclass
class SimulationResult:
    jobs: list[JobRecord]
    rounds: list[RoundRecord]
    segments: list[Segment]
    num_gpus: int
    sim_wall_s: float
    end_time_s: float
    #: Wall seconds per phase of the engine's work (:data:`PHASES`).
    phase_s: dict[str, float] = field(default_factory=dict)


class Engine:
    """Runs one scheduler on one cluster and trace."""

    def __init__(self, cluster: Cluster, specs: Sequence[JobSpec], scheduler: Scheduler, world: World,
                 config: SimConfig | None = None,
                 on_progress: Callable[[float, int, int], None] | None = None) -> None:
        self.cluster = cluster
        self.scheduler = scheduler
        self.world = world
        self.config = config or SimConfig()
        self.on_progress = on_progress
        self.traits = scheduler.traits
        self.rigid = self.traits.rigid
        phys = validate_jobs(specs, cluster, world, rigid=self.rigid)
        order = sorted(range(len(specs)), key=lambda i: (specs[i].submit_time_s, specs[i].job_id))
        self.pending = [JobState(Job(spec=specs[i]), phys[i], order=n) for n, i in enumerate(order)]
        self._phys_by_id = {st.job.job_id: st.phys for st in self.pending}
        for st in self.pending:
            st.batch_limits = st.phys.batch_limits()
        self.active: dict[str, JobState] = {}
        self.done: list[JobState] = []
        self.rounds: list[RoundRecord] = []
        self.segments: list[Segment] = []
        self._grad_cache: dict[tuple, tuple[float, float]] = {}
        self.gpu_scores = world.speeds.measured_profile()
        self.model_class = world.speeds.model_classes()
        #: Job id -> how its workers share GPUs, for jobs packed, restricted or splitting their batch
        #: unevenly (:mod:`dlsched.sim.colocated`); rebuilt whenever a stretch of time starts.
        self._sharing: dict[str, JobSharing] = {}
        #: Who holds which GPU, kept up to date on placement changes (:mod:`dlsched.sim.holders`).
        self._holders = GpuHolders(cluster)
        #: Wall seconds per phase so far (:data:`PHASES`).
        self.phase_s: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        #: Each round's record with the jobs that waited unprofiled then (:mod:`dlsched.sim.round_records`).
        self._pending_rounds: list[PendingRound] = []
        #: The end of the round being simulated (where ``completion_at_round`` puts a completion).
        self._round_end = math.inf
        if self.config.initial is not None:
            check_initial_state(self.config.initial, specs, cluster)

    def physics_of(self, job_id: str) -> JobPhysics:
        """The world's physics of a job (for the simulator's oracle adapter only; never for policies)."""
        return self._phys_by_id[job_id]

    # -- view ----------------------------------------------------------------------------------------
    def _view(self, t: float) -> ClusterView:
        views = []
        for st in self.active.values():
            j = st.job
            if j.profiling_until_s <= t:
                if j.status is JobStatus.PROFILING:
                    j.status = JobStatus.QUEUED
                j.profile_placement = Placement.empty()
            views.append(JobView(
                spec=j.spec, status=j.status, placement=j.placement, batch_size=j.batch_size,
                age_s=t - j.spec.submit_time_s, wait_s=t - j.spec.submit_time_s - j.attained_service_s,
                attained_gpu_s=j.attained_gpu_s, attained_service_s=j.attained_service_s, restarts=j.restarts,
                progress_fraction=st.phys.progress_fraction(j.progress), start_time_s=j.start_time_s,
                estimated_duration_s=st.phys.estimated_duration_s(),
                throughput_obs=[o for o in st.new_tput if o.time_s <= t], gradient_obs=st.new_grad,
                profiled_types=j.profiled_types, profiling=j.profiling_until_s > t,
                profile_placement=j.profile_placement,
                batch_limits=st.batch_limits, queue_wait_s=st.queue_wait_at(t)))
            st.new_tput, st.new_grad = [o for o in st.new_tput if o.time_s > t], []
        return ClusterView(time_s=t, round_s=self.config.round_s, cluster=self.cluster, jobs=views,
                           gpu_scores=self.gpu_scores, model_class=self.model_class, quotas=self.config.quotas)

    # -- main loop -----------------------------------------------------------------------------------
    def run(self) -> SimulationResult:
        cfg = self.config
        wall0 = time.perf_counter()
        t = cfg.round_offset_s
        next_pending = 0
        idle_rounds = 0
        round_no = 0
        total_jobs = len(self.pending)
        if not (math.isfinite(cfg.round_s) and cfg.round_s > 0):
            raise SimulationStuck(f"round length must be a positive number of seconds, got {cfg.round_s!r}",
                                  field="round_s")
        if cfg.initial is not None:
            t, next_pending = start_from(self, cfg.initial)
            round_no = 1
        while next_pending < len(self.pending) or self.active:
            if cfg.max_time_s is not None and t >= cfg.max_time_s:
                break
            while next_pending < len(self.pending) and self.pending[next_pending].job.spec.submit_time_s <= t:
                st = self.pending[next_pending]
                st.job.status = JobStatus.QUEUED
                self.active[st.job.job_id] = st
                next_pending += 1
            if not self.active:
                nxt = self.pending[next_pending].job.spec.submit_time_s
                before, steps = t, (nxt - cfg.round_offset_s) / cfg.round_s
                t = cfg.round_offset_s + math.ceil(steps) * cfg.round_s if math.isfinite(steps) else math.inf
                if t < nxt:  # floating point: the product can land just below the arrival
                    t += cfg.round_s
                if not (math.isfinite(t) and t > before):
                    raise SimulationStuck(f"simulated time cannot advance from {before:g} s to the next arrival "
                                          f"at {nxt:g} s with {cfg.round_s:g} s rounds",
                                          source=self.pending[next_pending].job.spec.origin,
                                          field="submit_time_s")
                continue
            c0 = time.perf_counter()
            view = self._view(t)
            p0 = time.perf_counter()
            decision = self.scheduler.schedule(view)
            c1 = time.perf_counter()
            policy_s = c1 - p0
            self._check(decision, t)
            c2 = time.perf_counter()
            phase = self.phase_s
            phase["view"] += p0 - c0
            phase["policy"] += policy_s
            phase["check"] += c2 - c1
            t_end = t + cfg.round_s
            if not t_end > t:
                raise SimulationStuck(f"simulated time cannot advance past {t:g} s with {cfg.round_s:g} s rounds "
                                      f"(the sum does not change in floating point)", field="round_s")
            self._round_end = t_end
            t_apply = min(t + policy_s, t_end) if cfg.charge_policy_time else t
            if t_apply > t:  # the previous allocation runs while the policy computes
                self._advance(t, t_apply)
            c3 = time.perf_counter()
            restarts = self._apply(decision, t_apply)
            c4 = time.perf_counter()
            profiles_running = self._profiles_running(t_apply)
            record, unprofiled = round_record(round_no, t, policy_s, restarts, profiles_running,
                                              holders=self._holders, cluster=self.cluster, active=self.active)
            if unprofiled:
                self._pending_rounds.append((record, unprofiled))
            record.info = {k: float(v) for k, v in decision.info.items()}
            c5 = time.perf_counter()
            self._advance_round(t_apply, t_end)
            self._check_progress(cfg.stall_rounds)
            c6 = time.perf_counter()
            phase["advance"] += (c3 - c2) + (c6 - c5)
            phase["apply"] += c4 - c3
            phase["round_record"] += c5 - c4
            self.rounds.append(record)
            round_no += 1
            if record.running_jobs == 0 and not profiles_running and next_pending >= len(self.pending):
                idle_rounds += 1
                if idle_rounds >= cfg.stall_rounds:
                    log.warning("no job could run for %d rounds; stopping with %d jobs unfinished",
                                idle_rounds, len(self.active))
                    t = t_end
                    break
            else:
                idle_rounds = 0
            t = t_end
            if self.on_progress is not None:
                self.on_progress(t, len(self.done), total_jobs)
        end_t = t
        for st in list(self.active.values()):
            self._close_segment(st, min(end_t, t))
        c0 = time.perf_counter()
        settle_waiting_queue(self._pending_rounds, {st.job.job_id for st in [*self.done, *self.active.values()]
                                                    if st.queue_entry_s is not None})
        records = job_records([*self.done, *self.active.values(), *self.pending[next_pending:]], end_t,
                              self.rounds, self.cluster, cfg.round_s, cfg.ftf)
        self.phase_s["job_records"] += time.perf_counter() - c0
        return SimulationResult(jobs=records, rounds=self.rounds, segments=self.segments,
                                num_gpus=self.cluster.num_gpus, sim_wall_s=time.perf_counter() - wall0,
                                end_time_s=end_t, phase_s=dict(self.phase_s))

    def _check(self, decision, t: float) -> None:
        """Refuse a decision that breaks an invariant (over-committed GPU, broken gang, bad count)."""
        check_decision(decision, self.cluster, {k: s.job.spec for k, s in self.active.items()},
                       allows_packing=self.traits.allows_packing, rigid=self.rigid,
                       policy=self.scheduler.name,
                       profiling={k for k, s in self.active.items() if s.job.profiling_until_s > t},
                       current={k: (s.job.placement, s.job.batch_size) for k, s in self.active.items()
                                if s.job.placement},
                       profile_held=self._profiles_running(t))

    def _profiles_running(self, t: float) -> dict[str, Placement]:
        """Job id -> the GPUs its profile holds, for every profile still running at ``t``."""
        return {k: s.job.profile_placement for k, s in self.active.items()
                if s.job.profiling_until_s > t and s.job.profile_placement}

    def _advance_round(self, t: float, t_end: float) -> None:
        """Advance to the round's end. A scheduler that plans inside a round (Hops) plans again at each
        completion that frees GPUs and, when its traits say ``plans_on_profile_end``, at each end of a profile
        (the job joins the waiting queue then, section 3.1), on a view of that moment; its plans end with the
        round."""
        more = getattr(self.scheduler, "schedule_more", None)
        if not self.traits.plans_within_round or more is None:
            self._advance(t, t_end)
            return
        on_profile_end = self.traits.plans_on_profile_end
        for _ in range(MAX_PLANS_PER_ROUND):
            t_next = self._next_completion(t, t_end)
            if on_profile_end:
                t_profile = self._next_profile_end(t, t_end)
                if t_profile is not None and (t_next is None or t_profile < t_next):
                    t_next = t_profile
            if t_next is None:
                break
            self._advance(t, t_next)
            t = t_next
            decision = more(self._view(t))
            self._check(decision, t)
            self._apply(decision, t)
        self._advance(t, t_end)

    def _next_profile_end(self, t: float, t_end: float) -> float | None:
        """The earliest time in (t, t_end) at which a profile ends, or None."""
        ends = [s.job.profiling_until_s for s in self.active.values() if t < s.job.profiling_until_s < t_end]
        return min(ends) if ends else None

    def _next_completion(self, t: float, t_end: float) -> float | None:
        """The earliest time in (t, t_end) at which a running job completes, or None (always None when
        completions are seen at the round's end)."""
        if self.config.completion_at_round:
            return None
        first: float | None = None
        for st in self.active.values():
            j = st.job
            if not j.placement:
                continue
            rate = self._rate(st)
            if not (math.isfinite(rate.work_per_s) and rate.work_per_s > 0):
                continue
            start = min(max(t, j.restart_until_s), t_end)
            end, _, _ = self._progress(st, rate, start, t_end)
            if t < end < t_end and (first is None or end < first):
                first = end
        return first

    # -- applying a decision ---------------------------------------------------------------------------
    def _apply(self, decision, t: float) -> int:
        restarts = 0
        allocs = decision.allocations
        for job_id, st in self.active.items():
            j = st.job
            alloc = allocs.get(job_id)
            new_place = alloc.placement if alloc is not None else Placement.empty()
            batch = alloc.batch_size if alloc is not None else None
            share = alloc.gpu_share if alloc is not None else 1.0
            mps, split = (alloc.mps_pct, alloc.batch_split) if alloc is not None else ((), ())
            if new_place == j.placement:
                j.batch_size, j.gpu_share = (batch if new_place else None), share
                # a coordinator's search paused the job, and switching a worker's share restriction pauses
                # it again: the pauses follow one another (no restart, no progress)
                pause = alloc.pause_s if alloc is not None and new_place else 0.0
                if new_place:  # a job that restarts its workers every round pays their start-up each round
                    pause += st.phys.round_overhead_s
                if new_place and full_pct(mps, len(new_place)) != full_pct(j.mps_pct, len(new_place)):
                    pause += self.world.config.share_change_s
                if pause > 0:
                    j.restart_until_s = max(j.restart_until_s, t + pause)
                j.mps_pct, j.batch_split = mps, split
                self._held(st)
                continue
            # placement changed: close the old segment, pay checkpoint-restore on the new GPUs
            self._close_segment(st, t)
            old_place = j.placement
            j.placement = new_place
            j.batch_size, j.gpu_share = batch, share
            j.mps_pct, j.batch_split = mps, split
            self._held(st)
            st.rate, st.rate_key = None, None
            if new_place:
                if j.start_time_s is None:
                    j.start_time_s = t
                else:
                    j.restarts += 1
                    restarts += 1
                    if old_place and self._same_shape(old_place, new_place):
                        j.moves += 1
                j.restart_until_s = t + max(st.phys.restart_delay_s, alloc.pause_s if alloc is not None else 0.0)
                j.status = JobStatus.RESTARTING if st.phys.restart_delay_s > 0 else JobStatus.RUNNING
                j.last_gpu_type = self.cluster.gpu_type_of[new_place.gpus[0]]
                st.segment_start_s = t
            else:
                j.status = JobStatus.QUEUED
        for job_id, placement in decision.profiles.items():
            if job_id in self.active:  # a job may complete while a charged policy computes
                self._profile(self.active[job_id], placement, t)
        return restarts

    def _same_shape(self, a: Placement, b: Placement) -> bool:
        """Same GPU type and same GPUs per node (as a multiset): a move, not a change of allocation."""
        type_of = self.cluster.gpu_type_of
        return (type_of[a.gpus[0]] == type_of[b.gpus[0]]
                and a.node_counts(self.cluster) == b.node_counts(self.cluster))

    def _held(self, st: JobState) -> None:
        """Tell the GPU-holder index of the job's placement now (after every change to it)."""
        j = st.job
        self._holders.update(j.job_id, st.order, j.placement.gpus, bool(j.mps_pct) or bool(j.batch_split))

    def _profile(self, st: JobState, placement: Placement, t: float) -> None:
        """Run Sia-style profiling: GPUs held and charged for the profiling time, observations reported."""
        j = st.job
        duration, obs = self.world.profile(st.phys, placement, t)
        j.profiling_until_s = t + duration
        j.profile_placement = placement
        st.profile_s += duration
        if st.queue_entry_s is None:  # the job joins the waiting queue when its first profile ends
            st.queue_entry_s, st.service_at_entry_s = t + duration, j.attained_service_s + duration
        j.status = JobStatus.PROFILING
        types = sorted({self.cluster.gpu_type_of[g] for g in placement.gpus})
        j.profiled_types = tuple(sorted(set(j.profiled_types) | set(types)))
        j.attained_service_s += duration
        for gtype in types:
            n = sum(1 for g in placement.gpus if self.cluster.gpu_type_of[g] == gtype)
            j.attained_gpu_s += n * duration
            j.gpu_s_by_type[gtype] = j.gpu_s_by_type.get(gtype, 0.0) + n * duration
            j.restart_gpu_s += n * duration
            self.segments.append(Segment(job_id=j.job_id, start_s=t, end_s=t + duration, gpu_type=gtype,
                                         num_gpus=n, restarting_until_s=t + duration,
                                         gpus=tuple(g for g in placement.gpus if self.cluster.gpu_type_of[g] == gtype)))
        st.new_tput.extend(obs)

    def _close_segment(self, st: JobState, t: float) -> None:
        j = st.job
        if j.placement and t > st.segment_start_s:
            self.segments.append(Segment(job_id=j.job_id, start_s=st.segment_start_s, end_s=t,
                                         gpu_type=self.cluster.gpu_type_of[j.placement.gpus[0]],
                                         num_gpus=len(j.placement),
                                         restarting_until_s=min(t, max(st.segment_start_s, j.restart_until_s)),
                                         gpus=tuple(j.placement.gpus)))

    # -- advancing time ------------------------------------------------------------------------------
    def _rate(self, st: JobState) -> Rate:
        """The job's rate on its allocation; recomputed only when the allocation or efficiency bucket changes."""
        j = st.job
        sharing = self._sharing.get(j.job_id)
        key: tuple = (j.placement.gpus, j.batch_size, j.gpu_share, sharing)
        if isinstance(st.phys, AdaptiveJobPhysics):
            # statistical efficiency is piecewise constant in progress (one value per measured epoch)
            key += (self.world.efficiency.progress_bucket(j.spec.model, j.progress),)
        if st.rate is not None and st.rate_key == key:
            return st.rate
        rate = self.world.rate(st.phys, j.progress, j.placement, j.batch_size, j.gpu_share, sharing)
        st.rate, st.rate_key = rate, key
        return rate

    def _advance(self, t: float, t_end: float) -> None:
        """Advance every running job to ``t_end``, in stretches: a job that shares a GPU completing ends a
        stretch, so its partners run at their new rate from that moment (rates key on who shares a GPU)."""
        while True:
            self._sharing = sharing_of([self.active[k] for k in self._holders.sharing_candidates()])
            stop = self._packed_stop(t, t_end) if self._sharing else t_end
            self._advance_span(t, stop)
            if stop >= t_end:
                return
            t = stop

    def _packed_stop(self, t: float, t_end: float) -> float:
        """The earliest completion before ``t_end`` of a job sharing a GPU with another, else ``t_end``."""
        stop = t_end
        for job_id, st in self.active.items():
            if not has_partner(self._sharing.get(job_id)):
                continue
            rate = self._rate(st)
            if not (math.isfinite(rate.work_per_s) and rate.work_per_s > 0):
                continue
            start = min(max(t, st.job.restart_until_s), t_end)
            end, _, _ = self._progress(st, rate, start, t_end)
            if end < stop:
                stop = end
        return stop

    def _advance_span(self, t: float, t_end: float) -> None:
        finished: list[str] = []
        for job_id, st in self.active.items():
            j = st.job
            if not j.placement:
                continue
            rate = self._rate(st)
            if not (math.isfinite(rate.work_per_s) and rate.work_per_s >= 0):
                raise SimulationStuck(f"job '{job_id}' has a progress rate of {rate.work_per_s!r} on its GPUs, so "
                                      f"its end time cannot be computed; check its request and the cluster's "
                                      f"speed factors", source=j.spec.origin or f"job {job_id}", field="model")
            prog_start = min(max(t, j.restart_until_s), t_end)
            end, done_work, slowdown = self._progress(st, rate, prog_start, t_end)
            completes = end < t_end or j.progress + done_work >= st.phys.total_work * (1 - 1e-12)
            # a completion seen at the round's end: the job holds its GPUs until then
            seen = max(end, self._round_end) if completes and self.config.completion_at_round else end
            held = seen - t
            gpus = len(j.placement) * j.gpu_share
            j.attained_service_s += held
            j.attained_gpu_s += gpus * held
            sharing = self._sharing.get(job_id)
            if sharing is not None:
                st.shared_gpu_s += j.gpu_share * held * sum(1 for w in sharing.workers if w.partner is not None)
            restart_part = max(0.0, min(j.restart_until_s, end) - t)
            j.restart_gpu_s += gpus * restart_part
            gtype = j.last_gpu_type or ""
            j.gpu_s_by_type[gtype] = j.gpu_s_by_type.get(gtype, 0.0) + gpus * held
            ran = max(0.0, end - prog_start)
            j.progress += done_work
            if j.status is JobStatus.RESTARTING and j.restart_until_s <= end:
                j.status = JobStatus.RUNNING
            if ran > 0:
                self._observe(st, rate if slowdown == 1.0 else slowed(rate, slowdown), end)
            if completes:
                j.progress = st.phys.total_work
                j.finish_time_s = seen
                j.status = JobStatus.COMPLETED
                self._close_segment(st, seen)
                j.placement = Placement.empty()
                self._held(st)
                finished.append(job_id)
        for job_id in finished:
            self.done.append(self.active.pop(job_id))

    def _progress(self, st: JobState, rate: Rate, start: float, t_end: float) -> tuple[float, float, float]:
        """Run a job from ``start`` to the round's end or its completion: (end, work done, last slowdown).

        The rate holds for the round except where a straggler episode starts or ends on the job's nodes; the
        world splits the round at those times (:meth:`World.episode_pieces`), so a job slows from the exact
        start of an episode and recovers at its exact end.
        """
        j = st.job
        remaining = st.phys.total_work - j.progress
        if self.world.episodes is None or start >= t_end:
            pieces = [(start, t_end, 1.0)]
        else:
            pieces = self.world.episode_pieces(st.phys.perf_class, j.placement.gpus, start, t_end)
        done, slowdown = 0.0, 1.0
        for a, b, slowdown in pieces:
            speed = rate.work_per_s / slowdown
            if speed > 0 and done + speed * (b - a) >= remaining:
                return a + (remaining - done) / speed, remaining, slowdown
            done += speed * (b - a)
        return t_end, done, slowdown

    def _check_progress(self, limit: int) -> None:
        """Stop a run in which a job holds GPUs but can never progress, naming the job (the watchdog)."""
        for st in self.active.values():
            j = st.job
            rate = st.rate
            if not j.placement or rate is None or j.status is JobStatus.RESTARTING:
                st.stuck_rounds = 0
                continue
            if math.isfinite(rate.work_per_s) and rate.work_per_s > 0:
                st.stuck_rounds = 0
                continue
            st.stuck_rounds += 1
            if st.stuck_rounds >= limit:
                raise SimulationStuck(
                    f"job '{j.job_id}' held {len(j.placement)} GPU(s) for {st.stuck_rounds} rounds without "
                    f"progress (its rate there is {rate.work_per_s!r}: the model cannot run at this request, "
                    f"e.g. its batch size does not fit the GPUs' memory); change the job's request",
                    source=j.spec.origin or f"job {j.job_id}", field="batch_size")

    def _observe(self, st: JobState, rate: Rate, t: float) -> None:
        """What the job reports to the scheduler: its step timing and, if adaptive, gradient statistics."""
        j = st.job
        cfg = st.config
        if cfg is None or st.config_key != j.placement.gpus:
            cfg = j.placement.configuration(self.cluster)
            st.config, st.config_key = cfg, j.placement.gpus
        # a job whose physics times noisy iterations reports what it measured in place of the rate's times
        timing: dict = {"step_time_s": rate.step_time_s, "sync_time_s": rate.sync_time_s,
                        **self.world.observation_details(st.phys, j.placement, rate)}
        st.new_tput.append(ThroughputObservation(
            time_s=t, gpu_type=cfg.gpu_type, num_nodes=cfg.num_nodes, num_gpus=cfg.num_gpus,
            local_bsz=int(rate.local_bsz or 0), accum_steps=rate.accum_steps, **timing))
        if isinstance(st.phys, AdaptiveJobPhysics):
            # the statistics a job measures at the batch it runs (Pollux's formula is exact there)
            sqr, var = self._grad_stats(j.spec.model, self.world.efficiency.progress_bucket(j.spec.model, j.progress),
                                        j.progress, rate.batch_size)
            st.new_grad.append(GradientObservation(time_s=t, batch_size=int(rate.batch_size or 0),
                                                   grad_sqr=sqr, grad_var=var))

    def _grad_stats(self, model: str, bucket: int, progress: float, batch: int | None) -> tuple[float, float]:
        key = (model, bucket, batch)
        got = self._grad_cache.get(key)
        if got is None:
            got = self._grad_cache[key] = self.world.efficiency.grad_stats(model, progress, batch_size=batch)
        return got
