"""Pollux's node-level placement: the allocation's per-virtual-node GPU counts become exact GPUs.

On every virtual node, each job first keeps GPUs it already holds there, then takes free ones, in the
allocation's order. A job that cannot get its whole gang (only possible after reservations or pinned jobs
took GPUs the search counted as free) waits this round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dlsched.core import ClusterView, Decision, Placement
from dlsched.policies.placement import start_placement
from dlsched.policies.stages import PlacementStage, PlacementTraits, Plan


@dataclass
class PolluxPlacement(PlacementStage):
    """Places each demand by its ``spread`` hint (per virtual node counts)."""

    name: str = "pollux"
    traits: ClassVar[PlacementTraits] = PlacementTraits(needs_spread=True)

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        pool, decision, demands = start_placement(view, plan)
        groups: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for i, d in enumerate(demands):
            for gpus, n in d.spread:
                groups.setdefault(gpus, []).append((i, n))
        chosen: list[list[int]] = [[] for _ in demands]
        current = [set(d.job.placement.gpus) for d in demands]
        for gpus in sorted(groups, key=lambda g: g[0]):
            free_here = [g for g in gpus if pool.free_mask[g]]
            taken: set[int] = set()
            need: list[tuple[int, int]] = []
            for i, n in groups[gpus]:
                mine = [g for g in free_here if g in current[i]][:n]
                chosen[i] += mine
                taken.update(mine)
                if len(mine) < n:
                    need.append((i, n - len(mine)))
            free = [g for g in free_here if g not in taken]
            for i, n in need:
                chosen[i] += free[:n]
                free = free[n:]
        for i, d in enumerate(demands):
            if len(chosen[i]) == d.num_gpus:
                pool.take(chosen[i])
                decision.place(d.job.job_id, Placement.of(chosen[i]), d.batch_size)
        return decision
