"""The Hops paper's Gavel baseline (SoCC'24, section 4): Gavel as the Hops authors ran it beside Hops.

The paper runs Gavel under Hops's latency-ratio queue ("we use the same latency ratio priority as Hops for
the queuing priorities of both the Sia and Gavel"), each job rigid at its median requirement (the trace's
request), on GPU types as its only heterogeneity ("Gavel ... can only detect GPU type"): a job's gang lies on
servers of one GPU type. What distinguishes this variant from ``gavel --ordering latency-ratio`` is the queue
discipline, ``queue``:

* ``strict`` (the default): leases are handed out in the queue's order, each job on the type its LP time
  fractions favour among those whose free GPUs still hold its whole gang; the first job that fits on no type
  ends the hand-out, so no job behind it starts (or keeps running) before it: head-of-line blocking, the
  idle GPUs it leaves are the fragments the paper counts against Gavel (Table 4: 18 per round).
* ``backfill``: a job that fits nowhere is passed over and later jobs take the GPUs left (``gavel`` under
  the latency-ratio queue).

A job that can run on no type at all (its gang exceeds every type's GPUs, or it accepts none of them) never
enters the queue, so it blocks nobody. Everything else (the LP, leases of ``lease_s``, throughputs, the
``gavel-lease`` placement packing each gang on few servers of its type) is Gavel's, :mod:`.allocation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.policies.gavel.allocation import GavelAllocation

#: Queue disciplines: strict in-order (head-of-line blocking) or Gavel's greedy, which passes over a job
#: that does not fit.
QUEUES = ("strict", "backfill")


@dataclass
class GavelHopsAllocation(GavelAllocation):
    """Gavel with the Hops paper's strict in-order latency-ratio queue (module docstring)."""

    #: ``strict``: the first job in the queue that fits on no type stops the hand-out; ``backfill``: it is
    #: passed over.
    queue: str = "strict"
    name: str = "gavel-hops"
    ordering: str = "latency-ratio"
    #: The job that ended the last strict hand-out (it fits on no type's free GPUs), for explanations.
    _blocker: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.queue not in QUEUES:
            raise ValueError(f"unknown queue '{self.queue}' (one of: {', '.join(QUEUES)})")
        super().__post_init__()

    def describe(self) -> str:
        return f"{super().describe()[:-1]}, queue={self.queue}, ordering={self.ordering})"

    def _hand_out(self, ranked: list[tuple[int, str]], gangs: list[int], free: dict[str, int]) -> dict[int, str]:
        """Strict: jobs in the order of their best pair, each on its first pair whose type holds its gang; the
        first job that fits on none ends the hand-out. Backfill: Gavel's greedy."""
        if self.queue == "backfill":
            return super()._hand_out(ranked, gangs, free)
        pairs: dict[int, list[str]] = {}
        for i, g in ranked:  # dicts keep insertion order: jobs in the order of their best pair
            pairs.setdefault(i, []).append(g)
        left = dict(free)
        chosen: dict[int, str] = {}
        ids = list(self.time_fractions)  # the LP's jobs, in the order the indices count
        self._blocker = None
        for i, types in pairs.items():
            fits = next((g for g in types if gangs[i] <= left[g]), None)
            if fits is None:
                self._blocker = ids[i] if i < len(ids) else None
                break
            chosen[i] = fits
            left[fits] -= gangs[i]
        return chosen

    def facts_for(self, job_id: str) -> dict[str, object] | None:
        """Gavel's facts, and for a job without a lease behind (or at) the job that blocked the queue, why."""
        facts = super().facts_for(job_id)
        if facts is None or facts.get("lease") or self._blocker is None or self.queue != "strict":
            return facts
        if job_id == self._blocker:
            why = "fits on no GPU type's free GPUs: the strict queue stops at it"
        else:
            why = f"behind {self._blocker} in the queue, which fits on no GPU type: the strict queue stops there"
        gavel_why = str(facts.get("why", "")).split(";")[0]
        return {**facts, "blocked_by": self._blocker, "why": f"{gavel_why}; {why}"}
