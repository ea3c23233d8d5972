"""One readable paragraph per stage from a job's records, e.g.::

    ordering: rounds 3-7: 4th of 9 in the latency-ratio queue (latency ratio 1.2); round 8: 1st of 9 ...

Consecutive rounds whose decision reads the same, numbers aside, collapse into one range, which shows the first
round's summary and, when the short decision moved inside the range (a rank that climbs the queue), where it
ended: ``rounds 2-114: 92nd of 94 in the fifo queue (...), from round 97: rank 1``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from dlsched.explain.records import STAGE_ORDER

_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?(?:st|nd|rd|th)?")


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return _NUMBER.sub("#", a["decided"]) == _NUMBER.sub("#", b["decided"]) and \
        _NUMBER.sub("#", a["summary"]) == _NUMBER.sub("#", b["summary"])


def _rounds(first: int, last: int) -> str:
    return f"round {first}" if first == last else f"rounds {first}-{last}"


def explain_paragraphs(records: Sequence[dict[str, Any]]) -> list[str]:
    """Per stage (pipeline order), the ranges of rounds and what was decided in each."""
    by_stage: dict[str, list[dict[str, Any]]] = {}
    for rec in sorted(records, key=lambda r: (int(r["round"]), float(r["time_s"]))):
        by_stage.setdefault(rec["stage"], []).append(rec)
    out = []
    for stage in sorted(by_stage, key=lambda s: STAGE_ORDER.get(s, 9)):
        spans: list[tuple[int, int, dict[str, Any], dict[str, Any]]] = []
        for rec in by_stage[stage]:
            first, last = int(rec["round"]), int(rec.get("last_round", rec["round"]))
            if spans and _same(spans[-1][2], rec) and first <= spans[-1][1] + 1:
                spans[-1] = (spans[-1][0], max(last, spans[-1][1]), spans[-1][2], rec)
            else:
                spans.append((first, last, rec, rec))
        out.append(f"{stage}: " + "; ".join(_span(*span) for span in spans))
    return out


def _span(a: int, b: int, first: dict[str, Any], last: dict[str, Any]) -> str:
    moved = f", from round {last['round']}: {last['decided']}" if last["decided"] != first["decided"] else ""
    return f"{_rounds(a, b)}: {first['summary']}{moved}"
