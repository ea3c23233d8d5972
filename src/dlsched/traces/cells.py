"""Parsing single cells of a trace row, with errors that name the file, line and column.

Readers hand cells over as strings (CSV) or numbers (DataFrames); each parser accepts both, treats an
empty cell / None / NaN as "missing", and raises :class:`~dlsched.core.InputError` naming the file, line and
column, so a bad trace fails at load time with one clear line.
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

import pandas as pd

from dlsched.core.errors import InputError
from dlsched.core.gpu import KNOWN_GPU_TYPES
from dlsched.core.job import Adaptivity
from dlsched.core.ranges import YEAR_S, Range, fmt_value

#: Most GPUs one job may ask for: the largest cluster a cluster file may describe.
MAX_JOB_GPUS = 65536
#: Allowed range of each numeric job field, declared once (docs/trace-format.md lists them).
JOB_RANGES: dict[str, Range] = {
    "submit_time_s": Range(0.0, YEAR_S),
    "duration_s": Range(0.0, YEAR_S, lo_open=True),
    "iterations": Range(0.0, 1e9, lo_open=True),
    "deadline_s": Range(0.0, 2 * YEAR_S),
    "num_gpus": Range(1, MAX_JOB_GPUS),
    "min_gpus": Range(1, MAX_JOB_GPUS),
    "max_gpus": Range(1, MAX_JOB_GPUS),
    "gpu_unit": Range(1, MAX_JOB_GPUS),
    "batch_size": Range(1, 2**20),
    "priority": Range(0.0, 1e6, lo_open=True),
}
#: A learning rate: positive, and no optimiser trains at a rate above 100.
LEARNING_RATE = Range(0.0, 100.0, lo_open=True)
#: Why a range is what it is, appended to the refusal where it helps.
_WHY = {"submit_time_s": " (a trace spans at most a year)", "duration_s": " (a trace spans at most a year)"}


def out_of_range(field: str, value: float | int | None) -> str | None:
    """The refusal for a value outside its field's range (``must be in [0, 31536000] s ..., got 1e+17``)."""
    rng = JOB_RANGES[field]
    if value is None or value in rng:
        return None
    return f"must be {rng.phrase}{_WHY.get(field, '')}, got {fmt_value(value)}"


#: Separator of the ``gpu_types`` cell (a comma would clash with CSV).
GPU_TYPES_SEP = ";"
#: Control characters (newlines included) are refused in text cells: they would break line numbering.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_missing(value: object) -> bool:
    """Whether a cell is empty: None, an all-blank string, or a pandas/NumPy missing value."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() == ""
    try:
        # pandas-stubs type isna per input kind; any cell value may come here, so it goes in as Any
        return bool(pd.isna(cast(Any, value)))
    except (TypeError, ValueError):
        return False


def parse_float(value: object, field: str, source: str, line: int | None, *, required: bool = False,
                minimum: float | None = None, positive: bool = False) -> float | None:
    """A finite float, or None for an empty optional cell."""
    if is_missing(value):
        if required:
            raise InputError("missing value", source=source, line=line, field=field)
        return None
    try:
        x = float(value.strip()) if isinstance(value, str) else float(cast(float, value))
    except (TypeError, ValueError):
        allowed = f" (allowed: {JOB_RANGES[field]})" if field in JOB_RANGES else ""
        raise InputError(f"not a number: {value!r}{allowed}", source=source, line=line, field=field) from None
    if not math.isfinite(x):
        allowed = f" (allowed: {JOB_RANGES[field]})" if field in JOB_RANGES else ""
        raise InputError(f"must be finite, got {value!r}{allowed}", source=source, line=line, field=field)
    if positive and x <= 0:
        raise InputError(f"must be positive, got {value!r}", source=source, line=line, field=field)
    if minimum is not None and x < minimum:
        raise InputError(f"must be >= {minimum:g}, got {value!r}", source=source, line=line, field=field)
    return x


def parse_int(value: object, field: str, source: str, line: int | None, *, required: bool = False,
              minimum: int | None = None) -> int | None:
    """An integer (``"4"`` and ``"4.0"`` both read as 4, ``"4.5"`` is an error), or None if empty."""
    x = parse_float(value, field, source, line, required=required)
    if x is None:
        return None
    if x != int(x):
        raise InputError(f"must be a whole number, got {value!r}", source=source, line=line, field=field)
    n = int(x)
    if minimum is not None and n < minimum:
        raise InputError(f"must be >= {minimum}, got {value!r}", source=source, line=line, field=field)
    return n


def req_float(value: object, field: str, source: str, line: int | None, *, minimum: float | None = None,
              positive: bool = False) -> float:
    """:func:`parse_float` for a required cell (never None)."""
    x = parse_float(value, field, source, line, required=True, minimum=minimum, positive=positive)
    return cast(float, x)


def req_int(value: object, field: str, source: str, line: int | None, *, minimum: int | None = None) -> int:
    """:func:`parse_int` for a required cell (never None)."""
    return cast(int, parse_int(value, field, source, line, required=True, minimum=minimum))


def req_text(value: object, field: str, source: str, line: int | None) -> str:
    """:func:`parse_text` for a required cell (never None)."""
    return cast(str, parse_text(value, field, source, line, required=True))


def parse_text(value: object, field: str, source: str, line: int | None, *, required: bool = False,
               default: str | None = None) -> str | None:
    """A non-empty single-line string kept verbatim (names may contain spaces, commas, quotes)."""
    if is_missing(value):
        if required:
            raise InputError("missing value", source=source, line=line, field=field)
        return default
    text = value if isinstance(value, str) else str(value)
    if _CONTROL.search(text):
        raise InputError(f"control characters are not allowed: {text!r}", source=source, line=line, field=field)
    return text


def parse_adaptivity(value: object, source: str, line: int | None, *,
                     default: Adaptivity = Adaptivity.RIGID) -> Adaptivity:
    if is_missing(value):
        return default
    text = str(value).strip().lower()
    try:
        return Adaptivity(text)
    except ValueError:
        known = ", ".join(a.value for a in Adaptivity)
        raise InputError(f"unknown adaptivity {value!r} (one of: {known})", source=source, line=line,
                         field="adaptivity") from None


def check_gpu_type(name: str, field: str, source: str, line: int | None) -> str:
    """``name`` if it is a GPU type dlsched knows (has a profile for), else an InputError listing them."""
    if name not in KNOWN_GPU_TYPES:
        known = ", ".join(sorted(KNOWN_GPU_TYPES))
        raise InputError(f"unknown GPU type {name!r} (known: {known})", source=source, line=line, field=field)
    return name


def parse_gpu_types(value: object, source: str, line: int | None) -> tuple[str, ...]:
    """``"a100;v100"`` -> ``("a100", "v100")``; each name must be a known GPU type."""
    if is_missing(value):
        return ()
    names = [p.strip() for p in str(value).split(GPU_TYPES_SEP)]
    if any(not p for p in names):
        raise InputError(f"empty GPU type in {value!r}", source=source, line=line, field="gpu_types")
    return tuple(check_gpu_type(p, "gpu_types", source, line) for p in names)



def parse_gpu_counts(value: object, source: str, line: int | None) -> tuple[int, ...]:
    """``"2;4;8"`` -> ``(2, 4, 8)``: the GPU counts a job accepts, ascending and without repeats."""
    if is_missing(value):
        return ()
    parts = [p.strip() for p in str(value).split(GPU_TYPES_SEP)]
    counts = [parse_int(p, "gpu_counts", source, line, required=True) for p in parts]
    rng = JOB_RANGES["num_gpus"]
    for k in counts:
        if k is None or k not in rng:
            raise InputError(f"every count must be {rng.phrase}, got {value!r}", source=source, line=line,
                             field="gpu_counts")
    return tuple(sorted({int(k) for k in counts if k is not None}))


def parse_learning_rates(value: object, source: str, line: int | None) -> tuple[tuple[int, float], ...]:
    """``"2:0.1;8:0.4"`` -> ``((2, 0.1), (8, 0.4))``: learning rates per GPU count, ascending by count."""
    if is_missing(value):
        return ()
    out: dict[int, float] = {}
    for part in str(value).split(GPU_TYPES_SEP):
        count, sep, rate = part.partition(":")
        if not sep:
            raise InputError(f"expected count:rate pairs separated by {GPU_TYPES_SEP!r} (2:0.1;8:0.4), got {value!r}",
                             source=source, line=line, field="learning_rates")
        k = parse_int(count.strip(), "learning_rates", source, line, required=True)
        lr = parse_float(rate.strip(), "learning_rates", source, line, required=True)
        if k is None or k not in JOB_RANGES["num_gpus"]:
            raise InputError(f"every count must be {JOB_RANGES['num_gpus'].phrase}, got {value!r}", source=source,
                             line=line, field="learning_rates")
        if lr is None or lr not in LEARNING_RATE:
            raise InputError(f"every rate must be {LEARNING_RATE.phrase}, got {value!r}", source=source, line=line,
                             field="learning_rates")
        if k in out:
            raise InputError(f"count {k} is given two rates in {value!r}", source=source, line=line,
                             field="learning_rates")
        out[int(k)] = float(lr)
    return tuple(sorted(out.items()))


def level_counts(lo: int, hi: int, levels: int, source: str, line: int | None) -> tuple[int, ...]:
    """At most ``levels`` GPU counts spaced evenly from ``lo`` to ``hi`` (both included, rounded)."""
    if not 1 <= levels <= MAX_JOB_GPUS:
        raise InputError(f"must be a whole number in [1, {MAX_JOB_GPUS}], got {levels}", source=source, line=line,
                         field="gpu_levels")
    if hi < lo:
        raise InputError(f"max_gpus {hi} is below min_gpus {lo}", source=source, line=line, field="max_gpus")
    if levels == 1 or hi == lo:
        return (lo,)
    step = (hi - lo) / (levels - 1)
    return tuple(sorted({int(round(lo + i * step)) for i in range(levels)}))


def parse_bool(value: object, field: str, source: str, line: int | None) -> bool:
    """``true/false``, ``yes/no``, ``1/0``; empty is false."""
    if is_missing(value):
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "1.0", "on"):
        return True
    if text in ("false", "no", "0", "0.0", "off"):
        return False
    raise InputError(f"expected true or false, got {value!r}", source=source, line=line, field=field)
