"""What every ``dlsched`` command group shares: the ``app`` they register on, ``--format``, the one-line
``error:``/``warning:`` output, and the summary table.

Apart from :mod:`dlsched.cli` (which mounts every group) so that the groups import these without importing
the package that imports them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from dlsched.core import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Schedule deep-learning training jobs on shared, heterogeneous GPU clusters.")
#: piped output gets the whole table rather than rich's default 80 columns
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 220)
err = Console(stderr=True)
T = TypeVar("T")


class Format(StrEnum):
    """``table`` for people, ``json`` (one object per line) for programs."""

    table = "table"
    json = "json"


#: ``--format table|json``, the same on every command.
FormatOpt = Annotated[Format, typer.Option("--format", help="table (human) or json (one object per line).")]


def fail(message: object, code: int = 2) -> typer.Exit:
    """Print ``error: <message>`` as one line on stderr and return the exit to raise.

    One line whatever the terminal width (no wrapping), so scripts and tests can match it.
    """
    sys.stderr.write(f"error: {' '.join(str(message).split())}\n")
    return typer.Exit(code)


def note(message: object) -> None:
    """Print an informational line on stderr, unwrapped (one line whatever the terminal width)."""
    sys.stderr.write(f"{' '.join(str(message).split())}\n")


def warn(message: object) -> None:
    """Print ``warning: <message>`` as one line on stderr (the result on stdout is unaffected)."""
    sys.stderr.write(f"warning: {' '.join(str(message).split())}\n")


def printable(value: object) -> str:
    """``value`` as text safe to print on a terminal: every character that is not printable (control
    characters, ESC and so the start of every escape sequence, newlines, bidirectional overrides) written as
    Python writes it in a string's repr (``\\x1b``, ``\\n``, ``\\u202e``). What a job or a user wrote
    (a name, a message, a command, an event) is shown with it, so it cannot move the cursor, recolour or
    clear the screen, or forge a line of its own."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def cell(value: object) -> Any:
    """``value`` as a rich table cell: :func:`printable`, and never read as rich markup (``[red]``)."""
    from rich.text import Text

    return Text(printable(value))


def guard(fn: Callable[[], T]) -> T:
    """Input errors become one line and exit 2; a policy breaking an invariant, one line and exit 1."""
    from dlsched.sim.invariants import PolicyError

    try:
        return fn()
    except InputError as exc:
        raise fail(str(exc)) from None
    except PolicyError as exc:
        raise fail(f"invariant violated: {exc}", 1) from None


def print_json_lines(rows: Iterable[dict[str, Any]]) -> None:
    for row in rows:
        sys.stdout.write(json.dumps(row) + "\n")


#: Summary columns of the human table: (title, summary key, divisor; None prints the value as it is). The
#: first ones are what a user compares policies by and fit in 100 columns; ``--wide`` shows them all.
_SUMMARY_COLUMNS: tuple[tuple[str, str, float | None], ...] = (
    ("policy", "policy", None), ("done", "completed", None), ("avg JCT h", "avg_jct_s", 3600),
    ("p99 JCT h", "p99_jct_s", 3600), ("makespan h", "makespan_s", 3600), ("wait min", "avg_wait_s", 60),
    ("util", "utilization", 1), ("restarts/job", "restarts_per_job", 1),
    ("jobs", "jobs", None), ("p50 JCT h", "p50_jct_s", 3600), ("GPU-h/job", "gpu_hours_per_job", 1),
    ("FTF max", "ftf_max", 1), ("unfair", "ftf_unfair_frac", 1), ("LR max", "latency_ratio_max", 1),
    ("frag/round", "fragments_per_round", 1), ("policy ms p50", "policy_time_median_s", 1e-3),
    ("wall s", "sim_wall_s", 1))
#: How many of :data:`_SUMMARY_COLUMNS` the default (narrow) table shows.
_DEFAULT_COLUMNS = 8
#: Width the default table and its header line keep within.
TABLE_WIDTH = 100

#: ``--wide``: every summary column in the table.
WideOpt = Annotated[bool, typer.Option("--wide", help="Show every summary column in the table (the default "
                                       "shows the main ones within 100 columns; --format json has all).")]


def _cell(value: Any, scale: float | None) -> str:
    if value is None:
        return "-"
    if scale is None:
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value) if not isinstance(value, float) else f"{value:g}"
    return f"{value / scale:.2f}"


#: Row keys that describe a row rather than measure it, and spread suffixes shown inside their metric's cell.
_NOT_COLUMNS = frozenset({"seed", "seeds", "runs", "workloads"})
_SPREAD_SUFFIXES = ("_std", "_min", "_max")


def _other_columns(rows: list[dict[str, Any]]) -> list[tuple[str, str, float | None]]:
    """``--wide``: every numeric key of the rows the fixed columns leave out, titled by its key."""
    shown = {key for _, key, _ in _SUMMARY_COLUMNS}
    keys: list[str] = []
    for row in rows:
        for key, value in row.items():
            if (key not in shown and key not in keys and key not in _NOT_COLUMNS
                    and not key.endswith(_SPREAD_SUFFIXES) and isinstance(value, int | float)
                    and not isinstance(value, bool)):
                keys.append(key)
    return [(key, key, None) for key in keys]


def _rounded(value: Any) -> Any:
    """A count averaged over seeds, to one decimal (``9.7``), whole counts as they are."""
    return round(value, 1) if isinstance(value, float) else value


def _range(row: dict[str, Any], key: str, scale: float | None) -> str:
    lo, hi = row.get(f"{key}_min"), row.get(f"{key}_max")
    if lo is None or hi is None:
        return ""
    return f"{_cell(lo, scale)}-{_cell(hi, scale)}"


def print_summaries(rows: list[dict[str, Any]], fmt: Format, *, header: str | None = None,
                    wide: bool = False) -> None:
    """Run summaries: one JSON object per line, or a table (headed by what was run) with one row per run."""
    if fmt is Format.json:
        print_json_lines(rows)
        return
    columns = (*_SUMMARY_COLUMNS, *_other_columns(rows)) if wide else _SUMMARY_COLUMNS[:_DEFAULT_COLUMNS]
    table = Table(title=None, show_lines=False)
    for title, _, _ in columns:
        table.add_column(title, justify="left" if title == "policy" else "right",
                         overflow="fold" if title == "policy" else "ellipsis")
    for row in rows:
        spread = int(row.get("runs", 1) or 1) > 1 or int(row.get("workloads", 1) or 1) > 1
        cells = []
        for title, key, scale in columns:
            if title == "done" and not wide:
                cells.append(f"{_cell(_rounded(row.get('completed')), None)}/{_cell(_rounded(row.get('jobs')), None)}")
            elif spread and row.get(f"{key}_std") is not None:
                cells.append(f"{_cell(row.get(key), scale)}±{_cell(row.get(f'{key}_std'), scale)}")
            else:
                cells.append(_cell(row.get(key), scale))
        table.add_row(*cells)
        if "workloads" in row:  # several traces: the range over the workloads below the mean
            table.add_row("  range", *(_range(row, "completed" if title == "done" else key, scale)
                                       for title, key, scale in columns[1:]))
    if header:
        from dlsched.sim.about import wrap_header

        out.print(header if wide else wrap_header(header, TABLE_WIDTH), markup=False, highlight=False)
    if wide:  # every column at its full width, however wide the terminal: nothing folded or cut
        needed = sum(max([len(str(c.header)), *(len(str(x)) for x in c.cells)]) + 3 for c in table.columns) + 1
        Console(file=out.file, width=max(needed, out.width), soft_wrap=True).print(table, crop=False)
    else:
        out.print(table, width=min(TABLE_WIDTH, out.width))


def _version(value: bool) -> None:
    if value:
        from dlsched.version import __version__

        sys.stdout.write(f"dlsched {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the dlsched version and exit.")] = False) -> None:
    """Schedule deep-learning training jobs on shared, heterogeneous GPU clusters."""
