"""What every ``dlsched`` sub-command shares: the output-format option and the one-line error exit."""

from __future__ import annotations

import sys
from enum import StrEnum

import typer


class Format(StrEnum):
    """``table`` for people, ``json`` (one object per line) for programs."""

    table = "table"
    json = "json"


def fail(message: object, code: int = 2) -> typer.Exit:
    """Print ``error: <message>`` as one line on stderr and return the exit to raise.

    One line whatever the terminal width (no wrapping), so scripts and tests can match it.
    """
    sys.stderr.write(f"error: {' '.join(str(message).split())}\n")
    return typer.Exit(code)
