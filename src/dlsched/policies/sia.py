"""Sia: heterogeneity-aware, goodput-optimised scheduling of adaptive DL jobs (seed 003, sections 3.3-3.5).

Every round:

1. **Admission and profiling.** A new job is first profiled on one minimum-sized configuration of each GPU
   type it accepts (``Decision.profiles``; the engine holds and charges those GPUs for the profiling time and
   reports the measurements). It may be allocated once profiling has finished. With ``profiling=oracle`` or
   ``none`` jobs skip this step.
2. **Configurations** (section 3.3.3). Per GPU type with ``R`` GPUs per node: ``1, 2, 4, .., R`` GPUs on one
   node, and ``2R, 3R, ..`` on whole nodes.
3. **Normalised goodput matrix** (section 3.3.4). ``G[i, c]`` is the estimated goodput of job ``i`` on
   configuration ``c`` (throughput for strong-scaling and rigid jobs, whose batch size is fixed), scaled so
   that each row's minimum over all the job's configurations equals its smallest GPU count ``N_min``.
4. **Restart factor** (eq. 3.3). For a job running on configuration ``k``, every other configuration's
   utility is multiplied by ``r_i = (T_i - N_i S_i) / (T_i + S_i)`` (age ``T_i``, restarts ``N_i``, restart
   cost ``S_i``); ``r_i = 1`` while the job is younger than one restart cost.
5. **Objective** (eq. 3.4 with the fairness exponent ``p`` and no-allocation penalty ``lambda_``). Choosing
   configuration ``c`` for job ``i`` costs ``(r G)^p`` and leaving the job without GPUs costs ``lambda_``.
   For ``p < 0`` Sia minimises ``sum_i sum_c A_ic (r G)^p + lambda_i (1 - |A_i|)``; for ``p > 0`` it
   maximises ``sum A (r G)^p - lambda_i (1 - |A_i|)``. (The printed eq. 3.4 writes ``+ lambda`` in the
   maximisation; the penalty reading, which the text describes and the artifact code implements through its
   sign convention, is used for both signs.) Either way the problem handed to the solver is *maximise
   the sum of option values* with value ``lambda_i - (rG)^p`` (``p < 0``) or ``(rG)^p + lambda_i``; options
   with a non-positive value can never help and are dropped.
6. **Constraints.** At most one configuration per job; per GPU type the chosen GPU counts fit the GPUs left
   after reservations and profiling; a job may at most double its GPU count per round (``max_doubling``) and
   never goes below its minimum; hybrid-parallel jobs use multiples of their ``gpu_unit``; rigid jobs get
   exactly their GPU count and only their type is chosen (eq. 3.5); non-preemptible jobs and jobs in the
   middle of a checkpoint-restore keep their configuration (forced options, as the artifact does).
7. **Time-varying penalty** (section 3.5.6, ``tau``; off by default). Under congestion (the jobs' minimum
   demands exceed the cluster) the penalty is set once per window of ``tau`` seconds: a job that held GPUs
   for the whole previous window gets ``lambda_i = 0`` for this one, others ``lambda_i = lambda_ *
   (tau - s_i) / tau`` with ``s_i`` their service in the previous window, so the cluster time-shares in
   bands of ``tau`` seconds. Jobs whose penalty was lowered keep a tiny positive value so GPUs never idle
   while such a job could use them.
8. **Solve** with HiGHS: the exact MILP for small problems, the warm-started LP relaxation plus rounding
   (:class:`~dlsched.solvers.highs.IncrementalAssignment`) at scale (``solver=auto``).
9. **Place** with :class:`~dlsched.policies.sia_placer.SiaPlacer`.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlsched.core import Adaptivity, Cluster, ClusterView, Decision, JobStatus, JobView, Placement
from dlsched.policies.sia_placer import PlacementRequest, SiaPlacer
from dlsched.solvers.highs import AssignmentProblem, AssignmentResult, IncrementalAssignment, solve_assignment

PROFILING_MODES = ("bootstrap", "oracle", "none")
SOLVERS = ("auto", "milp", "lp-round", "incremental")
#: Checkpoint-restore cost the scheduler assumes per model (seconds), as Sia's artifact configures it from
#: measurements on its physical cluster; other models use ``restart_penalty_s``.
RESTART_PENALTY_S = {"deepspeech2": 25.0, "imagenet": 250.0, "cifar10": 30.0, "bert": 120.0, "yolov3": 45.0}
#: Default window of the time-varying penalty when switched on without a value (section 3.5.6).
DEFAULT_TAU_S = 300.0
_PROFILE = "__profile__"


@dataclass
class SiaParams:
    """Sia's tunables, with the thesis's defaults."""

    #: Fairness exponent on normalised goodput; p < 0 minimises (section 3.3.4, default -0.5).
    p: float = -0.5
    #: Penalty for leaving a job without GPUs (default 1.1).
    lambda_: float = 1.1
    #: ``sia`` (eq. 3.3), ``off`` (no discount), or a fixed factor in (0, 1].
    restart_factor: str = "sia"
    #: Restart cost S_i assumed for models not in :data:`RESTART_PENALTY_S`.
    restart_penalty_s: float = 30.0
    #: Window of the time-varying no-allocation penalty (seconds); None disables it (section 3.5.6).
    tau: float | None = None
    #: How new jobs' throughput is learned: ``bootstrap`` (profile one min config per type), ``oracle``
    #: (the simulator's truth; comparison runs only) or ``none`` (learn as you go).
    profiling: str = "bootstrap"
    #: ``milp`` (exact), ``lp-round`` (interior-point relaxation + rounding), ``incremental`` (warm-started
    #: simplex on an edited model + rounding) or ``auto`` (MILP up to ``milp_max_options`` options).
    solver: str = "auto"
    milp_max_options: int = 2500
    #: Limit GPU-count growth to 2x per round (jobs start from their minimum).
    max_doubling: bool = True
    #: Keep the configuration of jobs in the middle of a checkpoint-restore (as Sia's artifact does).
    keep_restarting: bool = True
    #: Job ids that may never be preempted once running (their configuration is forced).
    non_preemptible: tuple[str, ...] = ()
    #: Reserved GPUs per type, ``type:count`` (taken out of Sia's hands, whole nodes from the end).
    reserve: tuple[str, ...] = ()
    #: Largest share of a GPU type's GPUs that profiling may take in one round.
    max_profile_share: float = 0.25
    #: MILP time limit per round (seconds); past it the incumbent (or the rounded relaxation) is used.
    time_limit_s: float = 10.0

    def __post_init__(self) -> None:
        if self.p == 0 or not math.isfinite(self.p):
            raise ValueError(f"p must be a non-zero number, got {self.p}")
        if self.lambda_ < 0:
            raise ValueError(f"lambda_ must be >= 0, got {self.lambda_}")
        if self.profiling not in PROFILING_MODES:
            raise ValueError(f"profiling must be one of {', '.join(PROFILING_MODES)}, got '{self.profiling}'")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got '{self.solver}'")
        if self.tau is not None and self.tau <= 0:
            raise ValueError(f"tau must be positive (or off), got {self.tau}")
        self.restart_factor = str(self.restart_factor).strip().lower()
        if self.restart_factor in ("on", "true", "eq3.3", "formula"):
            self.restart_factor = "sia"
        if self.restart_factor in ("none", "false", "0", "no"):
            self.restart_factor = "off"
        if self.restart_factor not in ("sia", "off"):
            try:
                v = float(self.restart_factor)
            except ValueError:
                raise ValueError(f"restart_factor must be 'sia', 'off' or a number in (0, 1], "
                                 f"got '{self.restart_factor}'") from None
            if not 0 < v <= 1:
                raise ValueError(f"restart_factor must be in (0, 1], got {v}")
        if not 0 < self.max_profile_share <= 1:
            raise ValueError(f"max_profile_share must be in (0, 1], got {self.max_profile_share}")
        for item in self.reserve:
            parse_reservation(item)


def parse_reservation(item: str) -> tuple[str, int]:
    gtype, sep, count = item.partition(":")
    if not sep or not count.strip().isdigit():
        raise ValueError(f"reservation must look like 'type:count', got '{item}'")
    return gtype.strip(), int(count)


# ---------------------------------------------------------------------------------------------------------
# configurations
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigSet:
    """Sia's configurations of a cluster: parallel arrays, one entry per (type, nodes, GPUs)."""

    type_names: tuple[str, ...]
    type_idx: np.ndarray
    nodes: np.ndarray
    gpus: np.ndarray
    #: GPUs per (largest) node and total GPUs, per type.
    node_size: np.ndarray
    capacity: np.ndarray

    def __len__(self) -> int:
        return len(self.gpus)

    def describe(self) -> list[tuple[int, int, str]]:
        """(nodes, GPUs, type) triples, the thesis's notation."""
        return [(int(n), int(k), self.type_names[t]) for n, k, t in zip(self.nodes, self.gpus, self.type_idx,
                                                                        strict=True)]


def build_config_set(cluster: Cluster) -> ConfigSet:
    """Powers of two up to a node (plus the node size if it is not one), then whole nodes (section 3.3.3)."""
    t_idx, nodes, gpus = [], [], []
    sizes, caps = [], []
    for ti, t in enumerate(cluster.type_names):
        node_ids = cluster.nodes_of_type[t]
        per = max(cluster.nodes[n].num_gpus for n in node_ids)
        full = sum(1 for n in node_ids if cluster.nodes[n].num_gpus == per)
        single = [1 << i for i in range(per.bit_length()) if (1 << i) <= per]
        if single[-1] != per:
            single.append(per)
        for k in single:
            t_idx.append(ti)
            nodes.append(1)
            gpus.append(k)
        for n in range(2, full + 1):
            t_idx.append(ti)
            nodes.append(n)
            gpus.append(n * per)
        sizes.append(per)
        caps.append(cluster.gpus_per_type[t])
    return ConfigSet(type_names=tuple(cluster.type_names), type_idx=np.array(t_idx, dtype=np.int64),
                     nodes=np.array(nodes, dtype=np.int64), gpus=np.array(gpus, dtype=np.int64),
                     node_size=np.array(sizes, dtype=np.int64), capacity=np.array(caps, dtype=np.int64))


def restart_factor(age_s: float, restarts: int, penalty_s: float) -> float:
    """Eq. 3.3: ``(T - N S) / (T + S)``, clipped to [0, 1]; 1 while the job is younger than one restart."""
    if age_s < penalty_s:
        return 1.0
    return float(min(1.0, max(0.0, (age_s - restarts * penalty_s) / (age_s + penalty_s))))


def option_values(G: np.ndarray, r: np.ndarray, lam: np.ndarray, p: float) -> np.ndarray:
    """Per-option value for the maximisation: ``lam - (rG)^p`` if ``p < 0`` else ``(rG)^p + lam``."""
    base = np.maximum(r * G, 1e-9)
    tv = np.power(base, p)
    return lam - tv if p < 0 else tv + lam


# ---------------------------------------------------------------------------------------------------------
# the scheduler
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Candidates:
    """A job's possible configurations: parallel arrays plus, per GPU type, the shapes to ask the estimator."""

    o_t: np.ndarray
    o_k: np.ndarray
    o_n: np.ndarray
    segments: list[tuple[int, str, np.ndarray]]
    rigid: bool


@dataclass
class _Options:
    """The round's candidate (job, configuration) pairs, contiguous per job."""

    jobs: list[JobView]
    job_of: np.ndarray
    type_idx: np.ndarray
    nodes: np.ndarray
    gpus: np.ndarray
    value: np.ndarray
    forced: np.ndarray
    G: np.ndarray


@dataclass
class SiaScheduler:
    """The Sia policy (see the module docstring). ``estimator`` follows ``GoodputEstimator``."""

    params: SiaParams = field(default_factory=SiaParams)
    estimator: Any = None
    name: str = "sia"
    allows_packing: bool = False
    placer: SiaPlacer = field(default_factory=SiaPlacer)
    #: Facts about the last round (solver, objective, timings), also copied into ``Decision.info``.
    last_info: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._configs: dict[int, ConfigSet] = {}
        self._incremental: IncrementalAssignment | None = None
        self._service: dict[str, deque[tuple[float, float]]] = {}
        self._window = -1
        self._window_lambda: dict[str, float] = {}
        self._profile_wait: dict[str, int] = {}
        self._unprofilable: set[str] = set()
        self._cands: dict[str, _Candidates] = {}
        self._reservations = [parse_reservation(r) for r in self.params.reserve]
        self._non_preemptible = set(self.params.non_preemptible)

    # -- estimator wiring ------------------------------------------------------------------------------
    @property
    def wants_oracle(self) -> bool:
        return self.params.profiling == "oracle"

    def attach_oracle(self, estimator: Any) -> None:
        """Use the simulator's truth as the goodput estimator (``profiling=oracle`` comparison runs)."""
        self.estimator = estimator

    def _ensure_estimator(self) -> Any:
        if self.estimator is None:
            if self.params.profiling == "oracle":
                raise RuntimeError("Sia with profiling=oracle needs the simulator's oracle (attach_oracle)")
            from dlsched.estimators.goodput import SiaGoodputEstimator

            self.estimator = SiaGoodputEstimator(mode=self.params.profiling, hetero_aware=True)
        return self.estimator

    def describe(self) -> str:
        p = self.params
        return (f"sia (p={p.p}, lambda_={p.lambda_}, restart_factor={p.restart_factor}, tau={p.tau}, "
                f"profiling={p.profiling}, solver={p.solver})")

    # -- one round -------------------------------------------------------------------------------------
    def schedule(self, view: ClusterView) -> Decision:
        t_start = time.perf_counter()
        cluster = view.cluster
        cs = self._config_set(cluster)
        est = self._ensure_estimator()
        t_est = time.perf_counter()
        est.update(view)
        estimator_s = time.perf_counter() - t_est
        self._track_service(view)
        decision = Decision()
        blocked = self._blocked_gpus(cluster)
        reserved = np.zeros(len(cs.type_names), dtype=np.int64)
        if blocked is not None:
            for ti, t in enumerate(cs.type_names):
                reserved[ti] = int(sum(blocked[g] for n in cluster.nodes_of_type[t] for g in cluster.gpus_of_node(n)))
        cur_config = {j.job_id: self._current_config(cluster, cs, j) for j in view.jobs if j.placement}
        forced_ids = self._forced_jobs(view, cur_config)
        forced_use = np.zeros(len(cs.type_names), dtype=np.int64)
        for jid in forced_ids:
            ti, _, k = cur_config[jid]
            forced_use[ti] += k
        # 1. profiling of new jobs
        profile_reqs, profile_use = self._plan_profiles(view, cs, cs.capacity - reserved - forced_use)
        profiled_now = {key[1] for key in profile_reqs}
        capacity = cs.capacity - reserved - profile_use
        # 2-7. options
        eligible = [j for j in view.jobs if self._eligible(j) and j.job_id not in profiled_now]
        t_build = time.perf_counter()
        opts = self._options(view, cs, eligible, cur_config, forced_ids, capacity)
        build_s = time.perf_counter() - t_build
        # 8. solve
        t_solve = time.perf_counter()
        result = self._solve(opts, capacity)
        solve_wall_s = time.perf_counter() - t_solve
        t_place = time.perf_counter()
        # 9. place
        requests: list[PlacementRequest] = []
        chosen: dict[str, int] = {}
        for gi, o in enumerate(result.choice.tolist()):
            if o < 0:
                continue
            job = opts.jobs[gi]
            chosen[job.job_id] = o
            gtype = cs.type_names[int(opts.type_idx[o])]
            requests.append(PlacementRequest(key=job.job_id, gpu_type=gtype, num_gpus=int(opts.gpus[o]),
                                             current=job.placement, pinned=job.job_id in forced_ids))
        for key, (gtype, k) in profile_reqs.items():
            requests.append(PlacementRequest(key=key, gpu_type=gtype, num_gpus=k))
        outcome = self.placer.place(cluster, requests, blocked)
        if outcome.unplaced:
            self._downsize_unplaced(cluster, cs, opts, chosen, outcome, blocked)
        jobs_by_id = {j.job_id: j for j in view.jobs}
        for jid in chosen:
            pl = outcome.placements.get(jid)
            if pl is None:
                continue
            job = jobs_by_id[jid]
            bsz = None if job.spec.adaptivity is Adaptivity.ADAPTIVE else job.spec.batch_size
            decision.place(jid, pl, bsz)
        place_s = time.perf_counter() - t_place
        prof_gpus: dict[str, list[int]] = {}
        for key in profile_reqs:
            pl = outcome.placements.get(key)
            if pl is not None:
                prof_gpus.setdefault(key[1], []).extend(pl.gpus)
        for jid, gpus in prof_gpus.items():
            decision.profiles[jid] = Placement.of(gpus)
            self._profile_wait.pop(jid, None)
        info = {
            "sia.jobs": float(len(eligible)), "sia.options": float(len(opts.gpus)),
            "sia.objective": float(result.objective), "sia.bound": float(result.bound),
            "sia.milp": 1.0 if result.method == "milp" else 0.0, "sia.solve_s": float(solve_wall_s),
            "sia.highs_s": float(result.solve_s), "sia.estimator_s": float(estimator_s),
            "sia.build_s": float(build_s), "sia.place_s": float(place_s), "sia.iterations": float(result.iterations),
            "sia.evictions": float(len(outcome.evicted)), "sia.unplaced": float(len(outcome.unplaced)),
            "sia.profiles": float(len(decision.profiles)),
            "sia.policy_s": time.perf_counter() - t_start,
        }
        decision.info.update(info)
        self.last_info = info
        return decision

    def _downsize_unplaced(self, cluster: Cluster, cs: ConfigSet, opts: _Options, chosen: dict[str, int],
                           outcome: Any, blocked: np.ndarray | None) -> None:
        """Give a gang the placer could not fit (forced jobs fragmenting a type) the largest of its own smaller
        options that fits in the GPUs left over; otherwise it waits this round."""
        taken = np.zeros(cluster.num_gpus, dtype=bool) if blocked is None else blocked.copy()
        for pl in outcome.placements.values():
            taken[list(pl.gpus)] = True
        index = {j.job_id: gi for gi, j in enumerate(opts.jobs)}
        for key in list(outcome.unplaced):
            if key not in chosen:
                continue
            o = chosen[key]
            gi = index[key]
            cands = np.nonzero((opts.job_of == gi) & (opts.gpus < opts.gpus[o]) & (opts.value > 0))[0]
            for c in cands[np.argsort(-opts.value[cands], kind="stable")].tolist():
                gtype = cs.type_names[int(opts.type_idx[c])]
                pl = self.placer.fit_free(cluster, gtype, int(opts.gpus[c]), taken)
                if pl is not None:
                    taken[list(pl.gpus)] = True
                    outcome.placements[key] = pl
                    outcome.unplaced.remove(key)
                    chosen[key] = c
                    break

    # -- pieces ----------------------------------------------------------------------------------------
    def _config_set(self, cluster: Cluster) -> ConfigSet:
        key = id(cluster)
        cs = self._configs.get(key)
        if cs is None:
            cs = build_config_set(cluster)
            self._configs = {key: cs}
            self._incremental = None
            self._cands = {}
        return cs

    def _blocked_gpus(self, cluster: Cluster) -> np.ndarray | None:
        if not self._reservations:
            return None
        blocked = np.zeros(cluster.num_gpus, dtype=bool)
        for gtype, count in self._reservations:
            if gtype not in cluster.nodes_of_type:
                continue
            left = count
            for n in reversed(cluster.nodes_of_type[gtype]):
                for g in reversed(cluster.gpus_of_node(n)):
                    if left <= 0:
                        break
                    if not blocked[g]:
                        blocked[g] = True
                        left -= 1
        return blocked

    @staticmethod
    def _current_config(cluster: Cluster, cs: ConfigSet, job: JobView) -> tuple[int, int, int]:
        """(type index, nodes, GPUs) of the job's current placement."""
        pl = job.placement
        gtype = cluster.gpu_type_of[pl.gpus[0]]
        return cs.type_names.index(gtype), pl.num_nodes(cluster), len(pl)

    def _forced_jobs(self, view: ClusterView, cur_config: dict[str, tuple[int, int, int]]) -> set[str]:
        forced = set()
        for j in view.jobs:
            if not j.placement:
                continue
            if j.job_id in self._non_preemptible:
                forced.add(j.job_id)
            elif self.params.keep_restarting and j.status is JobStatus.RESTARTING:
                forced.add(j.job_id)
        return forced

    def _eligible(self, job: JobView) -> bool:
        if job.profiling or job.status is JobStatus.PROFILING:
            return False
        if self.params.profiling == "bootstrap" and not job.profiled_types and not job.placement \
                and job.start_time_s is None and job.job_id not in self._unprofilable:
            return False  # still waits to be profiled
        return True

    @staticmethod
    def _profile_count(job: JobView, cs: ConfigSet, ti: int) -> int | None:
        """GPUs to profile a job on one type: one data-parallel worker (``gpu_unit`` GPUs, so one GPU for
        most jobs), rounded up to a configuration on one node; None if a worker does not fit one node."""
        unit = max(1, job.spec.gpu_unit)
        sel = (cs.type_idx == ti) & (cs.nodes == 1) & (cs.gpus >= unit)
        if not sel.any():
            return None
        return int(cs.gpus[sel].min())

    def _plan_profiles(self, view: ClusterView, cs: ConfigSet,
                       room: np.ndarray) -> tuple[dict[tuple[str, str, str], tuple[str, int]], np.ndarray]:
        """Profiling requests for new jobs (one min config per accepted type), and GPUs they take per type."""
        use = np.zeros(len(cs.type_names), dtype=np.int64)
        reqs: dict[tuple[str, str, str], tuple[str, int]] = {}
        if self.params.profiling != "bootstrap":
            return reqs, use
        room = np.maximum(room, 0)
        budget = np.maximum(1, np.floor(cs.capacity * self.params.max_profile_share)).astype(np.int64)
        budget = np.minimum(budget, room)
        new = [j for j in view.jobs if not j.profiled_types and not j.placement and not j.profiling
               and j.start_time_s is None and j.status is not JobStatus.PROFILING]
        new.sort(key=lambda j: (j.spec.submit_time_s, j.job_id))
        for job in new:
            wants: list[tuple[int, int]] = []
            for ti, t in enumerate(cs.type_names):
                if not job.spec.allows_gpu_type(t):
                    continue
                k = self._profile_count(job, cs, ti)
                if k is not None:
                    wants.append((ti, k))
            if not wants:
                self._unprofilable.add(job.job_id)  # nothing to profile on: it learns as it runs
                continue
            # within the per-round profiling budget; a type's first profile of the round may exceed it (a big
            # pipeline unit), as long as the GPUs are there
            fits = [(ti, k) for ti, k in wants
                    if use[ti] + k <= budget[ti] or (use[ti] == 0 and k <= room[ti])]
            waited = self._profile_wait.get(job.job_id, 0)
            if len(fits) < len(wants) and waited < 5:
                self._profile_wait[job.job_id] = waited + 1
                continue  # wait for room on every type (at most five rounds, then profile what fits)
            if not fits:
                self._profile_wait[job.job_id] = waited + 1
                continue
            for ti, k in fits:
                use[ti] += k
                t = cs.type_names[ti]
                reqs[(_PROFILE, job.job_id, t)] = (t, k)
        return reqs, use

    def _forget_departed(self, view: ClusterView) -> None:
        active = {j.job_id for j in view.jobs}
        for table in (self._profile_wait, self._window_lambda, self._service, self._cands):
            for jid in [k for k in table if k not in active]:
                del table[jid]
        self._unprofilable &= active

    def _track_service(self, view: ClusterView) -> None:
        self._forget_departed(view)
        if self.params.tau is None:
            return
        t = view.time_s
        for j in view.jobs:
            hist = self._service.setdefault(j.job_id, deque())
            hist.append((t, j.attained_service_s))
            while len(hist) > 2 and hist[1][0] <= t - self.params.tau:
                hist.popleft()

    def _penalties(self, view: ClusterView, jobs: Sequence[JobView], congested: bool) -> np.ndarray:
        """Per job no-allocation penalty: ``lambda_``, or the time-varying one under congestion.

        The time-varying penalty is set per window of ``tau`` seconds (windows aligned to multiples of
        ``tau``) and held for the window, so a job chosen at a window's start keeps running through it: the
        bands of uninterrupted execution of figure 3.8. A job that held GPUs for the whole previous window
        gets 0, others ``lambda_ * (tau - s_i) / tau``; a job arriving inside a window gets ``lambda_``.
        """
        lam = np.full(len(jobs), float(self.params.lambda_))
        tau = self.params.tau
        if tau is None or not congested:
            return lam
        t = view.time_s
        window = math.floor(t / tau + 1e-9)
        if window != self._window:
            self._window = window
            self._window_lambda = {}
            for j in view.jobs:
                hist = self._service.get(j.job_id)
                if not hist:
                    continue
                t0, a0 = hist[0]
                if t0 > t - tau:  # younger than the window: count from its arrival
                    a0 = 0.0
                served = max(0.0, j.attained_service_s - a0)
                self._window_lambda[j.job_id] = 0.0 if served >= tau - 1e-6 else \
                    self.params.lambda_ * (tau - served) / tau
        for i, j in enumerate(jobs):
            lam[i] = self._window_lambda.get(j.job_id, self.params.lambda_)
        return lam

    def _penalty_s(self, job: JobView) -> float:
        fn = getattr(self.estimator, "restart_delay_s", None)
        if callable(fn):
            v = fn(job)
            if v is not None and v > 0:
                return float(v)
        return RESTART_PENALTY_S.get(job.spec.model, self.params.restart_penalty_s)

    def _restart_factor(self, job: JobView) -> float:
        mode = self.params.restart_factor
        if mode == "off":
            return 1.0
        if mode == "sia":
            return restart_factor(job.age_s, job.restarts, self._penalty_s(job))
        return float(mode)

    def _candidates(self, cs: ConfigSet, job: JobView) -> _Candidates | None:
        """The configurations a job may ever use (its spec is immutable, so this is cached per job)."""
        cached = self._cands.get(job.job_id)
        if cached is not None:
            return cached
        spec = job.spec
        allowed_t = np.array([spec.allows_gpu_type(t) for t in cs.type_names], dtype=bool)
        if spec.adaptivity is Adaptivity.RIGID:
            k = spec.num_gpus
            ts = np.nonzero(allowed_t & (cs.capacity >= k))[0]
            o_t = ts.astype(np.int64)
            o_k = np.full(len(ts), k, dtype=np.int64)
            o_n = np.where(k <= cs.node_size[ts], 1, -(-k // cs.node_size[ts])).astype(np.int64)
        else:
            m = allowed_t[cs.type_idx] & (cs.gpus >= spec.lower_gpus) & (cs.gpus <= spec.upper_gpus)
            if spec.gpu_unit > 1:
                m &= cs.gpus % spec.gpu_unit == 0
            m &= cs.gpus <= cs.capacity[cs.type_idx]
            idx = np.nonzero(m)[0]
            o_t, o_k, o_n = cs.type_idx[idx], cs.gpus[idx], cs.nodes[idx]
        if len(o_t) == 0:
            return None
        segs = []
        for ti in np.unique(o_t).tolist():
            sel = np.nonzero(o_t == ti)[0]
            shapes = np.ascontiguousarray(np.stack([o_n[sel], o_k[sel]], axis=1))
            segs.append((ti, cs.type_names[ti], shapes))
        cand = _Candidates(o_t=o_t, o_k=o_k, o_n=o_n, segments=segs,
                           rigid=spec.adaptivity is Adaptivity.RIGID)
        self._cands[job.job_id] = cand
        return cand

    def _options(self, view: ClusterView, cs: ConfigSet, jobs: list[JobView],
                 cur_config: dict[str, tuple[int, int, int]], forced_ids: set[str],
                 capacity: np.ndarray) -> _Options:
        """Candidate (job, configuration) options with their values, vectorised over all jobs.

        Only the estimator queries loop over jobs and GPU types; normalisation, the doubling limit, restart
        factors and the objective transform run on flat arrays.
        """
        est = self.estimator
        p = self.params
        ntypes = len(cs.type_names)
        big = np.iinfo(np.int64).max
        used: list[JobView] = []
        t_parts, k_parts, n_parts, g_parts, unk_parts, sizes = [], [], [], [], [], []
        now, cur_t, cur_k, rigid = [], [], [], []
        for job in jobs:
            cand = self._candidates(cs, job)
            if cand is None:
                continue
            # Every allowed shape is asked for, not only those under the doubling limit: the row minimum that
            # normalises G is taken over all configurations (section 3.3.4), often a poor multi-node one, and
            # a stable set of shapes keeps the estimator's cache warm.
            off = 0
            n_job = 0
            for _ti, tname, shapes in cand.segments:
                m = len(shapes)
                vals = np.asarray(est.goodput_many(job, tname, shapes), dtype=float)
                unk = np.zeros(m, dtype=bool)
                if not (vals > 0).any() and self._explore(job, tname):
                    unk[0] = True  # unknown type: its smallest configuration, at the lowest utility
                t_parts.append(cand.o_t[off:off + m])
                k_parts.append(cand.o_k[off:off + m])
                n_parts.append(cand.o_n[off:off + m])
                g_parts.append(vals)
                unk_parts.append(unk)
                n_job += m
                off += m
            used.append(job)
            sizes.append(n_job)
            c = cur_config.get(job.job_id)
            now.append(len(job.placement))
            cur_t.append(-1 if c is None else c[0])
            cur_k.append(-1 if c is None else c[2])
            rigid.append(cand.rigid)
        if not used:
            e = np.zeros(0)
            ei = np.zeros(0, dtype=np.int64)
            return _Options([], ei, ei, ei, ei, e, np.zeros(0, dtype=bool), e)
        cat = np.concatenate
        o_t, o_k, o_n = cat(t_parts), cat(k_parts), cat(n_parts)
        g, unk = cat(g_parts), cat(unk_parts)
        g = np.where(np.isfinite(g), g, 0.0)
        nj = len(used)
        sizes_a = np.array(sizes, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes_a)[:-1]])
        grp = np.repeat(np.arange(nj), sizes_a)
        now_a = np.array(now, dtype=np.int64)
        cur_t_a, cur_k_a = np.array(cur_t, dtype=np.int64), np.array(cur_k, dtype=np.int64)
        rigid_a = np.array(rigid, dtype=bool)
        # normalised goodput (section 3.3.4): G <- N_min * G / min_c G, the minimum over every configuration
        # the job may use and N_min its smallest GPU count, so each row's least useful option is worth N_min
        pos = g > 0
        usable = pos | unk
        gmin = np.minimum.reduceat(np.where(pos, g, np.inf), starts)
        nmin = np.minimum.reduceat(np.where(usable, o_k, big), starts).astype(float)
        known = np.isfinite(gmin)
        scale = np.where(known, nmin / np.where(known, gmin, 1.0), 0.0)
        G = np.where(pos, g * scale[grp], 0.0)
        # unknown types sit at the row's lowest utility, N_min; with nothing known at all, a whisker of
        # preference for the faster types breaks the ties
        whisker = np.where(known[grp], 1.0, 1.0 + 1e-3 * o_t / max(1, ntypes))
        G = np.where(unk, nmin[grp] * whisker, G)
        keep = G > 0
        # doubling limit: at most twice the current GPU count, but always each type's smallest option
        if p.max_doubling:
            seg_new = np.ones(len(o_t), dtype=bool)
            seg_new[1:] = (grp[1:] != grp[:-1]) | (o_t[1:] != o_t[:-1])
            seg_starts = np.nonzero(seg_new)[0]
            seg_id = np.cumsum(seg_new) - 1
            smallest = np.minimum.reduceat(np.where(keep, o_k, big), seg_starts)[seg_id]
            cap = np.maximum(2 * now_a[grp], smallest)
            keep &= (o_k <= cap) | rigid_a[grp]
        is_cur = (o_t == cur_t_a[grp]) & (o_k == cur_k_a[grp])
        keep |= is_cur & (G > 0)
        # restart factor on every configuration but the current one, for running jobs
        r_job = np.array([self._restart_factor(j) if j.placement else 1.0 for j in used])
        r = np.where(is_cur, 1.0, r_job[grp])
        min_need = np.minimum.reduceat(np.where(keep, o_k, big), starts)
        congested = int(min_need[min_need < big].sum()) > int(capacity.sum())
        lam_job = self._penalties(view, used, congested)
        value = option_values(G, r, lam_job[grp], p.p)
        if p.tau is not None and congested:
            lowered = lam_job[grp] < p.lambda_
            floor = 1e-4 * np.power(np.maximum(r * G, 1e-9), abs(p.p))
            value = np.where(lowered, np.maximum(value, floor), value)
        forced_jobs = np.array([j.job_id in forced_ids for j in used], dtype=bool)
        forced = is_cur & forced_jobs[grp] & (G > 0)
        keep &= (value > 0) | forced
        keep &= ~(forced_jobs[grp] & ~forced)  # a forced job keeps only its current option
        idx = np.nonzero(keep)[0]
        has = np.bincount(grp[idx], minlength=nj) > 0
        new_id = np.cumsum(has) - 1
        jobs_kept = [j for j, h in zip(used, has.tolist(), strict=True) if h]
        return _Options(jobs=jobs_kept, job_of=new_id[grp[idx]], type_idx=o_t[idx], nodes=o_n[idx],
                        gpus=o_k[idx], value=value[idx], forced=forced[idx], G=G[idx])

    def _explore(self, job: JobView, gtype: str) -> bool:
        """Whether a type without a goodput estimate is worth a minimal try (never profiled there)."""
        if self.params.profiling == "oracle":
            return False
        unusable = getattr(self.estimator, "unusable_types", None)
        if unusable is not None and gtype in unusable(job):
            return False  # it tried and reported that it cannot run there
        return gtype not in job.profiled_types

    def _solve(self, opts: _Options, capacity: np.ndarray) -> AssignmentResult:
        problem = AssignmentProblem(group=opts.job_of, resource=opts.type_idx, size=opts.gpus.astype(float),
                                    value=opts.value, capacity=capacity.astype(float), num_groups=len(opts.jobs),
                                    forced=opts.forced)
        method = self.params.solver
        if problem.num_options == 0:
            return solve_assignment(problem, "milp")
        if method == "auto":
            method = "milp" if problem.num_options <= self.params.milp_max_options else "incremental"
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
        return solve_assignment(problem, method, time_limit_s=self.params.time_limit_s)
