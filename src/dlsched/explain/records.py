"""Reading and writing explanation records: ``explanations.jsonl`` (one record a line) and the selection of
one job's records, optionally at one round.

A record stands for rounds ``round`` through ``last_round`` (the simulator collapses unchanged decisions;
a record without ``last_round`` stands for its own round only).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dlsched.core import InputError

#: The file ``dlsched simulate --out`` writes the records to.
EXPLANATIONS_FILE = "explanations.jsonl"
#: Stages in pipeline order (records of one round sort by it).
STAGE_ORDER: dict[str, int] = {s: i for i, s in enumerate(
    ("admission", "ordering", "allocation", "placement", "coordination"))}
_KEYS = ("round", "time_s", "job", "stage", "decided", "summary", "facts")


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """One JSON record a line (strict JSON: a number that is not finite is written as null)."""
    with open(path, "w", encoding="utf-8") as fh:
        for rec in plain_records(records):
            fh.write(json.dumps(rec, allow_nan=False) + "\n")


def plain_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records as plain, strict JSON values (numpy numbers in facts become Python numbers, numbers that are
    not finite become None), for a file, a database or an HTTP answer."""
    # one encoding of the whole list; the decoder turns the NaN and Infinity tokens the encoder writes for
    # numbers that are not finite into None (no second walk over every value)
    return list(json.loads(json.dumps(list(records), default=_plain), parse_constant=_not_finite))


def _not_finite(_token: str) -> None:
    return None


def _plain(value: Any) -> Any:
    """numpy scalars and tuples inside facts as plain JSON."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


def load_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every record of a simulation folder written with ``--out``; an InputError names what is missing."""
    folder = Path(run_dir).expanduser()
    if not folder.is_dir():
        raise InputError(f"no such folder: {folder}", field="run_dir")
    path = folder / EXPLANATIONS_FILE
    if not path.is_file():
        raise InputError(f"{folder} holds no {EXPLANATIONS_FILE} (write a run with 'dlsched simulate --out' "
                         f"and explanations on)", field="run_dir")
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not JSON: {exc.msg}", source=str(path), line=n) from None
            if not isinstance(rec, dict) or any(k not in rec for k in _KEYS):
                raise InputError(f"not an explanation record (needs {', '.join(_KEYS)})", source=str(path), line=n)
            out.append(rec)
    return out


def covers(rec: dict[str, Any], round_no: int) -> bool:
    """Whether a record stands for round ``round_no``."""
    return int(rec["round"]) <= round_no <= int(rec.get("last_round", rec["round"]))


def select(records: Sequence[dict[str, Any]], job: str, round_no: int | None = None) -> list[dict[str, Any]]:
    """The job's records (at ``round_no`` only, when given), oldest round first, stages in pipeline order."""
    mine = [r for r in records if r["job"] == job and (round_no is None or covers(r, round_no))]
    return sorted(mine, key=lambda r: (int(r["round"]), STAGE_ORDER.get(r["stage"], 9), float(r["time_s"])))


def explain(run_dir_or_result: Any, job: str, round: int | None = None) -> list[dict[str, Any]]:  # noqa: A002
    """A job's records from a simulation folder (``--out``), a run's result (anything with an
    ``explanations`` list, as :func:`dlsched.sim.run.simulate` returns) or a list of records.

    An unknown job, or a round in which the job took no part, is an InputError naming the field.
    """
    if isinstance(run_dir_or_result, (str, Path)):
        records: Sequence[dict[str, Any]] = load_records(run_dir_or_result)
    elif isinstance(run_dir_or_result, list):
        records = run_dir_or_result
    else:
        records = getattr(run_dir_or_result, "explanations", None) or []
    if round is not None and round < 0:
        raise InputError(f"must be a round number (0 or more), got {round}", field="round")
    mine = select(records, job)
    if not mine:
        known = sorted({r["job"] for r in records})
        hint = f" (jobs with records: {', '.join(known[:8])}{', ...' if len(known) > 8 else ''})" if known else \
            " (the run kept no explanations)"
        raise InputError(f"no explanations of job '{job}'{hint}", field="job")
    if round is None:
        return mine
    at = [r for r in mine if covers(r, round)]
    if not at:
        first, last = int(mine[0]["round"]), max(int(r.get("last_round", r["round"])) for r in mine)
        raise InputError(f"job '{job}' took no part in round {round} (its records cover rounds {first}-{last})",
                         field="round")
    return at
