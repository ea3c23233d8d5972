"""No move before a job has made progress: young incarnations keep their GPUs, whatever the policy decides.

A worker needs seconds to tens of seconds to import its framework, build its model and load its data before
its first step; a policy that moves it a round later (Sia, re-optimising every round, does) throws that away
and, before the first checkpoint, every step too. So the service pins a placed incarnation until it has
reported its first step and a checkpoint, or ``min_run_s`` has passed. Pinning rewrites the round's
decision before it is checked: a pinned job keeps its allocation, and a job the policy put on a pinned GPU
keeps its current GPUs where they are still free, else waits this round. Gangs stay whole (a job gets its
whole old placement or nothing), and the invariant checker then sees the final decision.
"""

from __future__ import annotations

from collections.abc import Iterable

from dlsched.core import Allocation, Decision, JobView


def pin(decision: Decision, jobs: Iterable[JobView], pinned: set[str], *, allows_packing: bool) -> list[str]:
    """Rewrite ``decision`` so every pinned job keeps its current placement (see the module docstring).
    Returns the jobs whose allocation this changed, pinned ones included, in a stable order."""
    views = {jv.job_id: jv for jv in jobs}
    changed: list[str] = []
    for job_id in sorted(pinned):
        jv = views.get(job_id)
        if jv is None or not jv.placement:
            continue
        now = decision.allocations.get(job_id)
        if now is None or now.placement != jv.placement:
            batch = now.batch_size if now is not None else jv.batch_size
            decision.allocations[job_id] = Allocation(jv.placement, batch)
            changed.append(job_id)
    if not changed or allows_packing:  # a packing policy's overlaps are the checker's to judge
        return changed
    fixed = {j for j in pinned if j in decision.allocations}
    # each demotion makes one job more conservative (new placement -> its current one -> none): it ends
    while (clash := _clashing(decision, views, fixed)) is not None:
        jv = views.get(clash)
        alloc = decision.allocations[clash]
        if jv is not None and jv.placement and alloc.placement != jv.placement:
            decision.allocations[clash] = Allocation(jv.placement, jv.batch_size)
        else:
            del decision.allocations[clash]
        if clash not in changed:
            changed.append(clash)
    taken = {g for a in decision.allocations.values() for g in a.placement.gpus}
    for job_id in [j for j, p in decision.profiles.items() if taken.intersection(p.gpus)]:
        del decision.profiles[job_id]
        changed.append(job_id)
    return changed


def _clashing(decision: Decision, views: dict[str, JobView], fixed: set[str]) -> str | None:
    """A job to demote: one not pinned that shares a GPU with another job, a job at a new placement before
    one sent back to its current GPUs; None when no GPU is given twice."""
    holders: dict[int, list[str]] = {}
    for job_id, alloc in decision.allocations.items():
        for g in alloc.placement.gpus:
            holders.setdefault(g, []).append(job_id)
    clashing = {j for hs in holders.values() if len(hs) > 1 for j in hs if j not in fixed}
    if not clashing:
        return None

    def at_current(job_id: str) -> bool:
        jv = views.get(job_id)
        return jv is not None and decision.allocations[job_id].placement == jv.placement

    return min(clashing, key=lambda j: (at_current(j), j))
