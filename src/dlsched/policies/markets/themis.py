"""Themis (Mahajan et al., NSDI'20): finish-time-fair auctions over leases.

Each app's finish-time fairness is ``rho = T_shared / T_id`` (:mod:`.lease`). When leases expire (every
round), the arbiter offers the free GPUs to the ``1 - f`` fraction of apps with the worst ``rho`` (``f`` the
fairness knob; at least one app). Each offered app bids its valuation of a bundle: the ``rho`` it expects
without it over the ``rho`` it expects with it. For a rigid gang the only useful bundle is its whole gang
(anything less does not run), so the bid is ``(age + lease + remaining) / (age + remaining)``: winning
saves it a lease's wait. The arbiter picks the bundles that maximise the product of valuations (Nash social
welfare, a 0/1 knapsack over gangs: :func:`solve_auction`, a MILP with HiGHS) and applies partial
allocation: winner ``i`` receives the fraction ``c_i = prod_{j != i} v_j(S) / prod_{j != i} v_j(S_{-i})`` of
its bundle, where ``S_{-i}`` is the best allocation without ``i`` (:func:`partial_allocation`); the hidden
payment ``1 - c_i`` keeps apps truthful. A gang cannot run on part of its GPUs, so a winner keeps its gang
when ``c_i g_i`` rounds to ``g_i`` GPUs and otherwise its GPUs are left over (``partial_allocation=off``
grants every winner its bundle). Leftover GPUs go, work-conservingly, to the apps not in the auction and
then to its losers, worst ``rho`` first (a winner's withheld share is the payment: it does not come back to
it as leftover).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dlsched.core import ClusterView, JobView
from dlsched.core.ranges import DAY_S, ranged
from dlsched.policies.markets.lease import LeaseAllocation, job_estimates
from dlsched.policies.stages import Plan
from dlsched.solvers.highs import SparseProblem, solve_sparse


def solve_auction(log_values: np.ndarray, gpus: np.ndarray, capacity: float) -> tuple[np.ndarray, float]:
    """The bundles maximising ``sum log v_i`` (the product of valuations) whose gangs fit ``capacity``.

    Returns a boolean mask of winners and the welfare (sum of their log valuations).
    """
    n = len(log_values)
    if n == 0:
        return np.zeros(0, dtype=bool), 0.0
    problem = SparseProblem(c=np.asarray(log_values, dtype=float),
                            A=sp.csc_matrix(np.asarray(gpus, dtype=float).reshape(1, n)),
                            row_lo=np.array([-np.inf]), row_hi=np.array([float(capacity)]),
                            col_lo=np.zeros(n), col_hi=np.ones(n), integer=np.ones(n, dtype=bool))
    sol = solve_sparse(problem, integer=True, mip_rel_gap=1e-9)
    won = sol.x > 0.5
    return won, float(np.sum(np.asarray(log_values)[won]))


def partial_allocation(log_values: np.ndarray, gpus: np.ndarray, capacity: float,
                       won: np.ndarray) -> np.ndarray:
    """Each winner's share ``c_i`` of its bundle (1 for losers: they receive nothing to scale)."""
    c = np.ones(len(log_values))
    total = float(np.sum(log_values[won]))
    for i in np.flatnonzero(won):
        others = np.array(log_values, dtype=float)
        others[i] = 0.0
        keep = np.ones(len(others), dtype=bool)
        keep[i] = False
        _, best_without = solve_auction(others[keep], gpus[keep], capacity)
        with_i = total - float(log_values[i])
        c[i] = math.exp(min(0.0, with_i - best_without))
    return c


@dataclass
class ThemisAllocation(LeaseAllocation):
    """Themis's arbiter; the fields are its tunables. State: the lease (:class:`.lease.LeaseAllocation`) and
    the last auction's participants and shares (``last_offered``, ``last_shares``: job -> c_i)."""

    #: Lease length in seconds (the thesis runs Themis with 360 s rounds).
    lease_s: float = ranged(360.0, 1.0, DAY_S)
    #: The fairness knob f: each auction is offered to the 1 - f fraction of apps with the worst rho.
    fairness_knob: float = ranged(0.8, 0.0, 1.0, hi_open=True)
    #: Apply the hidden payments (a winner keeps its gang only if its share c_i rounds to the whole gang).
    partial_allocation: bool = True
    name: str = "themis"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.last_offered: list[str] = []
        self.last_shares: dict[str, float] = {}

    def describe(self) -> str:
        return (f"{self.name} (lease_s={self.lease_s:g}, f={self.fairness_knob:g}, "
                f"partial_allocation={'on' if self.partial_allocation else 'off'})")

    def decide(self, view: ClusterView, jobs: list[JobView], capacity: int, plan: Plan) -> list[str]:
        est = job_estimates(jobs, capacity)
        rho = est.rho()
        order = sorted(range(len(jobs)), key=lambda i: (-rho[i], jobs[i].spec.submit_time_s, jobs[i].job_id))
        n_offer = max(1, math.ceil((1.0 - self.fairness_knob) * len(jobs) - 1e-9))
        offered = order[:n_offer]
        gpus = est.gpus[offered]
        base = est.age_s[offered] + est.remaining_s[offered]
        log_values = np.log((base + self.lease_s) / np.maximum(base, 1e-9))
        won, _ = solve_auction(log_values, gpus, capacity)
        shares = partial_allocation(log_values, gpus, capacity, won) if self.partial_allocation \
            else np.ones(len(offered))
        self.last_offered = [jobs[i].job_id for i in offered]
        self.last_shares = {jobs[offered[k]].job_id: float(shares[k]) for k in np.flatnonzero(won)}
        chosen: list[int] = []
        left = capacity
        for k in np.flatnonzero(won):
            g = int(gpus[k])
            if round(shares[k] * g + 1e-9) >= g:
                chosen.append(offered[k])
                left -= g
        plan.info["themis.offered"] = float(len(offered))
        plan.info["themis.winners"] = float(len(chosen))
        # leftover: apps outside the auction, then its losers, worst rho first; gangs that fit
        # (a winner whose share was withheld does not take its GPUs back through the leftover)
        taken = set(chosen)
        winners = {offered[k] for k in np.flatnonzero(won)}
        outside = [i for i in order if i not in set(offered)]
        losers = [i for i in order if i in set(offered) and i not in winners]
        for i in outside + losers:
            g = int(est.gpus[i])
            if i not in taken and g <= left:
                chosen.append(i)
                taken.add(i)
                left -= g
        return [jobs[i].job_id for i in chosen]
