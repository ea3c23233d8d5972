"""Gimbal's packing rules (section 5.1), checked on a set of placements.

Packing puts workers of two jobs on one GPU. Unrestricted, a chain of partial overlaps lets one job's change
ripple through every job in the cluster (the paper's cascade effect, figure 6), so a packing is valid only if:

1. at most two jobs share any GPU;
2. every job that shares a GPU sits on the smallest number of nodes its GPU count allows (optimal topology);
3. jobs that share GPUs form stars (*packing sets*): in each set one job of the largest GPU count (``J_max``)
   shares with every other job and the others share only with it; a job shares only with a strictly larger
   one, except that two jobs of equal size may share when they hold exactly the same GPUs (fully overlapped).

Lucid, Gandiva and Gavel pack conservatively: only equal-size jobs, fully overlapped (``equal_only``).

The module is plain data-in, text-out so that placement stages (to choose GPUs) and the simulator's
invariant checker (to refuse a decision) apply the very same rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dlsched.core.cluster import Cluster
from dlsched.core.placement import Placement

#: Most workers (of distinct jobs) one GPU may hold.
MAX_WORKERS_PER_GPU = 2


def min_nodes(cluster: Cluster, gpu_type: str, num_gpus: int) -> int:
    """The fewest nodes of ``gpu_type`` that can hold ``num_gpus`` GPUs (largest nodes first)."""
    sizes = sorted((n.num_gpus for n in cluster.nodes if n.gpu_type == gpu_type), reverse=True)
    total, used = 0, 0
    for s in sizes:
        if total >= num_gpus:
            break
        total += s
        used += 1
    return used if total >= num_gpus else len(sizes) + 1


@dataclass(frozen=True, slots=True)
class PackingSet:
    """Jobs connected by shared GPUs: ``center`` (J_max) and the jobs packed with it."""

    center: str
    members: tuple[str, ...]


def holders(placements: Mapping[str, Placement]) -> dict[int, list[str]]:
    """GPU id -> jobs holding it (in the mapping's order)."""
    out: dict[int, list[str]] = {}
    for job, p in placements.items():
        for g in p.gpus:
            out.setdefault(g, []).append(job)
    return out


def partners(placements: Mapping[str, Placement]) -> dict[str, set[str]]:
    """Job -> the jobs it shares at least one GPU with (jobs sharing nothing are absent)."""
    out: dict[str, set[str]] = {}
    for jobs in holders(placements).values():
        for a in jobs:
            for b in jobs:
                if a != b:
                    out.setdefault(a, set()).add(b)
    return out


def packing_sets(placements: Mapping[str, Placement]) -> list[PackingSet]:
    """The connected groups of jobs that share GPUs, each with its largest job as centre (ties: job id)."""
    adj = partners(placements)
    seen: set[str] = set()
    out = []
    for start in sorted(adj):
        if start in seen:
            continue
        group, stack = [], [start]
        seen.add(start)
        while stack:
            j = stack.pop()
            group.append(j)
            for k in adj[j]:
                if k not in seen:
                    seen.add(k)
                    stack.append(k)
        center = max(group, key=lambda j: (len(placements[j]), -sorted(group).index(j)))
        out.append(PackingSet(center, tuple(sorted(group))))
    return out


def packing_problem(placements: Mapping[str, Placement], cluster: Cluster, *,
                    equal_only: bool = False) -> str | None:
    """What breaks the packing rules (module docstring) in ``placements``, or None if nothing does."""
    for g, jobs in sorted(holders(placements).items()):
        if len(jobs) > MAX_WORKERS_PER_GPU:
            return f"GPU {g} holds workers of {len(jobs)} jobs {sorted(jobs)}; at most {MAX_WORKERS_PER_GPU} may share"
    adj = partners(placements)
    for job in sorted(adj):
        p = placements[job]
        gtype = cluster.gpu_type_of[p.gpus[0]]
        best = min_nodes(cluster, gtype, len(p))
        if p.num_nodes(cluster) > best:
            return (f"packed job '{job}' spans {p.num_nodes(cluster)} nodes where {best} would hold its "
                    f"{len(p)} GPUs")
    for ps in packing_sets(placements):
        c = ps.center
        for a in ps.members:
            for b in adj[a]:
                if c not in (a, b):
                    return (f"jobs '{a}' and '{b}' share a GPU but neither is the largest job '{c}' of their "
                            f"packing set (packing sets must be stars)")
            if a == c:
                continue
            equal = len(placements[a]) == len(placements[c])
            if equal and placements[a] != placements[c]:
                return f"jobs '{a}' and '{c}' have the same GPU count and share GPUs without full overlap"
            if equal_only and not equal:
                return (f"job '{a}' ({len(placements[a])} GPUs) is packed with '{c}' ({len(placements[c])} GPUs); "
                        f"only equal-size jobs may pack here")
    return None


def can_join(placements: Mapping[str, Placement], cluster: Cluster, job: str, placement: Placement, *,
             equal_only: bool = False) -> bool:
    """Whether adding ``job`` on ``placement`` to valid ``placements`` keeps the packing rules."""
    trial = dict(placements)
    trial[job] = placement
    return packing_problem(trial, cluster, equal_only=equal_only) is None


class PackingState:
    """Placements added one by one, checking each against the rules on its packing set only.

    A new job can only change the packing sets it touches, so :meth:`problem_if_added` checks the rules on
    the union of those sets and the job: the cost follows the set's size, not the cluster's, which keeps a
    round over thousands of jobs linear.
    """

    def __init__(self, cluster: Cluster, *, equal_only: bool = False) -> None:
        self.cluster = cluster
        self.equal_only = equal_only
        self.placements: dict[str, Placement] = {}
        self.held: dict[int, list[str]] = {}
        self._group: dict[str, set[str]] = {}

    def partners_of(self, placement: Placement) -> set[str]:
        return {o for g in placement.gpus for o in self.held.get(g, ())}

    def problem_if_added(self, job: str, placement: Placement) -> str | None:
        """What adding ``job`` on ``placement`` would break (module docstring), or None."""
        group: set[str] = set()
        for o in self.partners_of(placement):
            group |= self._group[o]
        trial = {j: self.placements[j] for j in group}
        trial[job] = placement
        return packing_problem(trial, self.cluster, equal_only=self.equal_only)

    def add(self, job: str, placement: Placement) -> None:
        """Record ``job`` on ``placement`` (checked or not: a caller may keep what already runs)."""
        group = {job}
        for o in self.partners_of(placement):
            group |= self._group[o]
        for j in group:
            self._group[j] = group
        self.placements[job] = placement
        for g in placement.gpus:
            self.held.setdefault(g, []).append(job)
