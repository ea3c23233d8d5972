"""The ``quota`` admission stage: per-user and per-team GPU quotas with borrowing (Kueue's model).

The quotas themselves are plain data (:mod:`dlsched.core.quota`, which also describes the model); the
simulator and the service both hand them to the scheduler in :attr:`ClusterView.quotas`, so the same stage
enforces them in both.

How much an entity (a user or a team) may still take is its *room*::

    room = max(nominal - used, min(nominal + borrowing_limit - used, pool_nominal - pool_used))

The first term is the guarantee: within its nominal quota an entity is always admitted, even when others
borrowed its unused GPUs (as Kueue reclaims within a cohort). The second is borrowing: beyond its nominal
quota it may go as far as its borrowing limit, while the whole pool (the cohort of every team for a team,
the team's declared users for a user) stays within the pool's nominal GPUs, which is the same as borrowing
only GPUs some member left unused. A job is admitted when its GPUs fit in the room of its user and of its
team. ``used`` counts admitted jobs only, so borrowed GPUs come back to a team whose jobs finish or wait.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar

from dlsched.core import ClusterView, JobView, QuotaEntry, Quotas
from dlsched.policies.registry import register_stage
from dlsched.policies.stages import AllocationTraits

_INF = float("inf")


@dataclass(frozen=True, slots=True)
class _Limit:
    """One entity's side of the check: its room and the words that say why it binds."""

    room: float
    words: str


class _Ledger:
    """GPUs counted against each user and team this round (admitted jobs only)."""

    def __init__(self, quotas: Quotas) -> None:
        self.quotas = quotas
        self.by_user: dict[str, int] = defaultdict(int)
        self.by_team: dict[str, int] = defaultdict(int)

    def add(self, user: str, gpus: int) -> None:
        self.by_user[user] += gpus
        team = self.quotas.team(user)
        if team is not None:
            self.by_team[team] += gpus

    def user_limit(self, user: str) -> _Limit:
        entry = self.quotas.user_entry(user)
        if entry is None:
            return _Limit(_INF, f"user {user} has no quota")
        team = self.quotas.team(user)
        # the users of its team that have a quota of their own lend to each other; a member without one
        # (the service knows every user's team, quota or not) neither lends nor borrows
        members = [user] if team is None else [m for m in self.quotas.team_members(team)
                                              if self.quotas.user_entry(m) is not None]
        pool_nominal = sum(e.gpus for m in members if (e := self.quotas.user_entry(m)) is not None)
        pool_used = sum(self.by_user[m] for m in members)
        room, lend = _room(entry, self.by_user[user], pool_nominal, pool_used)
        words = f"user {user} at {self.by_user[user]}/{entry.gpus} GPUs"
        if team is None:
            return _Limit(room, words + ", no team to borrow from")
        return _Limit(room, words + _borrow_words(entry, self.by_user[user], lend, f"team {team}"))

    def team_limit(self, user: str) -> _Limit:
        team = self.quotas.team(user)
        if team is None:
            return _Limit(_INF, "no team")
        entry = self.quotas.teams[team]
        used = self.by_team[team]
        room, lend = _room(entry, used, self.quotas.cohort_gpus(), sum(self.by_team.values()))
        return _Limit(room, f"team {team} at {used}/{entry.gpus} GPUs" + _borrow_words(entry, used, lend, "cohort"))

    def binding(self, user: str) -> _Limit:
        """The tighter of the user's and the team's limits."""
        return min(self.user_limit(user), self.team_limit(user), key=lambda lim: lim.room)


def _room(entry: QuotaEntry, used: int, pool_nominal: int, pool_used: int) -> tuple[float, int]:
    """GPUs the entity may still take, and what its pool has unused to lend."""
    lend = max(0, pool_nominal - pool_used)
    return max(entry.gpus - used, min(entry.ceiling - used, pool_nominal - pool_used)), lend


def _borrow_words(entry: QuotaEntry, used: int, lend: int, pool: str) -> str:
    if entry.borrowing_limit is not None and used >= entry.ceiling:
        return f", borrowing limit {entry.borrowing_limit} reached"
    return f", {pool} has {lend} to lend"


def _count(job: JobView, rigid: bool) -> int:
    """GPUs a job takes from its quotas: what it holds if running, else the least it can run on (under a
    rigid allocation exactly its request, since that is what it will get)."""
    if job.is_running:
        return job.placement.num_gpus
    return job.spec.num_gpus if rigid else job.spec.lower_gpus


@dataclass
class QuotaAdmission:
    """Admit jobs while their users' and teams' GPU quotas allow (``view.quotas``; None admits everyone).

    Running jobs stay admitted and count first, at the GPUs they hold. Waiting jobs follow in submit order,
    each at its lower bound (``spec.lower_gpus``; under a rigid allocation at its request, which is what it
    will get); one that does not fit is held this round and asked again
    the next, and a later job that fits is admitted past it (Kueue's BestEffortFIFO), so a large request
    cannot block a user's small ones.

    An admitted elastic job is handed on with ``spec.max_gpus`` lowered to what its quotas leave (never
    below its lower bound), because admission only counted its lower bound: allocation stages grow elastic
    jobs up to ``max_gpus`` by themselves, and without the cap an admitted job could grow its team past its
    quota. The room is reserved job by job in the same order, so caps together never exceed a quota.

    ``reasons`` holds, per job id, why the last round admitted, capped or held it (for explanations).
    """

    name: str = "quota"
    #: Declares that this stage reads ``view.quotas`` (a run refuses a quota file no stage would enforce).
    uses_quotas: ClassVar[bool] = True
    reasons: dict[str, str] = field(default_factory=dict, init=False)
    #: The allocation after this stage gives every job exactly its request (``AllocationTraits.rigid``):
    #: jobs then count at their request and are never capped (set by the registry).
    _rigid: bool = field(default=False, init=False, repr=False)

    def follow_allocation(self, traits: AllocationTraits) -> None:
        """Count GPUs the way the composed allocation hands them out (the registry calls this)."""
        self._rigid = traits.rigid

    def admit(self, view: ClusterView) -> list[JobView]:
        quotas = view.quotas
        if quotas is None:
            self.reasons = {j.job_id: "admitted: no quotas" for j in view.jobs}
            return list(view.jobs)
        self.reasons = {}
        ledger = _Ledger(quotas)
        running = [j for j in view.jobs if j.is_running]
        waiting = sorted((j for j in view.jobs if not j.is_running),
                         key=lambda j: (j.spec.submit_time_s, j.job_id))
        admitted: list[JobView] = []
        for job in running:
            ledger.add(job.spec.user, _count(job, self._rigid))
            admitted.append(job)
            self.reasons[job.job_id] = f"admitted: running on {_count(job, self._rigid)} GPUs"
        for job in waiting:
            need = _count(job, self._rigid)
            limit = ledger.binding(job.spec.user)
            if need > limit.room:
                self.reasons[job.job_id] = f"held: {limit.words} (needs {need})"
                continue
            ledger.add(job.spec.user, need)
            admitted.append(job)
            self.reasons[job.job_id] = f"admitted: needs {need} GPUs, within quota"
        return [self._capped(job, ledger) for job in admitted]

    def _capped(self, job: JobView, ledger: _Ledger) -> JobView:
        """The job with ``max_gpus`` cut to what its quotas leave, reserving that room."""
        spec = job.spec
        held = _count(job, self._rigid)
        if self._rigid or spec.upper_gpus <= held:
            return job
        limit = ledger.binding(spec.user)
        extra = int(min(max(0.0, limit.room), spec.upper_gpus - held))
        ledger.add(spec.user, extra)
        cap = max(spec.lower_gpus, held + extra)
        if cap >= spec.upper_gpus:
            return job
        counts = tuple(k for k in spec.gpu_counts if k <= cap)
        start = min(spec.num_gpus, cap)
        if counts:  # the starting request stays one of the counts the job accepts
            start = max((k for k in counts if k <= start), default=counts[0])
        capped = dataclasses.replace(spec, max_gpus=cap, num_gpus=start, gpu_counts=counts)
        self.reasons[job.job_id] += f"; capped at {cap} GPUs ({limit.words})"
        return dataclasses.replace(job, spec=capped)


register_stage("admission", "quota", QuotaAdmission,
               "per-user and per-team GPU quotas with borrowing (--quotas FILE; Kueue's cohorts)")
