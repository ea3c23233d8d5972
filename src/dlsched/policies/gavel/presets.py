"""Registration of Gavel's stages and the ``gavel`` preset.

``--set`` keys (``gavel.KEY`` and ``allocation.KEY`` are accepted as well): ``objective``
(``max-sum-throughput``, ``finish-time-fairness``, ``max-min``), ``lease_s`` (360 s), ``throughputs``
(``profiled``: the simulator's truth, as Gavel's offline profiles; ``bootstrap``: Sia's estimator),
``profile`` (with ``bootstrap``: profile new jobs before scheduling them; with ``off`` throughputs are learnt
as jobs run), ``normalize_throughputs``, ``maxmin_reference`` (``proportional``, ``max-min-lp``),
``ftf_isolated`` (``equal-share``, ``max-min-lp``), ``ftf_age`` (``isolated-time``, ``wall-clock``),
``lp_method``; and the placement's ``assign`` (``packed``, the default, or ``in-order``: GPUs assigned as
Gavel's scheduler and the Sia artifact's Gavel assign workers, :mod:`dlsched.policies.gavel.placement`). The
LP defaults are Gavel's code (:mod:`dlsched.policies.gavel.lp`). Gavel runs jobs rigidly; pair it with
TunedJobs (``--trace sia-philly:1@tuned``) as the thesis does. The preset's rounds are Gavel's
360 s leases.

The ``gavel-hops`` allocation is the Hops paper's Gavel baseline (:mod:`dlsched.policies.gavel.hops_baseline`);
its preset is registered with Hops's (:mod:`dlsched.policies.hops.presets`), after the latency-ratio queue.
"""

from __future__ import annotations

from dlsched.policies.gavel.allocation import GavelAllocation
from dlsched.policies.gavel.hops_baseline import GavelHopsAllocation
from dlsched.policies.gavel.placement import GavelLeasePlacement
from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage

register_stage("allocation", "gavel", GavelAllocation,
               "Gavel: heterogeneity-aware LP over time fractions per GPU type, priorities from time "
               "received, leases of lease_s seconds, rigid jobs")
register_stage("allocation", "gavel-hops", GavelHopsAllocation,
               "The Hops paper's Gavel: Gavel's LP and leases handed out in the latency-ratio queue's order, "
               "strictly (the first job that fits on no GPU type blocks those behind it), each gang on one type")
register_stage("placement", "gavel-lease", GavelLeasePlacement,
               "Gavel's lease placement: a job staying on its type keeps its free GPUs, the others are packed "
               "on few nodes in the allocation's order (biggest gangs first); assign=in-order assigns GPUs as "
               "Gavel's code does (biggest gangs first, a job keeps its GPUs unless a bigger one took one, "
               "the rest take the next free GPUs in server order)", sticky=True)

register_scheduler("gavel", SchedulerEntry(
    description="Gavel (OSDI'20): heterogeneity-aware LP over time fractions per GPU type (max-sum-throughput, "
                "finish-time-fairness, max-min), round-based leases of 360 s, rigid jobs",
    ordering="fifo", allocation="gavel", placement="gavel-lease", round_s=360.0))
