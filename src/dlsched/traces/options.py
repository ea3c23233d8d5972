"""Options of a generated trace, as written after its name (``synthetic:jobs=100,seed=3``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dlsched.core.errors import InputError


def parse_trace_options(args: str, spec: str, known: Sequence[str], numeric: Mapping[str, type]) -> dict[str, object]:
    """``key=value,key=value`` options of a generated trace (``synthetic:...``, ``synergy:...``).

    Unknown, repeated or malformed keys are errors naming the trace; ``numeric`` maps keys to int or float.
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
        try:
            out[key] = numeric[key](value) if key in numeric else value
        except ValueError:
            raise InputError(f"trace '{spec}': {key}={value!r} is not a number") from None
    return out
