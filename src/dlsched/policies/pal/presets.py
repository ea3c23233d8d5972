"""Registration of PAL's placements (``pm-first``, ``pal``) and of the presets built on them.

The placements attach to any ordering (``--policy fifo --placement pal``, ``--policy las --placement
pm-first``); the presets ``pal`` and ``pm-first`` use FIFO ordering and rigid gangs unless ``--ordering``
says otherwise. PAL's baselines are the core placements with the run's ordering: its "Tiresias" is
``packed-sticky``, its "Gandiva" is ``packed``, plus ``random-sticky`` and ``random``.
"""

from __future__ import annotations

from dlsched.policies.pal.placement import PalPlacement, PmFirstPlacement
from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage

register_stage("placement", "pm-first", PmFirstPlacement,
                   "PAL's PM-First: class A jobs first, each on its class's best-scoring free GPUs (non-sticky)")
register_stage("placement", "pal", PalPlacement,
                   "PAL: PM-First's order, L x V matrix trades PM-score bins against packing (non-sticky)")

register_scheduler("pm-first", SchedulerEntry(
    description="FIFO with rigid gangs and PAL's PM-First placement", ordering="fifo", allocation="gang",
    placement="pm-first", round_s=360.0))
register_scheduler("pal", SchedulerEntry(
    description="FIFO with rigid gangs and PAL placement (variability and locality)", ordering="fifo",
    allocation="gang", placement="pal", round_s=360.0))
