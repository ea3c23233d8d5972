"""Why a scheduler decided what it did: one record per job, stage and round, built beside the decision.

A :class:`StagedScheduler` hands every round's intermediate results (the admitted jobs, the order, the plan,
the decision before and after coordination) to a :class:`Recorder`, which turns them into plain records
(the contract in docs/service.md, "Explanations")::

    {"round", "time_s", "job", "stage", "decided", "summary", "facts"}

Stages add what only they know through one optional method, ``facts_for(job_id) -> dict | None``: the
configurations they weighed, the terms of their objective, the nodes they scored. Its ``"why"`` entry (a
phrase naming the deciding fact) ends the record's summary; the rest joins the record's facts. Stages keep
the references they already hold (their last options, their last scores) and build the dict only when
asked, so a stage pays nothing for jobs nobody asks about.

Cheap enough to stay on: with ``collapse`` (the simulator), a job whose decision at a stage is the same as
in the round before (same signature: admitted, rank, shape, GPUs) adds no record; the earlier record's
``last_round`` grows instead, and its facts stay those of its first round. The service records every round
in full (``collapse=False``), since it commits each round's records as they come.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

from dlsched.core import ClusterView, Decision, JobView, Placement

Record = dict[str, Any]
STAGE_NAMES: tuple[str, ...] = ("admission", "ordering", "allocation", "placement", "coordination")


def take_explanations(scheduler: object) -> list[Record]:
    """The records a scheduler kept of why it decided since it was last asked (none from a scheduler that
    keeps none)."""
    take = getattr(scheduler, "take_explanations", None)
    return list(take()) if take is not None else []


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``22nd``."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _expected_total_s(j: JobView) -> float:
    if j.estimated_duration_s is not None:
        return j.estimated_duration_s
    if j.progress_fraction > 0 and j.attained_service_s > 0:
        return j.attained_service_s / j.progress_fraction
    return math.inf


#: Ordering name -> (what its key is called, the key of a job): the key an ordering sorts by, for the
#: orderings whose key is a plain function of the job; others expose ``priority(view, job)`` or
#: ``facts_for`` themselves.
ORDER_KEYS: dict[str, tuple[str, Callable[[JobView], float]]] = {
    "fifo": ("submit time s", lambda j: j.spec.submit_time_s),
    "edf": ("submit time s", lambda j: j.spec.submit_time_s),
    "sjf": ("expected run time s", _expected_total_s),
    "srtf": ("expected remaining s", lambda j: _expected_total_s(j) * max(0.0, 1.0 - j.progress_fraction)),
    "las": ("attained GPU-s", lambda j: j.attained_gpu_s),
}


def _order_key(ordering: object, view: ClusterView, job: JobView) -> tuple[str, float]:
    name = str(getattr(ordering, "name", "?"))
    priority = getattr(ordering, "priority", None)
    if priority is not None:
        return name.replace("-", " "), float(priority(view, job))
    queue_of = getattr(ordering, "queue_of", None)
    if queue_of is not None:
        return "queue", float(queue_of(job))
    label, key = ORDER_KEYS.get(name, ("submit time s", ORDER_KEYS["fifo"][1]))
    return label, float(key(job))


def _stage_facts(stage: object, job_id: str) -> dict[str, Any] | None:
    get = getattr(stage, "facts_for", None)
    return None if get is None else get(job_id)


def describe_gpus(view: ClusterView, placement: Placement) -> tuple[str, list[str]]:
    """``"2 x a100"`` and the names of the nodes a placement touches."""
    cluster = view.cluster
    cfg = placement.configuration(cluster)
    nodes = [cluster.nodes[n].name or f"n{n}" for n in sorted({int(cluster.gpu_node[g]) for g in placement.gpus})]
    return f"{cfg.num_gpus} x {cfg.gpu_type}", nodes


def _allocated(name: str, job: JobView, d: Any, profiling: bool) -> tuple[str, str, dict[str, Any]]:
    """The allocation record's decision, summary and facts for a job with demand ``d`` (None: none)."""
    if d is not None:
        shape = f"{d.num_gpus} x {d.gpu_type or 'any'}"
        facts = {"allocation": name, "num_gpus": d.num_gpus, "gpu_type": d.gpu_type, "num_nodes": d.num_nodes,
                 "batch_size": d.batch_size, "pinned": d.pinned,
                 "fallbacks": [f"{s.num_gpus} x {s.gpu_type or 'any'}" for s in d.fallbacks]}
        return shape, f"'{name}' allocated {shape}", facts
    if profiling:
        return "profile", f"'{name}' profiles it on each GPU type first", {"allocation": name}
    return ("none", f"'{name}' allocated no GPUs (asks {job.spec.num_gpus})",
            {"allocation": name, "requested": job.spec.num_gpus})


class Recorder:
    """Builds the records of each round a scheduler plans; :meth:`take` hands them over and forgets them."""

    def __init__(self, *, collapse: bool = True) -> None:
        self.collapse = collapse
        self.round = -1
        self._records: list[Record] = []
        #: (job, stage) -> (signature, the job's last record at that stage), for collapsing.
        self._last: dict[tuple[str, str], tuple[object, Record]] = {}

    def take(self) -> list[Record]:
        out, self._records = self._records, []
        return out

    def _add(self, job: str, stage: str, sig: object, build: Callable[[], tuple[str, str, dict[str, Any]]],
             view: ClusterView, stage_obj: object) -> None:
        key = (job, stage)
        if self.collapse:
            last = self._last.get(key)
            if last is not None and last[0] == sig and last[1]["last_round"] >= self.round - 1:
                last[1]["last_round"] = self.round
                return
        decided, summary, facts = build()
        extra = _stage_facts(stage_obj, job)
        if extra:
            extra = dict(extra)
            why = extra.pop("why", None)
            if "decided" in extra:
                decided = str(extra.pop("decided"))
            facts.update(extra)
            if why:
                summary = f"{summary}: {why}"
        rec: Record = {"round": self.round, "time_s": view.time_s, "job": job, "stage": stage,
                       "decided": decided, "summary": summary, "facts": facts}
        if self.collapse:
            rec["last_round"] = self.round
            self._last[key] = (sig, rec)
        self._records.append(rec)

    def record(self, stages: Any, full: ClusterView, view: ClusterView, admitted: list[JobView],
               ordered: list[JobView], plan: Any, placed: Decision, final: Decision, *, new_round: bool = True) -> None:
        """Record one plan of a round (``new_round`` False: a plan inside the round, as Hops makes); ``full``
        is the view admission saw, ``view`` the one the later stages saw."""
        if new_round:
            self.round += 1
        in_ids = {j.job_id for j in admitted}
        self._admission(stages.admission, full, in_ids)
        self._ordering(stages.ordering, view, ordered)
        demands = {d.job.job_id: d for d in plan.demands}
        profiled = {p.job.job_id for p in plan.profiles}
        self._allocation(stages.allocation, view, ordered, demands, profiled)
        self._placement(stages.placement, view, demands, placed)
        if getattr(stages.coordination, "allows_packing", False):
            self._coordination(stages.coordination, view, placed, final)

    def _admission(self, stage: object, view: ClusterView, in_ids: set[str]) -> None:
        reasons: dict[str, str] | None = getattr(stage, "reasons", None)
        name = str(getattr(stage, "name", "?"))
        for j in view.jobs:
            jid = j.job_id
            admitted = jid in in_ids
            reason = reasons.get(jid) if reasons else None
            sig = (admitted, reason)

            def build(admitted: bool = admitted, reason: str | None = reason) -> tuple[str, str, dict[str, Any]]:
                decided = "admitted" if admitted else "held"
                summary = reason or (f"{decided} by '{name}'" if name != "all" else "admitted: no admission control")
                return decided, summary, {"admission": name, "reason": reason}

            self._add(jid, "admission", sig, build, view, stage)

    def _ordering(self, stage: object, view: ClusterView, ordered: list[JobView]) -> None:
        name = str(getattr(stage, "name", "?"))
        n = len(ordered)
        for i, j in enumerate(ordered):
            rank = i + 1

            def build(j: JobView = j, rank: int = rank) -> tuple[str, str, dict[str, Any]]:
                label, value = _order_key(stage, view, j)
                return (f"rank {rank}", f"{ordinal(rank)} of {n} in the {name} queue ({label} {_fmt(value)})",
                        {"rank": rank, "of": n, "ordering": name, "key": label,
                         "value": value if math.isfinite(value) else None})

            self._add(j.job_id, "ordering", (rank, n), build, view, stage)

    def _allocation(self, stage: object, view: ClusterView, ordered: list[JobView], demands: dict[str, Any],
                    profiled: set[str]) -> None:
        name = str(getattr(stage, "name", "?"))
        for j in ordered:
            d = demands.get(j.job_id)
            if d is not None:
                sig: object = (d.num_gpus, d.gpu_type, d.num_nodes)
            else:
                sig = "profile" if j.job_id in profiled else None
            self._add(j.job_id, "allocation", sig, partial(_allocated, name, j, d, sig == "profile"), view, stage)

    def _placement(self, stage: object, view: ClusterView, demands: dict[str, Any], placed: Decision) -> None:
        name = str(getattr(stage, "name", "?"))
        for jid, d in demands.items():
            alloc = placed.allocations.get(jid)
            if alloc is None or not alloc.placement:
                def build(d: Any = d) -> tuple[str, str, dict[str, Any]]:
                    free = int(view.cluster.num_gpus - view.busy_gpus().sum())
                    return ("not placed", f"'{name}' could not place {d.num_gpus} x {d.gpu_type or 'any'}",
                            {"placement": name, "free_gpus": free})
                self._add(jid, "placement", None, build, view, stage)
                continue
            kept = alloc.placement == d.job.placement
            sig = (alloc.placement.gpus, kept)

            def build2(alloc: Any = alloc, kept: bool = kept) -> tuple[str, str, dict[str, Any]]:
                shape, nodes = describe_gpus(view, alloc.placement)
                where = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {', '.join(nodes)}"
                verb = "kept" if kept else "placed"
                return (verb, f"{verb} {shape} on {where}",
                        {"placement": name, "nodes": nodes, "gpus": list(alloc.placement.gpus), "shape": shape,
                         "batch_size": alloc.batch_size})
            self._add(jid, "placement", sig, build2, view, stage)

    def _coordination(self, stage: object, view: ClusterView, placed: Decision, final: Decision) -> None:
        name = str(getattr(stage, "name", "?"))
        holders: dict[int, list[str]] = {}
        for jid, a in final.allocations.items():
            for g in a.placement.gpus:
                holders.setdefault(g, []).append(jid)
        for jid, a in final.allocations.items():
            partners = sorted({o for g in a.placement.gpus for o in holders[g] if o != jid})
            sig = (tuple(partners), a.gpu_share, a.mps_pct, a.batch_split)

            def build(a: Any = a, partners: list[str] = partners) -> tuple[str, str, dict[str, Any]]:
                facts = {"coordination": name, "packed_with": partners, "gpu_share": a.gpu_share,
                         "mps_pct": list(a.mps_pct), "batch_split": list(a.batch_split)}
                if partners:
                    limits = f", share limits {list(a.mps_pct)}%" if a.mps_pct else ""
                    return "packed", f"shares its GPUs with {', '.join(partners)}{limits}", facts
                return "alone", "has its GPUs to itself", facts
            self._add(jid, "coordination", sig, build, view, stage)
