"""Options of a generated trace, as written after its name (``synthetic:jobs=100,seed=3``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from dlsched.core.errors import InputError
from dlsched.core.ranges import Range

#: Allowed ranges of generator options, declared once for every generator (``synthetic``, ``synergy``): a
#: trace spans at most a year (8760 hours), arrival rates beyond one a second are typos, and counts are
#: bounded like the trace fields they become.
OPTION_RANGES: dict[str, Range] = {
    "rate": Range(0.0, 3600.0, lo_open=True),
    "hours": Range(0.0, 8760.0, lo_open=True),
    "max_run_h": Range(0.0, 8760.0),
    "jobs": Range(1, 1_000_000),
    "seed": Range(0, 2**63 - 1),
    "max_gpus": Range(1, 65536),
    "ncf_share": Range(0.0, 1.0),
}


def _number(value: str, kind: type) -> float | int:
    """``value`` as ``kind``; an int option takes ``12`` or ``12.0`` but never ``1.5``."""
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(value)
    if kind is int:
        if not x.is_integer():
            raise ValueError(value)
        return int(x)
    return x


def parse_trace_options(args: str, spec: str, known: Sequence[str], numeric: Mapping[str, type]) -> dict[str, object]:
    """``key=value,key=value`` options of a generated trace (``synthetic:...``, ``synergy:...``).

    Unknown, repeated or malformed keys are errors naming the trace; ``numeric`` maps keys to int or float,
    and a number outside its :data:`OPTION_RANGES` range is refused with the range in the message.
    """
    out: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in args.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise InputError(f"trace '{spec}': expected key=value, got {item!r}")
        if key not in known:
            raise InputError(f"trace '{spec}': unknown key {key!r} (known: {', '.join(known)})")
        if key in out:
            raise InputError(f"trace '{spec}': key {key!r} given twice")
        if key not in numeric:
            out[key] = value
            continue
        rng = OPTION_RANGES.get(key)
        allowed = "" if rng is None else f" {rng.phrase}"
        kind = "a whole number" if numeric[key] is int else "a finite number"
        try:
            number = _number(value, numeric[key])
        except ValueError:
            raise InputError(f"trace '{spec}': {key} must be {kind}{allowed}, got {value!r}") from None
        if rng is not None and number not in rng:
            raise InputError(f"trace '{spec}': {key} must be {rng.phrase}, got {value!r}")
        out[key] = number
    return out
