"""Why is my job waiting? Each job's reason, in Slurm's REASON terms, from the round's explanations.

``squeue`` answers the question every user of a shared cluster asks first with one word (``Resources``,
``Priority``, ...), and Kueue with a workload's conditions; the service does the same for ``dlsched jobs``,
``dlsched show`` and the dashboard's queue, derived from what the round's stages recorded (never a second
guess at what the policy meant):

- ``Resources``: it is next in its queue, and the GPUs it needs are not free;
- ``Priority``: jobs ahead of it in the policy's order wait too, and go first;
- ``Quota``: the quota admission stage holds it (its team's or its own usage is at the limit);
- ``Profiling``: its profile runs are on, or it waits for GPUs to profile on;
- ``Held: <why>``: the cluster as it stands can never hold it (its nodes left); it blocks no one;
- ``Starting``: placed, its workers have not reported their first step yet;
- ``Stopping``: its cancel was asked for, its workers are being stopped.

A running job that stepped has no reason (None). Each reason comes with a detail: what the deciding stage
said, and the job's next step.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any

from dlsched.core import ClusterView, Decision, JobView

Reason = tuple[str | None, str | None]


def _by_job(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for rec in records:
        out.setdefault(str(rec.get("job")), {})[str(rec.get("stage"))] = rec
    return out


def _rank(recs: dict[str, dict[str, Any]]) -> int | None:
    rank = (recs.get("ordering") or {}).get("facts", {}).get("rank")
    return rank if isinstance(rank, int) else None


def waiting_reasons(view: ClusterView, decision: Decision,
                    records: Iterable[dict[str, Any]] | Mapping[str, dict[str, dict[str, Any]]], *,
                    starting: set[str], ranks: Mapping[str, int] | None = None) -> dict[str, Reason]:
    """Every job of ``view``: its reason and detail after ``decision`` (see the module docstring).
    ``records``: the records that stand for the round, or those already grouped by job and stage;
    ``starting``: jobs that will run this round and have not reported a step since their launch;
    ``ranks``: each job's exact rank in the round's order (by default the ordering record's, which a record
    that stands for several rounds keeps from its first)."""
    recs = records if isinstance(records, Mapping) else _by_job(records)
    used = {g for a in decision.allocations.values() for g in a.placement.gpus}
    free = view.cluster.num_gpus - len(used)
    waiting = [jv for jv in view.jobs if jv.job_id not in decision.allocations
               and jv.job_id not in decision.profiles and not jv.profiling]
    queue = _Queue(waiting, recs, ranks)
    out: dict[str, Reason] = {}
    for jv in view.jobs:
        jid = jv.job_id
        mine = recs.get(jid, {})
        if jid in decision.allocations:
            out[jid] = (("Starting", "placed; its workers start (imports, model, data) until their first step; "
                         "next: it is not moved before its first step and checkpoint (or min_run_s)")
                        if jid in starting else (None, None))
        elif jid in decision.profiles or jv.profiling:
            out[jid] = ("Profiling", "its profile runs are on; next: it enters the waiting queue when they end")
        else:
            out[jid] = _waiting(jv, mine, queue, free)
    return out


class _Queue:
    """The waiting jobs that the ordering stage ranked, sorted by rank once, so that each job's "how many
    wait ahead of it, and which" is a bisection (a round with 100,000 waiting jobs must not compare every
    pair)."""

    def __init__(self, waiting: list[JobView], recs: Mapping[str, dict[str, dict[str, Any]]],
                 ranks: Mapping[str, int] | None) -> None:
        self.given = ranks
        ranked = sorted((r, jv.job_id) for jv in waiting if (r := self.rank(jv.job_id, recs.get(jv.job_id, {})))
                        is not None)
        self.ranks = [r for r, _j in ranked]
        self.ids = [j for _r, j in ranked]

    def rank(self, job_id: str, mine: dict[str, dict[str, Any]]) -> int | None:
        return self.given.get(job_id) if self.given is not None else _rank(mine)

    def ahead(self, rank: int | None) -> tuple[int, list[str]]:
        """How many ranked waiting jobs have a rank below ``rank``, and the first three
        of them in rank order."""
        if rank is None:
            return 0, []
        n = bisect_left(self.ranks, rank)  # the job itself, and ties, are not below its rank
        return n, self.ids[:min(3, n)]


def _waiting(jv: JobView, mine: dict[str, dict[str, Any]], queue: _Queue, free: int) -> Reason:
    admission = mine.get("admission")
    if admission is not None and admission.get("decided") == "held":
        return ("Quota", f"{admission.get('summary')}; next: it starts once that usage falls below the quota")
    said = (mine.get("allocation") or mine.get("placement") or {}).get("summary")
    if said is None and not jv.profiled_types and "profile" in str((mine.get("allocation") or {}).get("decided")):
        return ("Profiling", "it waits for GPUs to profile on; next: its profile runs")
    rank = queue.rank(jv.job_id, mine)
    n_ahead, first = queue.ahead(rank)
    detail = f"{said}; " if said else ""
    if n_ahead:
        ordering = (mine.get("ordering") or {}).get("facts", {}).get("ordering", "policy's")
        names = ", ".join(first) + (" ..." if n_ahead > 3 else "")
        return ("Priority", f"{detail}next: {n_ahead} waiting job(s) ahead of it in the {ordering} queue "
                            f"go first ({names})")
    need = jv.spec.min_gpus if jv.spec.min_gpus else jv.spec.num_gpus
    types = "/".join(jv.spec.gpu_types) if jv.spec.gpu_types else "any type"
    return ("Resources", f"{detail}next: it starts when {need} GPU(s) of {types} it can use are free "
                         f"({free} of the cluster's GPUs are free after this round)")
