"""A progress bar for long runs (``compare``, experiments, benchmarks) that only a person sees.

The bar is drawn on stderr, and only when stderr is a terminal: piped or redirected output (a log file, CI,
``2>&1 | tee``) stays free of carriage returns and escape codes. While it is shown, lines printed to
stderr appear above it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def shows_progress() -> bool:
    """Whether a bar would be drawn: stderr is a terminal."""
    return sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(total: int, description: str, unit: str = "runs") -> Iterator[Callable[[], None]]:
    """Yield ``advance()``; each call marks one of ``total`` steps done. Silent unless stderr is a terminal."""
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not (shows_progress() and console.is_terminal)) as prog:
        task = prog.add_task(description, total=total)
        yield lambda: prog.advance(task)
