"""Registration of the market-based stages and the ``themis`` and ``shockwave`` presets.

Both run rigid jobs on 360 s leases, as the Sia thesis runs them (its section 3.5: "360s for Gavel, Themis
and Shockwave"), and both are heterogeneity-unaware: demands leave the GPU type to placement. Pair them
with TunedJobs (``--trace sia-philly:1@tuned``) as the thesis does. ``--set`` keys: for ``themis``
``lease_s``, ``fairness_knob`` (f, 0.8), ``partial_allocation``; for ``shockwave`` ``lease_s``,
``window_rounds``, ``ftf_weight``, ``makespan_weight``, ``rho_max``, ``log_bases``, ``mip_gap``,
``node_limit``, ``time_limit_s``, ``warm_start``, ``variant`` (``paper``, the default, or ``sia-artifact``, the
port the Sia thesis ran) and that variant's ``log_origin``, ``makespan_k``, ``priority_power``,
``finish_power``.
"""

from __future__ import annotations

from dlsched.policies.markets.shockwave import ShockwaveAllocation
from dlsched.policies.markets.themis import ThemisAllocation
from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage

register_stage("allocation", "themis", ThemisAllocation,
               "Themis: finish-time-fair auction each lease among the 1-f apps with the worst rho, partial "
               "allocation, leftover to the others; rigid gangs")
register_stage("allocation", "shockwave", ShockwaveAllocation,
               "Shockwave: plan over future rounds maximising log-progress welfare with finish-time-fairness "
               "and makespan regularisers (MILP); rigid gangs")

register_scheduler("themis", SchedulerEntry(
    description="Themis (NSDI'20): finish-time-fair auctions over 360 s leases, rigid jobs",
    ordering="fifo", allocation="themis", placement="packed-sticky", round_s=360.0))
register_scheduler("shockwave", SchedulerEntry(
    description="Shockwave (NSDI'23): market over a window of future 360 s rounds (MILP), rigid jobs",
    ordering="fifo", allocation="shockwave", placement="packed-sticky", round_s=360.0))
