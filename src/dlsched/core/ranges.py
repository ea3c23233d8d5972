"""Allowed ranges of numeric inputs, declared once beside the field they bound.

Every number a user can give (a tunable, a world option, a trace cell, a cluster field) has a range that
follows from what it means: a round is at least a second and at most a day, a trace spans at most a year.
A value outside it is refused before a run starts, and the refusal prints the range, so the user knows
what to type instead. Declaring the range as data (rather than as an ``if`` in each constructor) lets the
registry check every stage the same way and lets ``dlsched policies`` print the ranges it enforces.

A stage field declares its range with :func:`ranged` (``k_max: int = ranged(11, 1, 64)``); the registry
reads it back with :func:`range_of` when it builds the stage.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

#: Seconds in a day, a (365-day) year: the bounds most time ranges follow from.
DAY_S = 86400.0
YEAR_S = 365.0 * DAY_S


@dataclass(frozen=True)
class Range:
    """A closed or half-open interval of allowed values; ``None`` leaves a side unbounded."""

    lo: float | None = None
    hi: float | None = None
    #: Whether ``lo`` itself is excluded (``(0, 1]`` for "positive, at most 1").
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        x = float(value)
        if math.isnan(x):
            return False
        if self.lo is not None and (x < self.lo or (self.lo_open and x == self.lo)):
            return False
        return not (self.hi is not None and (x > self.hi or (self.hi_open and x == self.hi)))

    def __str__(self) -> str:
        """The interval as people write it: ``[1, 86400]``, ``(0, 1]``, ``>= 0``, ``> 0``."""
        if self.hi is None:
            if self.lo is None:
                return "any finite number"
            return f"{'>' if self.lo_open else '>='} {fmt_number(self.lo)}"
        if self.lo is None:
            return f"{'<' if self.hi_open else '<='} {fmt_number(self.hi)}"
        return (f"{'(' if self.lo_open else '['}{fmt_number(self.lo)}, {fmt_number(self.hi)}"
                f"{')' if self.hi_open else ']'}")

    @property
    def phrase(self) -> str:
        """``in [1, 64]`` for a bounded range, ``>= 0`` for a one-sided one (reads after "must be")."""
        return f"in {self}" if self.hi is not None and self.lo is not None else str(self)

    def explain(self, value: object) -> str:
        """The refusal, as the tail of an error message: ``must be in [1, 64], got 0``."""
        return f"must be {self.phrase}, got {fmt_value(value)}"


def fmt_number(x: float) -> str:
    """A bound or value as it would be typed: ``86400``, ``0.5``, ``1e+300``, never ``86400.0``."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e10:
        return str(int(x))
    return f"{x:g}" if isinstance(x, float) else str(x)


def fmt_value(value: object) -> str:
    """A value the way ``--set`` takes it: tuples as ``3600,36000``, numbers without a trailing ``.0``."""
    if isinstance(value, (tuple, list)):
        return ",".join(fmt_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return fmt_number(value)
    if value is None:
        return "none"
    return str(value)


def ranged(default: Any, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False, **metadata: Any) -> Any:
    """A dataclass field with ``default`` whose values (each element, for a tuple) must lie in the range."""
    meta = {"range": Range(lo, hi, lo_open, hi_open), **metadata}
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults need default_factory")
    return dataclasses.field(default=default, metadata=meta)


def range_of(f: dataclasses.Field) -> Range | None:
    """The range a dataclass field declares with :func:`ranged`, if any."""
    r = f.metadata.get("range")
    return r if isinstance(r, Range) else None
