"""Registration of the packing stages and the schedulers Gimbal is measured against (section 7).

* ``slurm``: Slurm-style exclusive first-come-first-served: rigid gangs in submission order, consolidated,
  never preempted or packed;
* ``gandiva``: Gandiva (OSDI'18) with packing, as Gimbal runs it: first come first served, extended to
  deadlines by ordering jobs that have one earliest deadline first, with introspective packing and
  migration (pairs whose measured speeds add up to less than taking turns are unpacked, the job that
  cannot keep its GPUs moves or waits), equal-size jobs unless ``relaxed``; the FIFO preset with
  consolidated non-sticky placement that carried this name before is ``fifo-packed``;
* ``gavel-packing``: Gavel's space-sharing policy with the makespan objective (:mod:`dlsched.policies.gavel.packing`);
* ``lucid``: Lucid (ASPLOS'23) as Gimbal runs it: shortest (expected) job first, packing two jobs when their
  sharing scores and memory footprints allow (Lucid's sharing test; ``sharing_test=util`` the simplified
  test on profiled GPU utilisations), equal-size jobs only; with
  ``--set relaxed=true`` the relaxed mode of Gimbal's evaluation (unequal packing, looser limit).
"""

from __future__ import annotations

from dlsched.policies.gavel.packing import GavelPackingAllocation, GavelPackingPlacement
from dlsched.policies.gimbal import GimbalCoordination
from dlsched.policies.packing import (
               EarliestDeadline,
               GandivaPlacement,
               PackingGang,
               PackingPlacement,
               PackingRules,
)
from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage

register_stage("allocation", "packing-gang", PackingGang,
               "rigid gangs in priority order while they fit twice the cluster (two workers per GPU)")
register_stage("placement", "packing", PackingPlacement,
               "exclusive consolidated placement, else packed onto a running job Lucid's sharing test accepts")
register_stage("ordering", "edf", EarliestDeadline,
               "earliest deadline first; jobs without one after, first come first served")
register_stage("placement", "gandiva", GandivaPlacement,
               "Gandiva's introspective packing: packing placement, pairs that run slower than taking turns "
               "unpacked")
register_stage("coordination", "packing", PackingRules,
               "jobs may share GPUs under Gimbal's packing rules; rule-breaking packings run one after another")

register_stage("coordination", "gimbal", GimbalCoordination,
               "Gimbal: packing rules kept, then per packing set a search of share limits and batch splits "
               "for the scheduler's objective (squeeze/swell, early exit)")

register_stage("allocation", "gavel-packing", GavelPackingAllocation,
               "Gavel's space-sharing makespan LP over single jobs and packed pairs, served round by round")
register_stage("placement", "gavel-packing", GavelPackingPlacement,
               "places Gavel's combinations: a pair on the same GPUs, combinations keep their GPUs")

register_scheduler("slurm", SchedulerEntry(
    description="Slurm-style exclusive FCFS: rigid gangs in submission order, consolidated, never packed",
    ordering="fifo", allocation="gang", placement="packed-sticky"))
register_scheduler("lucid", SchedulerEntry(
    description="Lucid: shortest job first, packing equal-size jobs that pass its sharing test on profiled "
                "sharing scores and memory (relaxed=true: unequal packing, Gimbal's evaluation mode)",
    ordering="sjf", allocation="packing-gang", placement="packing", coordination="packing", objective="jct"))
register_scheduler("gandiva", SchedulerEntry(
    description="Gandiva with packing: FCFS (earliest deadline first among jobs with deadlines), introspective "
                "packing of equal-size jobs, pairs slower than taking turns unpacked (relaxed=true: unequal)",
    ordering="edf", allocation="packing-gang", placement="gandiva", coordination="packing",
    objective="deadline"))
register_scheduler("gavel-packing", SchedulerEntry(
    description="Gavel's packing policy for makespan: LP over time fractions of single jobs and equal-size "
                "packed pairs (profiled pair speeds), round-based priorities (relaxed=true: unequal pairs)",
    ordering="fifo", allocation="gavel-packing", placement="gavel-packing", coordination="packing",
    round_s=360.0, objective="makespan"))
