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

Cheap enough to stay on: with ``collapse`` (the simulator), a job whose decision at a stage has the same
signature as in the round before (admitted or the quota reason; its rank, exact up to :data:`RANK_EXACT` and
by power-of-two band behind; the demand's shape; the GPUs) adds no record; the earlier record's
``last_round`` covers the round instead, and its facts stay those of its first round. The simulator takes
the records once, at the end (:meth:`Recorder.take` closes every open record); the service takes them every
round as changes (:meth:`Recorder.take_changes`: the records opened since, and the earlier ones that closed),
so it stores a record per change of decision, not per job and round.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlsched.core import ClusterView, Decision, JobView, Placement

Record = dict[str, Any]
STAGE_NAMES: tuple[str, ...] = ("admission", "ordering", "allocation", "placement", "coordination")


def take_explanations(scheduler: object) -> list[Record]:
    """The records a scheduler kept of why it decided since it was last asked (none from a scheduler that
    keeps none)."""
    take = getattr(scheduler, "take_explanations", None)
    return list(take()) if take is not None else []


def take_explanation_changes(scheduler: object, round_no: int) -> RecordChanges:
    """What a scheduler recorded since it was last asked, as changes (:meth:`Recorder.take_changes`), its
    last round numbered ``round_no``. A scheduler that hands over only whole records
    (``take_explanations``) gets each record standing for ``round_no`` alone."""
    changes = getattr(scheduler, "take_explanation_changes", None)
    if changes is not None:
        got: RecordChanges = changes(round_no)
        return got
    records = [{**r, "round": round_no, "last_round": round_no} for r in take_explanations(scheduler)]
    ranks = {str(r["job"]): rank for r in records
             if r.get("stage") == "ordering" and isinstance(rank := (r.get("facts") or {}).get("rank"), int)}
    return RecordChanges(records, [], ranks)


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


def _binding(view: ClusterView, job: JobView, demands: dict[str, Any]) -> str:
    """The fact that bound a job left without GPUs: how many of the GPUs it can use the round's
    allocations took, against what it asks."""
    cluster = view.cluster
    usable = [t for t in cluster.type_names if job.spec.allows_gpu_type(t)]
    cap = sum(cluster.gpus_per_type.get(t, 0) for t in usable)
    taken = sum(d.num_gpus for d in demands.values() if d.job.job_id != job.job_id
                and (d.gpu_type is None or d.gpu_type in usable))
    need = job.spec.min_gpus or job.spec.num_gpus
    return (f"the jobs allocated this round take {min(taken, cap)} of the {cap} GPUs it can use "
            f"({', '.join(usable)}), leaving {max(0, cap - taken)} where it needs {need}")


#: Ranks up to this one are recorded exactly; deeper in the queue a record starts when a job's rank enters a
#: new power-of-two band (17-31, 32-63, ...), so a long queue costs few records.
RANK_EXACT = 16

Builder = Callable[[str], tuple[str, str, dict[str, Any]]]


@dataclass
class RecordChanges:
    """What a :class:`Recorder` recorded since it was last asked, in the caller's round numbers.

    ``opened``: new records; those still open (their decision holds) have no ``last_round``, those already
    closed have theirs. ``closed``: (job, stage, last_round) of records handed over open earlier that have
    since closed. ``ranks``: each ordered job's exact rank in the last round (records keep a rank deep in
    the queue by band only)."""

    opened: list[Record] = field(default_factory=list)
    closed: list[tuple[str, str, int]] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)


class Recorder:
    """Builds the records of each round a scheduler plans; :meth:`take` hands them over.

    Each stage's decisions of a round are first reduced to a signature per job (a dict built in one pass);
    with ``collapse``, when that dict equals the round before's, nothing else happens (the common case,
    compared at C speed), and otherwise only the jobs whose signature changed get a record built. A job's
    open record gets its ``last_round`` when it closes: its decision changes, the job leaves the stage, or
    :meth:`take` is called (which closes every record, so later rounds start new ones).
    """

    def __init__(self, *, collapse: bool = True) -> None:
        self.collapse = collapse
        self.round = -1
        self._records: list[Record] = []
        #: stage -> job -> its signature in the last round the stage recorded.
        self._prev: dict[str, dict[str, object]] = {s: {} for s in STAGE_NAMES}
        #: stage -> job -> its open record (collapse only).
        self._open: dict[str, dict[str, Record]] = {s: {} for s in STAGE_NAMES}
        #: Records that closed since the last take (collapse only).
        self._closing: list[Record] = []
        #: Each ordered job's exact rank in the last round.
        self._ranks: dict[str, int] = {}

    def take(self) -> list[Record]:
        if self.collapse:
            for stage in STAGE_NAMES:
                for rec in self._open[stage].values():
                    rec["last_round"] = self.round
                self._open[stage] = {}
                self._prev[stage] = {}
        self._closing = []
        out, self._records = self._records, []
        return out

    def take_changes(self, round_no: int) -> RecordChanges:
        """The records opened and closed since the last call, open records staying open (``collapse``
        only); ``round_no`` is the caller's number for the last round recorded, to which every round
        number handed over is translated."""
        if not self.collapse:
            raise ValueError("take_changes needs a recorder that collapses unchanged decisions")
        shift = round_no - self.round
        out, self._records = self._records, []
        closing, self._closing = self._closing, []
        still_open = {id(r) for stage in STAGE_NAMES for r in self._open[stage].values()}
        opened: list[Record] = []
        for rec in out:
            copy = {**rec, "round": rec["round"] + shift}
            if id(rec) in still_open:
                del copy["last_round"]
            else:
                copy["last_round"] = rec["last_round"] + shift
            opened.append(copy)
        new = {id(r) for r in out}
        closed = [(r["job"], r["stage"], r["last_round"] + shift) for r in closing if id(r) not in new]
        return RecordChanges(opened, closed, dict(self._ranks))

    def _step(self, stage: str, cur: dict[str, object], build: Builder, view: ClusterView,
              stage_obj: object) -> None:
        """Record the jobs of ``cur`` (job -> signature) whose decision at ``stage`` changed."""
        prev = self._prev[stage]
        self._prev[stage] = cur
        if not self.collapse:
            for jid in cur:
                self._add(jid, stage, build, view, stage_obj)
            return
        if prev == cur:
            return
        opened = self._open[stage]
        r = self.round
        for jid in prev.keys() - cur.keys():  # left the stage: its record ends with the round before
            rec = opened.pop(jid, None)
            if rec is not None:
                rec["last_round"] = max(rec["round"], r - 1)
                self._closing.append(rec)
        missing = object()
        for jid, sig in cur.items():
            if prev.get(jid, missing) == sig:
                continue
            rec = opened.get(jid)
            if rec is not None:
                rec["last_round"] = max(rec["round"], r - 1)
                self._closing.append(rec)
            opened[jid] = self._add(jid, stage, build, view, stage_obj)

    def _add(self, job: str, stage: str, build: Builder, view: ClusterView, stage_obj: object) -> Record:
        decided, summary, facts = build(job)
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
        self._records.append(rec)
        return rec

    def record(self, stages: Any, full: ClusterView, view: ClusterView, admitted: list[JobView],
               ordered: list[JobView], plan: Any, placed: Decision, final: Decision, *, new_round: bool = True) -> None:
        """Record one plan of a round (``new_round`` False: a plan inside the round, as Hops makes); ``full``
        is the view admission saw, ``view`` the one the later stages saw."""
        if new_round:
            self.round += 1
        self._admission(stages.admission, full, admitted)
        self._ordering(stages.ordering, view, ordered)
        demands = {d.job.job_id: d for d in plan.demands}
        profiled = {p.job.job_id for p in plan.profiles}
        self._allocation(stages.allocation, view, ordered, demands, profiled)
        self._placement(stages.placement, view, demands, placed)
        if getattr(stages.coordination, "allows_packing", False):
            self._coordination(stages.coordination, view, final)

    def _admission(self, stage: object, view: ClusterView, admitted: list[JobView]) -> None:
        reasons: dict[str, str] | None = getattr(stage, "reasons", None)
        name = str(getattr(stage, "name", "?"))
        if reasons:
            cur: dict[str, object] = {j.job_id: reasons.get(j.job_id) for j in view.jobs}
        else:
            in_ids = {j.job_id for j in admitted}
            cur = {j.job_id: j.job_id in in_ids for j in view.jobs}

        def build(jid: str) -> tuple[str, str, dict[str, Any]]:
            reason = reasons.get(jid) if reasons else None
            held = reason.startswith("held") if reason else cur[jid] is False
            decided = "held" if held else "admitted"
            summary = reason or (f"{decided} by '{name}'" if name != "all" else "admitted: no admission control")
            return decided, summary, {"admission": name, "reason": reason}

        self._step("admission", cur, build, view, stage)

    def _ordering(self, stage: object, view: ClusterView, ordered: list[JobView]) -> None:
        name = str(getattr(stage, "name", "?"))
        n = len(ordered)
        ranks = {j.job_id: i for i, j in enumerate(ordered, 1)}
        self._ranks = ranks
        # the signature is the rank near the head of the queue, and the power-of-two band of ranks deeper in
        # it: a long queue shifts every rank behind a job that leaves, which would otherwise cost a record
        # per waiting job per round
        cur: dict[str, object] = {jid: r if r <= RANK_EXACT else -r.bit_length() for jid, r in ranks.items()}
        jobs = {j.job_id: j for j in ordered} if ordered else {}

        def build(jid: str) -> tuple[str, str, dict[str, Any]]:
            rank = ranks[jid]
            label, value = _order_key(stage, view, jobs[jid])
            return (f"rank {rank}", f"{ordinal(rank)} of {n} in the {name} queue ({label} {_fmt(value)})",
                    {"rank": rank, "of": n, "ordering": name, "key": label,
                     "value": value if math.isfinite(value) else None})

        self._step("ordering", cur, build, view, stage)

    def _allocation(self, stage: object, view: ClusterView, ordered: list[JobView], demands: dict[str, Any],
                    profiled: set[str]) -> None:
        name = str(getattr(stage, "name", "?"))
        cur: dict[str, object] = {}
        for j in ordered:
            d = demands.get(j.job_id)
            cur[j.job_id] = (d.num_gpus, d.gpu_type, d.num_nodes) if d is not None else \
                ("profile" if j.job_id in profiled else None)
        jobs = {j.job_id: j for j in ordered}

        def build(jid: str) -> tuple[str, str, dict[str, Any]]:
            decided, summary, facts = _allocated(name, jobs[jid], demands.get(jid), cur[jid] == "profile")
            if decided == "none" and not (_stage_facts(stage, jid) or {}).get("why"):
                summary += ": " + _binding(view, jobs[jid], demands)  # the stage says no more: the GPUs do
            return decided, summary, facts

        self._step("allocation", cur, build, view, stage)

    def _placement(self, stage: object, view: ClusterView, demands: dict[str, Any], placed: Decision) -> None:
        name = str(getattr(stage, "name", "?"))
        allocs = placed.allocations
        cur: dict[str, object] = {}
        for jid, d in demands.items():
            a = allocs.get(jid)
            cur[jid] = (a.placement.gpus, a.placement == d.job.placement) if a is not None and a.placement else None

        def build(jid: str) -> tuple[str, str, dict[str, Any]]:
            d, sig = demands[jid], cur[jid]
            if sig is None:
                free = int(view.cluster.num_gpus - view.busy_gpus().sum())
                return ("not placed", f"'{name}' could not place {d.num_gpus} x {d.gpu_type or 'any'}",
                        {"placement": name, "free_gpus": free})
            alloc = allocs[jid]
            shape, nodes = describe_gpus(view, alloc.placement)
            where = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {', '.join(nodes)}"
            verb = "kept" if alloc.placement == d.job.placement else "placed"
            return (verb, f"{verb} {shape} on {where}",
                    {"placement": name, "nodes": nodes, "gpus": list(alloc.placement.gpus), "shape": shape,
                     "batch_size": alloc.batch_size})

        self._step("placement", cur, build, view, stage)

    def _coordination(self, stage: object, view: ClusterView, final: Decision) -> None:
        name = str(getattr(stage, "name", "?"))
        holders: dict[int, list[str]] = {}
        for jid, a in final.allocations.items():
            for g in a.placement.gpus:
                holders.setdefault(g, []).append(jid)
        partners = {jid: sorted({o for g in a.placement.gpus for o in holders[g] if o != jid})
                    for jid, a in final.allocations.items()}
        cur: dict[str, object] = {jid: (tuple(partners[jid]), a.gpu_share, a.mps_pct, a.batch_split)
                                  for jid, a in final.allocations.items()}

        def build(jid: str) -> tuple[str, str, dict[str, Any]]:
            a, with_ = final.allocations[jid], partners[jid]
            facts = {"coordination": name, "packed_with": with_, "gpu_share": a.gpu_share,
                     "mps_pct": list(a.mps_pct), "batch_split": list(a.batch_split)}
            if with_:
                limits = f", share limits {list(a.mps_pct)}%" if a.mps_pct else ""
                return "packed", f"shares its GPUs with {', '.join(with_)}{limits}", facts
            return "alone", "has its GPUs to itself", facts

        self._step("coordination", cur, build, view, stage)
