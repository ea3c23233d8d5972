"""Registration of Hops's stages and the ``hops`` preset.

The ``finish-time-fairness`` ordering is Hops's alternative priority (section 4.4: ``--policy hops --ordering
finish-time-fairness``). The ``latency-ratio`` ordering is usable under other schedulers as well (``--policy sia --ordering
latency-ratio``, ``--policy gavel --ordering latency-ratio``, as the Hops paper runs its baselines).
``--set`` keys of the allocation: ``lambda_fairness`` (1), ``sensitivity_threshold`` (1.4),
``service_window`` (on), ``sensitivity_adjustment`` (on), ``multi_plan`` (on), ``fill_at_round_start`` (on),
``plan_on_profile_end`` (on), ``server_classes`` (on),
``server_tolerance`` (0.05), ``keep_bonus`` (0.05), ``solver`` (auto), ``round_gap`` (0.01), ``mip_rel_gap``, ``mip_node_limit`` (2000),
``time_limit_s`` (60);
of the ordering: ``refresh_s`` (30 s).

``gavel-hops`` is the paper's Gavel baseline (:mod:`dlsched.policies.gavel.hops_baseline`): Gavel's LP and
leases under the latency-ratio queue, handed out strictly in its order (``--set queue=backfill`` passes over a
job that fits nowhere, as ``gavel --ordering latency-ratio`` does).
"""

from __future__ import annotations

from dlsched.policies.hops.allocation import HopsAllocation
from dlsched.policies.hops.ordering import FinishTimeFairness, LatencyRatio
from dlsched.policies.pollux.placement import PolluxPlacement
from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage

register_stage("ordering", "latency-ratio", LatencyRatio,
               "Hops's latency ratio: waiting time over expected running time (eqs. 8-9), refreshed every 30 s")
register_stage("ordering", "finish-time-fairness", FinishTimeFairness,
               "Hops's alternative priority (section 4.4): projected finish-time fairness rho, time in the shared "
               "cluster over time alone on 1/N of it, refreshed every 30 s")
register_stage("allocation", "hops", HopsAllocation,
               "Hops: service window, location-specific configurations by placement sensitivity, "
               "priority-weighted ILP over the throughput-gain matrix (HiGHS)")
register_stage("placement", "hops", PolluxPlacement,
               "Hops's placer: each job on the exact servers its configuration names")

register_scheduler("hops", SchedulerEntry(
    description="Hops (SoCC'24): latency-ratio queue, service window, location-specific configurations, "
                "priority-weighted ILP (HiGHS)",
    ordering="latency-ratio", allocation="hops", placement="hops", round_s=60.0))

register_scheduler("gavel-hops", SchedulerEntry(
    description="The Hops paper's Gavel baseline (SoCC'24, section 4): Gavel's LP and 360 s leases under Hops's "
                "latency-ratio queue, strict in-order (head-of-line blocking), each rigid gang on one GPU type",
    ordering="latency-ratio", allocation="gavel-hops", placement="gavel-lease", round_s=360.0))
