"""Closest-valid-name suggestions for misspelt names ("did you mean 'sia'?").

Policies, stages, tunables, clusters and columns are all chosen by name; a typo should be answered with the
name the user most likely meant rather than a list of every valid one. One helper keeps the wording and the
matching threshold the same everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "did_you_mean"]


def closest(name: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice most similar to ``name`` (case-insensitive), or None when nothing is similar enough.

    Matching ignores case so that ``SIA`` finds ``sia``, but the returned string is the choice as spelt in
    ``choices`` so it can be pasted back.
    """
    options = [str(c) for c in choices]
    if not options:
        return None
    lowered: dict[str, str] = {}
    for option in options:
        lowered.setdefault(option.lower(), option)
    key = str(name).lower()
    if key in lowered:
        return lowered[key]
    match = difflib.get_close_matches(key, list(lowered), n=1, cutoff=cutoff)
    return lowered[match[0]] if match else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A message suffix: `` (did you mean 'x'?)`` when a close choice exists, else an empty string."""
    best = closest(name, choices)
    return f" (did you mean '{best}'?)" if best is not None else ""
