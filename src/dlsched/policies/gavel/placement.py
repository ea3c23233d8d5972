"""Gavel's lease placement: which GPUs of its type each leased job gets.

Two ways, ``assign``:

* ``packed`` (the default): a job staying on its type keeps its GPUs when they are still free; the others
  are packed on as few nodes as possible, biggest gangs first (:class:`~dlsched.policies.placement.PackedPlacement`).
* ``in-order``: as Gavel's scheduler assigns workers, and as the Gavel of Sia's artifact does
  (``sia-simulator/gavel.py``, ``GavelPolicy.schedule_jobs_on_workers`` and ``assign_workers_to_job``).
  Per GPU type, the leased jobs are taken by gang size, biggest first; within one size, the jobs that held
  GPUs of this type in the previous round keep them if no bigger job has taken any of them, and then the
  others of that size take free GPUs in server order from a pointer that only moves forward (servers in
  node order, GPUs in order within a server). A job keeps its GPUs only when no bigger gang got one of
  them first, and a job placed anew takes whatever free GPUs come next, so it may span servers it would
  fit on one of (for instance the last 2 free GPUs of one server and 2 of the next). Such a job's per-node
  counts differ from one lease to the next, and every such change is a restart (Sia's artifact counts it
  as one, ``Job.reallocate`` in ``sia-simulator/job.py``; so does ``restarts_per_job``).

Within one gang size, jobs are taken in the order the allocation stage hands them (Gavel's: by submit
time); Gavel's code takes them in its priority order.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlsched.core import ClusterView, Decision, Placement
from dlsched.policies.placement import FreePool, PackedPlacement, keep_current_placements, start_placement
from dlsched.policies.stages import Demand, Plan

#: How leased jobs get their GPUs: packed on few nodes (default), or Gavel's in-order worker assignment.
ASSIGN_MODES = ("packed", "in-order")


@dataclass
class GavelLeasePlacement(PackedPlacement):
    """Gavel's lease placement (module docstring); ``assign`` picks packed or Gavel's in-order assignment."""

    #: ``packed``: keepers keep their free GPUs, the rest packed on few nodes; ``in-order``: Gavel's code.
    assign: str = "packed"
    name: str = "gavel-lease"

    def __post_init__(self) -> None:
        if self.assign not in ASSIGN_MODES:
            raise ValueError(f"unknown assign '{self.assign}' (one of: {', '.join(ASSIGN_MODES)})")

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        if self.assign == "packed":
            return super().place(view, plan)
        pool, decision, demands = start_placement(view, plan)
        by_type: dict[str, list[Demand]] = {}
        untyped: list[Demand] = []
        for d in demands:
            if d.gpu_type is None:
                untyped.append(d)
            else:
                by_type.setdefault(d.gpu_type, []).append(d)
        for gtype, ds in by_type.items():
            self._assign_in_order(view, pool, decision, gtype, ds)
        for d in untyped:  # an allocation that names no type: packed, as the default does
            self.place_first_fitting(pool, decision, d)
        return decision

    @staticmethod
    def _assign_in_order(view: ClusterView, pool: FreePool, decision: Decision, gtype: str,
                         demands: list[Demand]) -> None:
        """Gavel's assignment on one GPU type: sizes biggest first; per size, keepers, then the pointer."""
        cluster = view.cluster
        if gtype not in cluster.nodes_of_type:
            return
        servers = [list(cluster.gpus_of_node(n)) for n in cluster.nodes_of_type[gtype]]
        ptr = 0
        for size in sorted({d.num_gpus for d in demands}, reverse=True):
            rest = keep_current_placements(view, pool, decision, [d for d in demands if d.num_gpus == size])
            for d in rest:
                got: list[int] = []
                while len(got) < size and ptr < len(servers):
                    if not servers[ptr]:
                        ptr += 1
                        continue
                    g = servers[ptr].pop(0)
                    if pool.free_mask[g]:
                        got.append(g)
                if len(got) < size:  # fewer free GPUs than leased (only if GPUs were held outside the lease)
                    return
                pool.take(got)
                decision.place(d.job.job_id, Placement.of(got), d.batch_size)
