"""A best-fit placement: each job on the node whose free GPUs fit it most tightly.

Of the nodes (of every GPU type the job accepts) with room for the whole job, the one left with the fewest
free GPUs wins, so large holes stay whole for large jobs. A job no node holds alone spans the fewest nodes
(the emptiest first), finishing on the node that fits the rest most tightly. Registered as ``best-fit``::

    dlsched simulate --plugin examples/stages/bestfit.py --placement best-fit --jobs 20

With ``sticky`` (the default; ``--set sticky=off`` turns it off) a running job keeps its GPUs while they
still satisfy its demand, as Tiresias's placement does, so best fit only decides where new and moved jobs go.
The engine checks every decision (a GPU given twice, a gang split or short, a job on two GPU types fails the
run), as it does for the shipped stages.
"""

from __future__ import annotations

from dataclasses import dataclass

import dlsched
from dlsched.policies.placement import FreePool, keep_current_placements, packed_gpus, start_placement


def tightest(pool: FreePool, demand: dlsched.Demand, shape: dlsched.Shape) -> list[int] | None:
    """The GPUs best fit gives ``shape`` of ``demand``: the node with the least room left after it, else the
    fewest nodes (then the least room left on the last one); None when no accepted type has room."""
    best: tuple[int, int, int, list[int]] | None = None  # (nodes used, free GPUs left, node, GPUs)
    for gtype in pool.allowed_types(demand, shape):
        for node in pool.nodes_of_type(gtype):
            free = int(pool.free_per_node[node])
            if free >= shape.num_gpus:
                candidate = (1, free - shape.num_gpus, int(node), pool.free_gpus_on(int(node))[:shape.num_gpus])
                if best is None or candidate[:3] < best[:3]:
                    best = candidate
    if best is not None:
        return best[3]
    spans: list[tuple[int, int, list[int]]] = []
    for rank, gtype in enumerate(pool.allowed_types(demand, shape)):
        got = packed_gpus(pool, gtype, shape.num_gpus)
        if got is not None:
            spans.append((got[1], rank, got[0]))
    return min(spans)[2] if spans else None


@dataclass
class BestFitPlacement(dlsched.PlacementStage):
    """Best fit: each job on the node whose free GPUs fit it most tightly."""

    #: Running jobs keep their GPUs while these still satisfy their demand.
    sticky: bool = True
    name: str = "best-fit"

    def place(self, view: dlsched.ClusterView, plan: dlsched.Plan) -> dlsched.Decision:
        pool, decision, demands = start_placement(view, plan)  # reserved GPUs, pinned jobs, profiles
        if self.sticky:
            demands = keep_current_placements(view, pool, decision, demands)
        for demand in demands:  # in the allocation's order
            for shape in demand.shapes():  # the preferred shape, then the fallbacks
                gpus = tightest(pool, demand, shape)
                if gpus is not None:
                    pool.take(gpus)
                    decision.place(demand.job.job_id, dlsched.Placement.of(gpus), demand.batch_size)
                    break
        return decision


dlsched.register_stage("placement", "best-fit", BestFitPlacement)
