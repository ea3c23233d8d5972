"""Hops's planner (section 3.6): service window, location-specific configurations, priority-weighted ILP.

One round:

1. **Service window.** From the head of the priority queue, jobs are taken while the sum of their minimum
   requirements stays below the GPUs being planned; the job that reaches or passes that sum is the window's
   boundary and the last job in it. Jobs beyond it are not planned this round (``service_window=off``
   plans the whole queue, for ablations).
2. **Configurations.** For each job in the window and each GPU type it accepts, aggregated and (for
   low-sensitivity jobs) distributed configurations on the servers' idle GPUs
   (:mod:`dlsched.policies.hops.configs`). A job's placement sensitivity on a type is equation 10: its
   one-GPU throughput over its per-GPU throughput on two servers of the type; above
   ``sensitivity_threshold`` (1.4) the job is placement-sensitive.
3. **Priority-weighted ILP** (equations 11-13). The throughput of every configuration, divided by the
   job's slowest configuration (the gain matrix ``G``, rows normalised to a minimum of 1), weighted by
   ``(prior_i + bias) ** lambda_fairness``: ``max sum_ij w_i G_ij X_ij`` with at most one configuration
   per job and no server over-committed. ``bias`` is 0 when every priority is positive, else
   ``|min prior| + 0.01``. ``lambda_fairness = 0`` maximises normalised throughput alone; large values
   approach the greedy order (each job in priority order takes its best configuration that still fits).
   A running job's current configuration gets a relative bonus (``keep_bonus``, 5%): a job moves only for a
   gain above the noise of the throughputs jobs report (``keep_bonus=1e-6``: ties only).

4. **Plans within the round.** GPUs the first plan leaves idle while jobs wait are planned again at once
   (``fill_at_round_start``: the jobs it left out, their window over the GPUs left), until a plan places
   nobody; and when a job completes inside the round, the engine asks for another plan
   (:meth:`HopsAllocation.allocate_more`), and likewise when a job's profile ends inside the round
   (``plan_on_profile_end``: the job has just joined the waiting queue): running jobs keep their GPUs, and
   the waiting jobs of the window over the idle GPUs are planned onto them by the same ILP; these plans end
   with the round. Such a plan is
   for fragments, so the **sensitivity adjustment** widens its window first (:func:`~dlsched.policies.hops.window.sensitivity_adjustment`);
   the jobs it brings in return to their places in the next round's queue, which is ordered afresh.
   ``multi_plan=off`` and ``sensitivity_adjustment=off`` switch these parts off for ablations.

Priorities come from the scheduler's ordering: the latency ratio (eq. 8) under ``latency-ratio``, the projected
finish-time fairness ratio under ``finish-time-fairness`` (section 4.4); under another ordering the queue
position, ``(n - position) / n``.

Throughputs (``throughputs=estimator``, the default) come from section 3.5's estimator over the multi-layer
SQLite store (:mod:`dlsched.estimators.hops_throughput`): each configuration on its exact servers, server
layer first, then the GPU type's, then the formula over the profiled components. New jobs wait in the
**profiling queue** (section 3.2): at the start of a round each is profiled on one GPU of every type it has
not been profiled on, on GPUs no job holds, before the plan is made over the GPUs left; a job is planned
on the types it has been profiled on. ``throughputs=oracle`` reads the simulator's truth instead (by
shape, nominal hosts; no profiling), for comparison.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from dlsched.core import ClusterView, JobView
from dlsched.core.ranges import ranged
from dlsched.estimators.hops_throughput import CORRECTIONS, HopsThroughput
from dlsched.estimators.throughput_store import ThroughputStore, check_location
from dlsched.policies.hops.classes import (
    Profile,
    ServerClasses,
    Signature,
    SignatureCatalog,
    class_rows,
    map_back,
    slowest_piece,
)
from dlsched.policies.hops.configs import Config, type_configs
from dlsched.policies.hops.ordering import PRIORITIES
from dlsched.policies.hops.servers import (
    current_servers,
    idle_per_server,
    interchangeable_servers,
    profile_gpu,
)
from dlsched.policies.hops.window import (
    MIN_RELATIVE_WEIGHT,
    priority_weights,
    sensitivity_adjustment,
    service_window,
)
from dlsched.policies.stages import AllocationTraits, Demand, EstimatingAllocation, Plan, ProfileRequest
from dlsched.solvers.multi_assignment import MultiResourceProblem, solve_multi_assignment

__all__ = ["MIN_RELATIVE_WEIGHT", "SOLVERS", "THROUGHPUT_SOURCES", "HopsAllocation", "priority_weights",
           "sensitivity_adjustment", "service_window"]

#: Where throughputs come from: section 3.5's estimator and its store, or the simulator's truth.
THROUGHPUT_SOURCES = ("estimator", "oracle")

#: Ways to solve the ILP over server classes (the ``solver`` tunable).
SOLVERS = ("auto", "lp-round", "milp")



@dataclass
class HopsAllocation(EstimatingAllocation):
    """Hops's planner; see the module docstring."""

    #: Efficiency-fairness knob lambda of equation 11 (0: throughput only; large: the queue's order).
    lambda_fairness: float = ranged(1.0, 0.0, 100.0)
    #: Placement-sensitivity threshold sigma (equation 10): above it a job gets no distributed configurations.
    sensitivity_threshold: float = ranged(1.4, 1.0, 100.0)
    #: Plan only the service window at the head of the queue (off: the whole queue).
    service_window: bool = True
    #: Plans of fragments inside a round bring low-sensitivity jobs from beyond the window (section 3.6).
    sensitivity_adjustment: bool = True
    #: Plan again inside a round whenever a job completes (off: one plan per round, as Sia and Gavel).
    multi_plan: bool = True
    #: With ``multi_plan``: plan the GPUs the round's first plan leaves idle at once, as plans for fragments
    #: (section 3.6); off: the extra plans come only at completions (the earlier reading).
    fill_at_round_start: bool = True
    #: With ``multi_plan``: the engine asks for another plan when a job's profile ends inside a round, so the
    #: job is planned then (section 3.6 plans "as long as there are available resources"); off: a profiled job
    #: waits for the next round (the earlier behaviour).
    plan_on_profile_end: bool = True
    #: Relative MILP gap (the paper: 0.05%).
    mip_rel_gap: float = ranged(5e-4, 0.0, 1.0)
    #: Branch-and-bound nodes per solve: the work limit that ends a long solve at the same point on every
    #: machine and load, so a run is reproducible (the best plan found so far is kept).
    mip_node_limit: int = ranged(2000, 1, 10_000_000)
    #: Wall-clock safety net per solve; a plan it stops is no longer reproducible and says so
    #: (``hops.time_limit_hit`` in the round's info).
    time_limit_s: float = ranged(60.0, 0.0, 3600.0, lo_open=True)
    #: ``estimator``: section 3.5's estimator over the multi-layer store, fed by profiling and what jobs
    #: report; ``oracle``: the simulator's truth by shape (comparison runs).
    throughputs: str = "estimator"
    #: The throughput store: a file path or ``sqlite:///path`` URL (kept across runs); empty: a new file per
    #: run in a temporary directory.
    store: str = ""
    #: The cluster's offline-measured bandwidths (GB/s of 4-byte gradients) for equation 2: intra-server link
    #: and network.
    b_link_gbps: float = ranged(6.0, 0.0, 10000.0, lo_open=True)
    b_net_gbps: float = ranged(2.5, 0.0, 10000.0, lo_open=True)
    #: The estimator reads its server entity layer (off: per-type throughputs only, for ablations).
    server_layer: bool = True
    #: Refit a job's data-loading mixture (equation 3) once its samples grew by this fraction (0: at every
    #: report); see :class:`~dlsched.estimators.hops_throughput.HopsThroughput`.
    mixture_refit_growth: float = ranged(0.1, 0.0, 10.0)
    #: ``ratio``: the formula's answers below the records are scaled by how far the job's own records of the
    #: same shape class fell from it; ``off``: the formula as written (docs/hops.md, choice 10).
    formula_correction: str = "ratio"
    #: Solve over server classes (type, size, host, idle GPUs) and map the plan back onto servers
    #: (:mod:`dlsched.policies.hops.classes`); off: the exact ILP with one option per server.
    server_classes: bool = True
    #: Relative difference between two servers' estimates (server entity layer) below which the planner
    #: keeps them in one class. Jobs' reports vary by a few percent, so servers that are alike differ by
    #: that much; the planner moves no job for less than ``keep_bonus`` either, so telling servers apart
    #: more finely only makes more classes and slower plans. 0: only equal estimates merge.
    server_tolerance: float = ranged(0.05, 0.0, 1.0)
    #: Relative bonus of a running job's current configuration in the ILP (docs/hops.md, choice 9). The
    #: paper is silent; its estimates come from reports that carry noise of a few percent, and a restart
    #: costs a checkpoint-restore, so a job moves only for a gain above 5%. 1e-6 breaks ties only.
    keep_bonus: float = ranged(0.05, 0.0, 1.0)
    #: How the ILP over server classes is solved: ``lp-round`` (its LP relaxation rounded down and filled
    #: greedily: a few tens of ms), ``milp`` (branch and bound to ``mip_rel_gap``, starting from the rounded
    #: plan), or ``auto``: the rounded plan when it is within ``round_gap`` of the LP bound, else the MILP
    #: (small windows, where rounding loses most and branch and bound is cheap). The exact ILP
    #: (``server_classes=off``) is always a MILP.
    solver: str = "auto"
    #: Under ``solver=auto``: the largest relative gap of the rounded plan to the LP bound that is kept.
    round_gap: float = ranged(0.01, 0.0, 1.0)
    name: str = "hops"
    #: The scheduler's ordering stage (set by the registry): which priorities weigh the ILP.
    ordering: str = "latency-ratio"
    #: Placement sensitivity per (job, GPU type) and the job's store version it was computed at (see
    #: :meth:`sensitivity`).
    _rho: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict, init=False, repr=False)

    traits: ClassVar[AllocationTraits] = AllocationTraits(plans_spread=True, names_gpu_type=True,
                                                          plans_within_round=True)

    def __post_init__(self) -> None:
        if self.throughputs not in THROUGHPUT_SOURCES:
            raise ValueError(f"unknown throughputs '{self.throughputs}' (one of: {', '.join(THROUGHPUT_SOURCES)})")
        check_location(self.store)
        self.estimator = None
        if self.formula_correction not in CORRECTIONS:
            raise ValueError(f"formula_correction must be one of {', '.join(CORRECTIONS)}, "
                             f"got '{self.formula_correction}'")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got '{self.solver}'")

    def needs_oracle(self) -> bool:
        return self.throughputs == "oracle"

    def require_estimator(self):
        """The estimator: section 3.5's over its store (opened on first use), or the attached oracle."""
        if self.throughputs == "estimator" and self.estimator is None:
            self.estimator = HopsThroughput(ThroughputStore(self.store), b_link_gbps=self.b_link_gbps,
                                            b_net_gbps=self.b_net_gbps, server_layer=self.server_layer,
                                            refit_growth=self.mixture_refit_growth,
                                            correction=self.formula_correction)
        return super().require_estimator()

    # -- pieces ------------------------------------------------------------------------------------------
    def priorities(self, view: ClusterView, queue: list[JobView]) -> np.ndarray:
        """The ordering's priority (eq. 8's latency ratio, or section 4.4's projected finish-time fairness),
        else the queue position."""
        score = PRIORITIES.get(self.ordering)
        if score is not None:
            return np.array([score(view, j) for j in queue], dtype=float)
        n = len(queue)
        return np.array([(n - i) / n for i in range(n)], dtype=float)

    def sensitivity(self, job: JobView, gpu_type: str) -> float:
        """Equation 10 on one type: one-GPU throughput over per-GPU throughput on two servers (1 if unknown).

        Kept for the rest of the round: the plans inside a round ask it of the whole queue, and the
        estimates it rests on change between rounds at most. Each round's first plan (:meth:`_forget_rho`)
        keeps it only for the jobs that reported nothing since, as it rests on the job's own records alone."""
        key = (job.job_id, gpu_type)
        cached = self._rho.get(key)
        if cached is not None:
            return cached[1]
        est = self.require_estimator()
        one = est.goodput_many(job, gpu_type, np.array([[1, 1], [2, 2]]))
        rho = 1.0 if one[0] <= 0 or one[1] <= 0 else float(one[0] / (one[1] / 2.0))
        self._rho[key] = (self._job_version(job.job_id), rho)
        return rho

    def _job_version(self, job_id: str) -> int:
        """The store's count of the job's observations (-1 for the oracle, whose answers are not kept)."""
        est = self.estimator
        return est.store.job_version(job_id) if isinstance(est, HopsThroughput) else -1

    def _forget_rho(self) -> None:
        """At a round's first plan: drop the sensitivities of jobs that reported since they were computed
        (every one under the oracle)."""
        if not isinstance(self.estimator, HopsThroughput):
            self._rho.clear()
            return
        store = self.estimator.store
        self._rho = {k: v for k, v in self._rho.items() if v[0] == store.job_version(k[0])}

    def configurations(self, view: ClusterView, job: JobView, idle: np.ndarray) -> list[Config]:
        """Every configuration of the job on the idle GPUs (``idle``: per node)."""
        cluster = view.cluster
        reqs = [k for k in job.spec.requirement_set()]
        out: list[Config] = []
        for t in cluster.type_names:
            if not job.spec.allows_gpu_type(t):
                continue
            nodes = cluster.nodes_of_type[t]
            size = max(cluster.nodes[n].num_gpus for n in nodes)
            low = len(nodes) >= 2 and self.sensitivity(job, t) <= self.sensitivity_threshold
            out += type_configs(t, [(n, int(idle[n])) for n in nodes], reqs, distributed=low, server_size=size)
        return out

    # -- one round -----------------------------------------------------------------------------------------
    def allocate(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        """The round's first plan: every GPU no running profile holds, the whole queue."""
        t0 = time.perf_counter()
        est = self.require_estimator()
        est.update(view)
        self._forget_rho()
        idle = idle_per_server(view, running_held=False)
        # the profiling queue feeds the store; an estimator attached in its place (the oracle) needs none
        profiles = self.profiling_queue(view, idle, est) if isinstance(est, HopsThroughput) else []
        profiled_now = {r.job.job_id for r in profiles}
        queue = [j for j in ordered if not j.profiling and j.job_id not in profiled_now]
        prios = self.priorities(view, queue)
        window = service_window(queue, int(idle.sum())) if self.service_window else queue
        self._window = (queue, prios, len(window), int(idle.sum()))
        plan = self._plan(view, window, prios[:len(window)], idle)
        if self.multi_plan and self.fill_at_round_start:
            self._fill(view, plan, queue, prios, idle)
        plan.profiles = profiles
        plan.info["hops.profiles"] = float(len(profiles))
        plan.info["hops.plan_s"] = time.perf_counter() - t0
        return plan

    def facts_for(self, job_id: str) -> dict[str, object] | None:
        """The job's queue position, priority and weight (eq. 11), and which side of the service window's
        boundary it fell on in the round's first plan (explanations)."""
        last = getattr(self, "_window", None)
        if last is None:
            return None
        queue, prios, n_window, idle = last
        if getattr(self, "_window_of", (None,))[0] is not last:  # once per round: positions, need, weights
            self._window_of = (last, {j.job_id: i for i, j in reversed(list(enumerate(queue)))},
                               sum(j.spec.lower_gpus for j in queue[:n_window]),
                               priority_weights(prios[:n_window], self.lambda_fairness))
        _, positions, need, weights = self._window_of
        pos = positions.get(job_id)
        if pos is None:  # the queue leaves out jobs whose profiles run (or start) this round
            return {"in_window": False, "why": "still profiling: Hops plans it once its profiles report"}
        boundary = queue[n_window - 1].job_id if n_window else None
        inside = pos < n_window
        weight = float(weights[pos]) if inside else 0.0
        if n_window == 0:
            side = "no idle GPUs to plan: the service window is empty"
        else:
            side = (f"inside the service window of {idle} GPUs (the window's {n_window} jobs need {need}, "
                    f"boundary {boundary})" if inside else
                    f"outside the service window of {idle} GPUs: the {n_window} jobs ahead up to the boundary "
                    f"{boundary} already need {need}")
        return {"queue_position": pos + 1, "priority": float(prios[pos]), "weight": weight,
                "lambda_fairness": self.lambda_fairness, "in_window": inside, "window_jobs": n_window,
                "window_gpus": idle, "window_need": need, "boundary": boundary,
                "why": f"{side}; priority {float(prios[pos]):.3g}, weight {weight:.3g}"}

    def profiling_queue(self, view: ClusterView, idle: np.ndarray, est: HopsThroughput) -> list[ProfileRequest]:
        """Section 3.2's profiling queue, served before any plan: each waiting job not yet profiled on a type
        it accepts is profiled on one GPU of it, in arrival order. A GPU no job holds is taken first (on the
        fullest server with one, keeping holes whole); when the type has none, a running job's GPU is
        taken (on the server with the fewest running GPUs), as the paper runs the profiling queue first and
        plans the rest. A job whose components the store already holds for a type (recorded by an earlier
        process on the same store) is not profiled there again. ``idle`` loses the GPUs taken."""
        cluster = view.cluster
        busy = view.busy_gpus()
        held = view.profiling_gpus()  # a GPU a profile still holds is no candidate, not even to take over
        taken = np.zeros(cluster.num_gpus, dtype=bool) if held is None else held
        out: list[ProfileRequest] = []
        waiting = sorted((j for j in view.jobs if not j.placement and not j.profiling),
                         key=lambda j: (j.spec.submit_time_s, j.job_id))
        for job in waiting:
            gpus, shapes = [], []
            for t in cluster.type_names:
                if (not job.spec.allows_gpu_type(t) or t in job.profiled_types
                        or est.components(job.job_id, t) is not None):
                    continue
                gpu = profile_gpu(cluster, cluster.nodes_of_type[t], busy, taken, idle)
                if gpu is None:
                    continue
                taken[gpu] = True
                idle[int(cluster.gpu_node[gpu])] -= 1
                gpus.append(gpu)
                shapes.append((t, 1))
            if gpus:
                out.append(ProfileRequest(job, tuple(shapes), gpus=tuple(gpus)))
        return out

    def _fill(self, view: ClusterView, plan: Plan, queue: list[JobView], prios: np.ndarray,
              idle: np.ndarray) -> None:
        """Plan again, at once, the GPUs the round's first plan left idle (section 3.6: "if there are still
        available resources after the initial planning, we continue to perform planning"). Each such plan is
        for fragments: the jobs of ``queue`` the plans so far left out, their window over the GPUs left,
        widened by the sensitivity adjustment. Plans follow one another until one places nobody or no GPU
        is left; their demands join ``plan``'s."""
        cluster = view.cluster
        left = idle.copy()

        def take(demands: list[Demand]) -> None:  # the GPUs ``demands`` get, off ``left``
            for d in demands:
                for gpus, k in d.spread:
                    left[int(cluster.gpu_node[gpus[0]])] -= k

        take(plan.demands)
        planned = {d.job.job_id for d in plan.demands}
        plans = filled = 0
        while left.sum() > 0:
            rest = [i for i, j in enumerate(queue) if j.job_id not in planned]
            if not rest:
                break
            more = self._fragment_plan(view, [queue[i] for i in rest], prios[rest], left)
            plans += 1
            if not more.demands:
                break
            take(more.demands)
            planned.update(d.job.job_id for d in more.demands)
            filled += len(more.demands)
            plan.demands += more.demands
        plan.info["hops.fill_plans"] = float(plans)
        plan.info["hops.filled"] = float(filled)

    def _fragment_plan(self, view: ClusterView, queue: list[JobView], prios: np.ndarray, idle: np.ndarray) -> Plan:
        """One plan for fragments: the window of ``queue`` over the ``idle`` GPUs, widened by the sensitivity
        adjustment (when on), planned by the ILP."""
        chosen = list(range(len(service_window(queue, int(idle.sum())) if self.service_window else queue)))
        if self.sensitivity_adjustment:
            rho = [self.job_sensitivity(view, j) for j in queue]
            chosen = sensitivity_adjustment(queue, len(chosen), rho, int(idle.sum()))
        return self._plan(view, [queue[i] for i in chosen], prios[chosen], idle)

    def allocate_more(self, view: ClusterView, ordered: list[JobView]) -> Plan:
        """A plan for GPUs that fell idle inside the round (fragments, finished jobs): running jobs keep their
        GPUs; waiting jobs in the window, widened by the sensitivity adjustment, may get the idle ones."""
        self.require_estimator().update(view)
        idle = idle_per_server(view, running_held=True)
        pinned = [Demand(job=j, num_gpus=len(j.placement), gpu_type=view.cluster.gpu_type_of[j.placement.gpus[0]],
                         batch_size=j.batch_size, pinned=True)
                  for j in ordered if j.placement and not j.profiling]
        queue = [j for j in ordered if not j.placement and not j.profiling]
        if not self.multi_plan or idle.sum() <= 0 or not queue:
            return Plan(demands=pinned)
        plan = self._fragment_plan(view, queue, self.priorities(view, queue), idle)
        plan.demands = pinned + plan.demands
        plan.info["hops.extra_plan"] = 1.0
        return plan

    def job_sensitivity(self, view: ClusterView, job: JobView) -> float:
        """A job's sensitivity for the adjustment: the mean of equation 10 over the GPU types it accepts that
        have two servers or more (1 when there are none)."""
        cluster = view.cluster
        vals = [self.sensitivity(job, t) for t in cluster.type_names
                if job.spec.allows_gpu_type(t) and len(cluster.nodes_of_type[t]) >= 2]
        return float(np.mean(vals)) if vals else 1.0

    def _plan(self, view: ClusterView, window: list[JobView], prios: np.ndarray, idle: np.ndarray) -> Plan:
        """The priority-weighted ILP (eqs. 11-13) of ``window`` over the ``idle`` GPUs of each server."""
        # Server classes merge servers the planner cannot tell apart (refined by the estimator's server layer)
        if self.server_classes:
            return self._plan_classes(view, window, prios, idle)
        known = self._known_servers(window)
        cluster = view.cluster
        weights = priority_weights(prios, self.lambda_fairness)
        group, values, cols, configs = [], [], [], []
        for i, job in enumerate(window):
            opts = self.configurations(view, job, idle)
            if not opts:
                continue
            gains = self._throughputs(job, opts)
            keep = gains > 0
            if not keep.any():
                continue
            opts = [c for c, k in zip(opts, keep, strict=True) if k]
            gains = gains[keep] / gains[keep].min()
            current = current_servers(view, job)
            for c, g in zip(opts, gains, strict=True):
                bonus = 1.0 + (self.keep_bonus if c.servers == current else 0.0)
                group.append(i)
                values.append(weights[i] * g * bonus)
                cols.append(c.servers)
                configs.append(c)
        plan = Plan()
        plan.info["hops.window"] = float(len(window))
        if not configs:
            return plan
        rows = [n for servers in cols for n, _ in servers]
        amounts = [k for servers in cols for _, k in servers]
        col_idx = [o for o, servers in enumerate(cols) for _ in servers]
        usage = sp.csc_matrix((np.array(amounts, dtype=float), (rows, col_idx)),
                              shape=(len(cluster.nodes), len(configs)))
        problem = MultiResourceProblem(group=np.array(group), usage=usage, value=np.array(values),
                                       capacity=idle.astype(float), num_groups=len(window),
                                       ordered=interchangeable_servers(view, window, idle, known))
        result = solve_multi_assignment(problem, mip_rel_gap=self.mip_rel_gap, time_limit_s=self.time_limit_s,
                                        node_limit=self.mip_node_limit)
        for i, o in enumerate(result.choice.tolist()):
            if o < 0:
                continue
            c = configs[o]
            spread = tuple((tuple(cluster.gpus_of_node(n)), k) for n, k in c.servers)
            plan.demands.append(Demand(job=window[i], num_gpus=c.num_gpus, gpu_type=c.gpu_type,
                                       num_nodes=c.num_nodes, spread=spread))
        plan.info["hops.options"] = float(len(configs))
        plan.info["hops.solve_s"] = result.solve_s
        plan.info["hops.objective"] = result.objective
        plan.info["hops.bound"] = result.bound
        plan.info["hops.time_limit_hit"] = float(result.time_limited)
        return plan

    def _plan_classes(self, view: ClusterView, window: list[JobView], prios: np.ndarray,
                      idle: np.ndarray) -> Plan:
        """The same ILP over server classes, mapped back onto servers (:mod:`dlsched.policies.hops.classes`)."""
        cluster = view.cluster
        weights = priority_weights(prios, self.lambda_fairness)
        profiles = self._server_profiles(window)
        classes = ServerClasses.of(cluster, idle, profiles, self.server_tolerance)
        catalog = SignatureCatalog(classes, cluster, idle)
        group: list[int] = []
        values: list[float] = []
        sigs: list[Signature] = []
        types: list[str] = []
        currents = [current_servers(view, j) for j in window]
        type_size = {t: (len(nodes), max(cluster.nodes[n].num_gpus for n in nodes))
                     for t, nodes in cluster.nodes_of_type.items() if nodes}
        for i, job in enumerate(window):
            current = classes.signature(currents[i]) if currents[i] else None
            opts: list[Signature] = []
            shapes: list[tuple[str, int, int]] = []  # per option: (type, servers, GPUs)
            for t in cluster.type_names:
                if t not in type_size or not job.spec.allows_gpu_type(t):
                    continue
                count, size = type_size[t]
                low = count >= 2 and self.sensitivity(job, t) <= self.sensitivity_threshold
                for r in job.spec.requirement_set():
                    (agg, dist), (agg_shapes, dist_shapes) = catalog.of(t, r), catalog.shapes_of(t, r)
                    opts += agg
                    shapes += agg_shapes
                    if low or r > size:
                        opts += dist
                        shapes += dist_shapes
            if not opts:
                continue
            gains = self._shape_throughputs(job, shapes)
            if profiles:
                gains = slowest_piece(classes, i, opts, gains)
            keep = gains > 0
            if not keep.any():
                continue
            norm = gains[keep].min()
            idx = np.flatnonzero(keep).tolist()
            bonus = np.ones(len(idx)) if current is None else \
                np.array([1.0 + (self.keep_bonus if opts[o] == current else 0.0) for o in idx])
            # elementwise, the same products as one option at a time: (weight * (gain / norm)) * bonus
            values += (weights[i] * (gains[idx] / norm) * bonus).tolist()
            group += [i] * len(idx)
            sigs += [opts[o] for o in idx]
            types += [shapes[o][0] for o in idx]
        plan = Plan()
        plan.info["hops.window"] = float(len(window))
        if not sigs:
            return plan
        usage, cap = class_rows(classes, sigs)
        problem = MultiResourceProblem(group=np.array(group), usage=usage, value=np.array(values), capacity=cap,
                                       num_groups=len(window))
        result = solve_multi_assignment(problem, mip_rel_gap=self.mip_rel_gap, time_limit_s=self.time_limit_s,
                                        method=self.solver, round_gap=self.round_gap,
                                        node_limit=self.mip_node_limit)
        value = np.array(values)
        placed = map_back(classes, idle, problem.group, sigs, value, result.choice, lambda g: currents[g])
        objective = 0.0
        for i in sorted(placed):
            o, servers = placed[i]
            objective += float(value[o])
            spread = tuple((tuple(cluster.gpus_of_node(n)), k) for n, k in servers)
            plan.demands.append(Demand(job=window[i], num_gpus=sum(k for _, k in servers), gpu_type=types[o],
                                       num_nodes=len(servers), spread=spread))
        plan.info["hops.options"] = float(len(sigs))
        plan.info["hops.classes"] = float(classes.num_classes)
        plan.info["hops.servers_told_apart"] = float(len(profiles))
        plan.info["hops.solve_s"] = result.solve_s
        plan.info["hops.objective"] = objective
        plan.info["hops.bound"] = result.bound
        plan.info["hops.time_limit_hit"] = float(result.time_limited)
        return plan

    def _known_servers(self, window: list[JobView]) -> set[int]:
        """Servers the estimator's server layer tells apart for a job of the window (none for the oracle):
        their records differ from the type's by more than ``server_tolerance``."""
        est = self.require_estimator()
        if not isinstance(est, HopsThroughput) or not est.server_layer:
            return set()
        return {s for j in window for s in est.store.distinct_servers(j.job_id, self.server_tolerance)}

    def _server_profiles(self, window: list[JobView]) -> Mapping[int, Profile]:
        """Per server the estimator tells apart for a job of the window: its answers that differ from the
        type layer's by more than ``server_tolerance``, keyed (window index, layer kind, layer key), with
        the server's and the type's per-GPU throughput (empty for the oracle or without the server layer)."""
        est = self.require_estimator()
        if not isinstance(est, HopsThroughput) or not est.server_layer:
            return {}
        out: dict[int, dict[Hashable, tuple[float, float]]] = {}
        for i, j in enumerate(window):
            for server, kind, key, mine, theirs in est.store.distinct_records(j.job_id, self.server_tolerance):
                out.setdefault(server, {})[(i, kind, key)] = (mine, theirs)
        return out

    def _shape_throughputs(self, job: JobView, shapes: list[tuple[str, int, int]]) -> np.ndarray:
        """The estimator's throughput of (type, servers, GPUs) shapes (one query per type)."""
        out = np.zeros(len(shapes))
        by_type: dict[str, list[int]] = {}
        for i, (t, _, _) in enumerate(shapes):
            by_type.setdefault(t, []).append(i)
        est = self.require_estimator()
        for gtype, idx in by_type.items():
            slot: dict[tuple[int, int], int] = {}
            where = [slot.setdefault((shapes[i][1], shapes[i][2]), len(slot)) for i in idx]
            rates = np.asarray(est.goodput_many(job, gtype, np.array(list(slot), dtype=np.int64)))
            out[idx] = rates[where]
        return out

    def _throughputs(self, job: JobView, configs: list[Config]) -> np.ndarray:
        """The estimator's throughput of each configuration's shape on its type (one query per type)."""
        out = np.zeros(len(configs))
        est = self.require_estimator()
        if isinstance(est, HopsThroughput):  # location-specific: each configuration on its exact servers
            for i, c in enumerate(configs):
                out[i] = est.config_throughput(job.job_id, c.gpu_type, c.servers)
            return out
        by_type: dict[str, list[int]] = {}
        for i, c in enumerate(configs):
            by_type.setdefault(c.gpu_type, []).append(i)
        for gtype, idx in by_type.items():
            shapes = np.array([[configs[i].num_nodes, configs[i].num_gpus] for i in idx])
            uniq, inverse = np.unique(shapes, axis=0, return_inverse=True)
            out[idx] = np.asarray(est.goodput_many(job, gtype, uniq))[inverse.ravel()]
        return out

