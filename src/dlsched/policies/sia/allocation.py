"""Sia's allocation stage: goodput-optimised, heterogeneity-aware choice of a configuration per job
(thesis chapter 3, sections 3.3-3.5).

Every round:

1. **Profiling.** A new job is first profiled on one minimum-sized configuration of each GPU type it
   accepts (:mod:`~dlsched.policies.sia.profiling`); it may be allocated once profiling has finished. With
   ``profiling=oracle`` or ``none`` jobs skip this step.
2. **Configurations** (:mod:`~dlsched.policies.sia.configs`).
3. **Options and values** (:mod:`~dlsched.policies.sia.problem`): normalised goodput, restart factor
   (eq. 3.3), fairness exponent ``p`` and no-allocation penalty ``lambda_`` (eq. 3.4), with the time-varying
   penalty of section 3.5.6 when ``tau`` is set (:mod:`~dlsched.policies.sia.accounting`).
4. **Constraints.** At most one configuration per job; per GPU type the chosen GPU counts fit the GPUs left
   after reservations and profiling; a job may at most double its GPU count per round (``max_doubling``) and
   never goes below its minimum; hybrid-parallel jobs use multiples of their ``gpu_unit``; rigid jobs get
   exactly their GPU count (eq. 3.5); non-preemptible jobs and jobs in the middle of a checkpoint-restore
   keep their configuration (forced options, as the artifact does).
5. **Solve** with HiGHS: the exact MILP for small problems, the warm-started LP relaxation plus rounding
   (:class:`~dlsched.solvers.IncrementalAssignment`) at scale (``solver=auto``).

The result is a :class:`~dlsched.policies.stages.Plan` whose demands name type, GPU count and nodes; each
carries the job's smaller options as fallbacks, best first, for a placement that cannot fit the chosen one.
Sia's own placer is :class:`~dlsched.policies.sia.placement.SiaPlacement`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dlsched.core import Adaptivity, Cluster, ClusterView, InputError, JobStatus, JobView
from dlsched.core.ranges import DAY_S, ranged
from dlsched.estimators.goodput import ZERO_GRAD_MODES
from dlsched.policies.sia.accounting import RESTART_PENALTY_S, TimeShare, restart_factor
from dlsched.policies.sia.configs import ConfigSet, build_config_set, current_config, reserved_gpus
from dlsched.policies.sia.problem import (
    STAY_BONUS,
    Candidates,
    Objective,
    Options,
    RoundInputs,
    build_options,
    candidates_of,
)
from dlsched.policies.sia.profiling import ProfilePlanner, ProfileRequest
from dlsched.policies.sia.reasons import option_facts
from dlsched.policies.stages import AllocationTraits, Demand, EstimatingAllocation, Plan, Shape
from dlsched.solvers import AssignmentProblem, AssignmentResult, IncrementalAssignment, solve_assignment
from dlsched.solvers.continual_assignment import ContinualAssignment, pop_parts

PROFILING_MODES = ("bootstrap", "oracle", "none")
SOLVERS = ("auto", "milp", "lp-round", "incremental", "continual", "warm-simplex", "lagrangian", "lpstar",
           "pop-K")
GROWTH_CAPS = ("current", "largest-seen")
TIE_BREAKS = ("keep", "solver")
#: Default window of the time-varying penalty when switched on without a value (section 3.5.6).
DEFAULT_TAU_S = 300.0


def _seconds_or_off(raw: str, key: str, *, on: float | None, what: str) -> float | None:
    """Positive seconds, ``off`` (None), or ``on`` when the option has a default to switch on."""
    text = raw.strip().lower()
    if on is not None and text in ("on", "true", "yes"):
        return on
    if text in ("off", "none", "false", "no") or (on is not None and text == "0"):
        return None
    hint = "(or on/off)" if on is not None else "(or off)"
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"cannot read '{raw}' as seconds {hint}", field=key) from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{what} must be a positive number of seconds (or off), got '{raw}'", field=key)
    return value


def parse_tau(raw: str, key: str) -> float | None:
    """``on`` for the thesis's 300 s, ``off``/``0`` to disable, else seconds."""
    return _seconds_or_off(raw, key, on=DEFAULT_TAU_S, what="tau")


def parse_budget(raw: str, key: str) -> float | None:
    """Seconds, or ``off``/``none`` for no budget."""
    return _seconds_or_off(raw, key, on=None, what="a time budget")


def parse_reservation(item: str) -> tuple[str, int]:
    gtype, sep, count = item.partition(":")
    if not sep or not count.strip().isdigit() or int(count) < 1:
        raise ValueError(f"reserve: each item must look like 'type:count' with count >= 1 (v100:8), got '{item}'")
    return gtype.strip(), int(count)


@dataclass
class SiaAllocation(EstimatingAllocation):
    """The Sia policy's allocation (see the module docstring); the fields are its tunables.

    State carried across rounds: the estimator (bootstrapped throughput models refined by observations),
    the configuration set and per-job candidates of the cluster, the kept HiGHS model of incremental
    solves, the profiling planner and the time-share accounting.
    """

    #: Fairness exponent on normalised goodput; p < 0 minimises (section 3.3.4, default -0.5).
    p: float = ranged(-0.5, -100.0, 100.0)
    #: Penalty for leaving a job without GPUs (default 1.1).
    lambda_: float = ranged(1.1, 0.0, 1000.0)
    #: ``text`` (default: eq. 3.3 as the thesis writes it, for every age), ``sia`` (eq. 3.3 as the thesis's
    #: artifact computes it: no discount while a job is younger than its restart cost), ``off`` (no
    #: discount), or a fixed factor in (0, 1]. ``text`` and ``sia`` gave identical runs on sia-homo-64 and
    #: sia-hetero-64 (sia-philly:1 and 2): a job is older than S by the time it could change configuration.
    restart_factor: str = "text"
    #: Restart cost S_i assumed for models the estimator and the per-model table do not know (seconds).
    restart_penalty_s: float = ranged(30.0, 0.0, DAY_S, lo_open=True)
    #: Window of the time-varying no-allocation penalty (seconds); None disables it (section 3.5.6).
    tau: float | None = ranged(None, 1.0, DAY_S, parse=parse_tau)
    #: How new jobs' throughput is learned: ``bootstrap`` (profile one min config per type), ``oracle``
    #: (the simulator's truth; comparison runs only) or ``none`` (learn as you go).
    profiling: str = "bootstrap"
    #: ``milp`` (exact), ``lp-round`` (interior-point relaxation + rounding), ``incremental`` (warm-started
    #: simplex on an edited model + rounding), ``auto`` (MILP up to ``milp_max_options`` options), or the
    #: continual methods of thesis chapter 4 over a differential problem, each with the integer shim:
    #: ``continual`` (proximal point with coordinate descent), ``warm-simplex`` or ``lagrangian``; their
    #: baselines ``lpstar`` (the relaxation from scratch each round, same shim) and ``pop-K`` (POP, K parts).
    solver: str = "auto"
    milp_max_options: int = ranged(2500, 0, 1_000_000)
    #: With the continual solvers: after the thesis's shim, give jobs left without GPUs their most valuable
    #: option that still fits (not in the thesis; off follows its text).
    shim_fill: bool = False
    #: With the continual solvers: after the shim (and fill), move jobs to more valuable options that fit in
    #: the GPUs still free, best gain per added GPU first (not in the thesis; off follows its text).
    shim_upgrade: bool = False
    #: With ``solver=continual``: proximal steps per round at most (the thesis gives no number; 15 keeps a
    #: 25,600-GPU round under a second). A round that stops short leaves a move partly made and the next
    #: round carries it on, so moves of small gain wait for later rounds where LP* makes them at once
    #: (docs/continual.md).
    prox_steps: int = ranged(15, 1, 10_000)
    #: With ``solver=continual``: the proximal step size eta (each step maximises ``v @ x - |x - x_prev|^2 /
    #: (2 eta)``, so one step moves a weight by about eta times a move's gain). 100 lets 15 steps make the
    #: moves the relaxation's optimum makes, as the thesis solves it; 10 defers moves of small gain and
    #: restarts fewer jobs than LP* (docs/continual.md).
    prox_eta: float = ranged(100.0, 1e-3, 1e6)
    #: With the continual solvers: seconds a round's solve may take; past it the previous allocation,
    #: repaired for departures and arrivals, is used (``sia.fallback`` = 1 in the round's info). None: no limit.
    time_budget_s: float | None = ranged(None, 1e-3, 3600.0, parse=parse_budget)
    #: Limit GPU-count growth to 2x per round (jobs start from their minimum).
    max_doubling: bool = True
    #: What the 2x limit doubles: ``current`` (the job's GPU count now) or ``largest-seen`` (the largest
    #: count the job has been profiled or has run at, which lets a shrunk job grow back at once).
    growth_cap: str = "current"
    #: Between options of equal value, ``keep`` prefers a running job's current configuration (a restart, a
    #: preemption or a move for no gain in the objective is never chosen; section 3.3.4: "Sia only restarts
    #: jobs if not doing so results in a big reduction" of its objective); ``solver`` leaves ties to HiGHS,
    #: which may swap a running job for an identical queued one from round to round.
    tie_break: str = "keep"
    #: What a gradient report with both statistics zero means to the learned estimator: ``keep`` (0/0 says
    #: nothing; the last informative report stays in force) or ``no-gain`` (taken literally: no batch
    #: larger than the initial one is worth anything until the next non-zero report).
    zero_grad_stats: str = "keep"
    #: Keep the configuration of jobs in the middle of a checkpoint-restore (as Sia's artifact does).
    keep_restarting: bool = True
    #: Job ids that may never be preempted once running (their configuration is forced).
    non_preemptible: tuple[str, ...] = ()
    #: Reserved GPUs per type, ``type:count`` (taken out of Sia's hands, whole nodes from the end).
    reserve: tuple[str, ...] = ()
    #: Largest share of a GPU type's GPUs that profiling may take in one round.
    max_profile_share: float = ranged(0.25, 0.0, 1.0, lo_open=True)
    #: MILP time limit per round (seconds); past it the incumbent (or the rounded relaxation) is used.
    time_limit_s: float = ranged(10.0, 0.0, 3600.0, lo_open=True)
    name: str = "sia"

    #: Under an ordering it follows (``latency-ratio``, as the Hops paper runs Sia) the ILP still decides who
    #: runs; its demands reach the placer in the queue's order, so the head of the queue is placed first.
    traits: ClassVar[AllocationTraits] = AllocationTraits(uses_order=False, names_gpu_type=True,
                                                          follows_orderings=("latency-ratio",))

    def __post_init__(self) -> None:
        self._validate()
        self.estimator = None
        if self.profiling != "oracle":
            from dlsched.estimators.goodput import LearnedGoodputEstimator

            self.estimator = LearnedGoodputEstimator(mode=self.profiling, hetero_aware=True,
                                                     zero_grad=self.zero_grad_stats)
        self._configs: tuple[int, ConfigSet] | None = None
        self._incremental: IncrementalAssignment | None = None
        self._continual: ContinualAssignment | None = None
        #: The last exact solve's resource prices and each job's chosen (type, GPUs, nodes): the next
        #: round's hint.
        self._last: tuple[np.ndarray | None, dict[str, tuple[int, int, int]]] | None = None
        self._cands: dict[str, Candidates | None] = {}
        #: Largest GPU count each job has been profiled or has run at (for ``growth_cap=largest-seen``).
        self._largest_seen: dict[str, int] = {}
        self._planner = ProfilePlanner(self.max_profile_share)
        self._timeshare = TimeShare(self.lambda_, self.tau)
        self._reservations = [parse_reservation(r) for r in self.reserve]
        self._non_preemptible = set(self.non_preemptible)

    def _validate(self) -> None:
        if self.p == 0:
            raise ValueError(f"p must be non-zero (a power mean with p = 0 is undefined), got {self.p}")
        if self.profiling not in PROFILING_MODES:
            raise ValueError(f"profiling must be one of {', '.join(PROFILING_MODES)}, got '{self.profiling}'")
        if self.solver not in SOLVERS[:-1] and pop_parts(self.solver) is None:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got '{self.solver}'")
        if self.zero_grad_stats not in ZERO_GRAD_MODES:
            raise ValueError(f"zero_grad_stats must be one of {', '.join(ZERO_GRAD_MODES)}, "
                             f"got '{self.zero_grad_stats}'")
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got '{self.tie_break}'")
        if self.growth_cap not in GROWTH_CAPS:
            raise ValueError(f"growth_cap must be one of {', '.join(GROWTH_CAPS)}, got '{self.growth_cap}'")
        rf = str(self.restart_factor).strip().lower()
        rf = {"on": "sia", "true": "sia", "eq3.3": "sia", "formula": "sia",
              "none": "off", "false": "off", "0": "off", "no": "off"}.get(rf, rf)
        if rf not in ("sia", "text", "off"):
            try:
                v = float(rf)
            except ValueError:
                raise ValueError(f"restart_factor must be 'sia', 'text', 'off' or a number in (0, 1], "
                                 f"got '{rf}'") from None
            if not 0 < v <= 1:
                raise ValueError(f"restart_factor must be in (0, 1], got {v}")
        self.restart_factor = rf
        for item in self.reserve:
            parse_reservation(item)

    # -- estimator wiring ------------------------------------------------------------------------------
    def needs_oracle(self) -> bool:
        return self.profiling == "oracle"

    def describe(self) -> str:
        return (f"sia (p={self.p}, lambda_={self.lambda_}, restart_factor={self.restart_factor}, tau={self.tau}, "
                f"profiling={self.profiling}, solver={self.solver})")

    # -- one round -------------------------------------------------------------------------------------
    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        cluster = view.cluster
        cs = self._config_set(cluster)
        est = self.require_estimator()
        t_est = time.perf_counter()
        est.update(view)
        estimator_s = time.perf_counter() - t_est
        active = {j.job_id for j in view.jobs}
        self._cands = {k: v for k, v in self._cands.items() if k in active}
        self._largest_seen = {k: v for k, v in self._largest_seen.items() if k in active}
        for j in view.jobs:
            seen = max([len(j.placement), *(o.num_gpus for o in j.throughput_obs)])
            self._largest_seen[j.job_id] = max(self._largest_seen.get(j.job_id, 0), seen)
        self._planner.forget(active)
        self._timeshare.forget(active)
        self._timeshare.track(view)
        blocked = reserved_gpus(cluster, self._reservations)
        profiled = view.profiling_gpus()  # GPUs of profiles that outlast an earlier round are not free
        if profiled is not None:
            blocked = profiled if blocked is None else (blocked | profiled)
        reserved = np.zeros(len(cs.type_names), dtype=np.int64)
        if blocked is not None:  # every round a profile runs: counted per type in one pass, not per GPU
            per_type = np.bincount(cluster.gpu_type_index[blocked], minlength=len(cluster.type_names))
            index = {t: i for i, t in enumerate(cluster.type_names)}
            reserved[:] = [per_type[index[t]] for t in cs.type_names]
        cur_config = {j.job_id: current_config(cluster, cs, j.placement) for j in view.jobs if j.placement}
        forced_ids = self._forced_jobs(view)
        forced_use = np.zeros(len(cs.type_names), dtype=np.int64)
        for jid in forced_ids:
            ti, _, k = cur_config[jid]
            forced_use[ti] += k
        profiles: list[ProfileRequest] = []
        profile_use = np.zeros(len(cs.type_names), dtype=np.int64)
        if self.profiling == "bootstrap":
            profiles, profile_use = self._planner.plan(view, cs, cs.capacity - reserved - forced_use)
        profiled_now = {r.job.job_id for r in profiles}
        capacity = cs.capacity - reserved - profile_use
        eligible = [j for j in ordered if self._eligible(j) and j.job_id not in profiled_now]
        t_build = time.perf_counter()
        inputs = RoundInputs(view=view, cs=cs, cur_config=cur_config, forced_ids=forced_ids, capacity=capacity,
                             growth_base=self._largest_seen if self.growth_cap == "largest-seen" else None)
        objective = Objective(p=self.p, lambda_=self.lambda_, max_doubling=self.max_doubling,
                              time_varying=self.tau is not None,
                              stay_bonus=STAY_BONUS if self.tie_break == "keep" else 0.0)
        opts = build_options(inputs, eligible, est, lambda j: self._candidates(cs, j), self._explore,
                             self._restart_factor, lambda jobs, congested: self._timeshare.penalties(view, jobs, congested),
                             objective)
        build_s = time.perf_counter() - t_build
        t_solve = time.perf_counter()
        result = self._solve(opts, capacity)
        solve_wall_s = time.perf_counter() - t_solve
        plan = Plan(demands=self._demands(cs, opts, result, forced_ids), profiles=profiles, reserved=blocked)
        self._weighed = (cs, opts, result)
        plan.info.update({
            "sia.jobs": float(len(eligible)), "sia.options": float(len(opts.gpus)),
            "sia.objective": float(result.objective), "sia.bound": float(result.bound),
            "sia.milp": 1.0 if result.method == "milp" else 0.0, "sia.solve_s": float(solve_wall_s),
            "sia.highs_s": float(result.solve_s), "sia.estimator_s": float(estimator_s),
            "sia.build_s": float(build_s), "sia.iterations": float(result.iterations),
            "sia.profiles": float(len(profiles)), "sia.fallback": 1.0 if result.status == "fallback" else 0.0,
        })
        return plan

    def _demands(self, cs: ConfigSet, opts: Options, result: AssignmentResult, forced_ids: set[str]) -> list[Demand]:
        """A demand per chosen option, with the job's smaller options (best value first) as fallbacks."""
        demands = []
        choice = result.choice
        lo = np.searchsorted(opts.job_of, np.arange(len(choice)), side="left")
        hi = np.searchsorted(opts.job_of, np.arange(len(choice)), side="right")
        for gi, o in enumerate(choice.tolist()):
            if o < 0:
                continue
            job = opts.jobs[gi]
            own = np.arange(lo[gi], hi[gi])
            smaller = own[(opts.gpus[own] < opts.gpus[o]) & (opts.value[own] > 0)]
            smaller = smaller[np.argsort(-opts.value[smaller], kind="stable")]
            names = cs.type_names  # one conversion per array, not three numpy lookups per option
            fallbacks = tuple(Shape(names[t], k, n) for t, k, n in zip(
                opts.type_idx[smaller].tolist(), opts.gpus[smaller].tolist(), opts.nodes[smaller].tolist(),
                strict=True))
            bsz = None if job.spec.adaptivity is Adaptivity.ADAPTIVE else job.spec.batch_size
            demands.append(Demand(job=job, num_gpus=int(opts.gpus[o]), gpu_type=cs.type_names[int(opts.type_idx[o])],
                                  batch_size=bsz, num_nodes=int(opts.nodes[o]), pinned=job.job_id in forced_ids,
                                  fallbacks=fallbacks))
        return demands

    def facts_for(self, job_id: str) -> dict[str, Any] | None:
        """The configurations weighed for the job last round and the objective's terms (explanations)."""
        weighed = getattr(self, "_weighed", None)
        if weighed is None:
            return None
        cs, opts, result = weighed
        job = next((j for j in opts.jobs if j.job_id == job_id), None)
        restart = self._restart_factor(job) if job is not None and job.placement else 1.0
        return option_facts(cs, opts, result, job_id, p=self.p, restart=restart)

    # -- pieces ----------------------------------------------------------------------------------------
    def _config_set(self, cluster: Cluster) -> ConfigSet:
        if self._configs is None or self._configs[0] != id(cluster):
            self._configs = (id(cluster), build_config_set(cluster))
            self._incremental = None
            self._continual = None
            self._last = None
            self._cands = {}
        return self._configs[1]

    def _candidates(self, cs: ConfigSet, job: JobView) -> Candidates | None:
        """A job's configurations (its spec is immutable, so they are cached per job)."""
        if job.job_id not in self._cands:
            self._cands[job.job_id] = candidates_of(cs, job)
        return self._cands[job.job_id]

    def _forced_jobs(self, view: ClusterView) -> set[str]:
        forced = set()
        for j in view.jobs:
            if not j.placement:
                continue
            if j.job_id in self._non_preemptible:
                forced.add(j.job_id)
            elif self.keep_restarting and j.status is JobStatus.RESTARTING:
                forced.add(j.job_id)
        return forced

    def _eligible(self, job: JobView) -> bool:
        if job.profiling or job.status is JobStatus.PROFILING:
            return False
        if self.profiling == "bootstrap" and not job.profiled_types and not job.placement \
                and job.start_time_s is None and job.job_id not in self._planner.unprofilable:
            return False  # still waits to be profiled
        return True

    def _penalty_s(self, job: JobView) -> float:
        """The job's restart cost S_i: what the estimator knows, else the per-model table, else the tunable."""
        known = self.require_estimator().restart_delay_s(job)
        if known is not None and known > 0:
            return float(known)
        return RESTART_PENALTY_S.get(job.spec.model, self.restart_penalty_s)

    def _restart_factor(self, job: JobView) -> float:
        if self.restart_factor == "off":
            return 1.0
        if self.restart_factor in ("sia", "text"):
            return restart_factor(job.age_s, job.restarts, self._penalty_s(job),
                                  young_free=self.restart_factor == "sia")
        return float(self.restart_factor)

    def _explore(self, job: JobView, gtype: str) -> bool:
        """Whether a type without a goodput estimate is worth a minimal try (never profiled there)."""
        if self.profiling == "oracle":
            return False
        est = self.require_estimator()
        if gtype in est.unusable_types(job):
            return False  # it tried and reported that it cannot run there
        if gtype not in job.profiled_types:
            return True
        # profiled, yet nothing learned on any type: a job that reports no step times (a script that does not
        # use dlsched.train under ``dlsched serve``) leaves its profiles empty, and would otherwise wait for
        # ever with the GPUs free; it runs on its smallest configuration, at the lowest utility
        known = getattr(est, "known_types", None)
        return known is not None and not known(job)

    def _solve(self, opts: Options, capacity: np.ndarray) -> AssignmentResult:
        problem = AssignmentProblem(group=opts.job_of, resource=opts.type_idx, size=opts.gpus.astype(float),
                                    value=opts.value, capacity=capacity.astype(float), num_groups=len(opts.jobs),
                                    forced=opts.forced)
        method = self.solver
        if problem.num_options == 0:
            return solve_assignment(problem, "milp")
        if method == "auto":
            method = "milp" if problem.num_options <= self.milp_max_options else "incremental"
        if method in ("continual", "warm-simplex", "lagrangian", "lpstar") or pop_parts(method) is not None:
            if self._continual is None:
                self._continual = ContinualAssignment(
                    len(capacity), method, fill=self.shim_fill, upgrade=self.shim_upgrade,
                    prox_steps=self.prox_steps if method == "continual" else None,
                    prox_eta=self.prox_eta if method == "continual" else None)
            lo = np.searchsorted(opts.job_of, np.arange(problem.num_groups), side="left")
            hi = np.searchsorted(opts.job_of, np.arange(problem.num_groups), side="right")
            sigs = [np.stack([opts.type_idx[a:b], opts.gpus[a:b], opts.nodes[a:b]]).astype(np.int64).tobytes()
                    for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
            res = self._continual.solve(problem, [j.job_id for j in opts.jobs], sigs, self.time_budget_s)
            if problem.is_feasible(res.choice):
                return res
            self._continual = None  # never expected (the shim is feasible); start afresh next round
            return solve_assignment(problem, "lp-round")
        if method == "incremental":
            if self._incremental is None:
                self._incremental = IncrementalAssignment(len(capacity))
            okeys = [(opts.jobs[g].job_id, int(t), int(k)) for g, t, k in
                     zip(opts.job_of.tolist(), opts.type_idx.tolist(), opts.gpus.tolist(), strict=True)]
            gkeys = [j.job_id for j in opts.jobs]
            try:
                res = self._incremental.solve(problem, okeys, gkeys)
                if res.status == "Optimal" and problem.is_feasible(res.choice):
                    return res
            except Exception:  # noqa: BLE001 - any trouble in the edited model: rebuild it next round
                pass
            self._incremental = None
            return solve_assignment(problem, "lp-round")
        res = solve_assignment(problem, method, time_limit_s=self.time_limit_s, hint=self._hint(opts))
        self._last = (res.prices, {opts.jobs[g].job_id: (int(opts.type_idx[o]), int(opts.gpus[o]), int(opts.nodes[o]))
                                   for g, o in enumerate(res.choice.tolist()) if o >= 0})
        return res

    def _hint(self, opts: Options) -> tuple[np.ndarray, np.ndarray] | None:
        """Last round's resource prices and its choice carried over to this round's options (each job its
        same configuration, where it still has it): the exact solve tries them before any LP."""
        last = self._last
        if last is None:
            return None
        prices, chosen = last
        if prices is None:
            return None
        n = len(opts.jobs)
        want = np.array([chosen.get(j.job_id, (-1, -1, -1)) for j in opts.jobs], dtype=np.int64).reshape(n, 3)
        g = opts.job_of
        hit = np.nonzero((opts.type_idx == want[g, 0]) & (opts.gpus == want[g, 1]) & (opts.nodes == want[g, 2]))[0]
        choice = np.full(n, -1, dtype=np.int64)
        choice[g[hit[::-1]]] = hit[::-1]  # the first such option of each job
        return prices, choice

