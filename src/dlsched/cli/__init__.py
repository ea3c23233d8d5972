"""The ``dlsched`` command: one module per command group, and what they share.

stdout carries only the result (a table or JSON); progress bars and log lines go to stderr, so the output
can be piped. Bad input ends with one ``error:`` line on stderr and exit code 2, never a traceback.

=================  =========================================================
module             commands
=================  =========================================================
``simulate``       ``dlsched simulate`` (one run; ``--config`` replays one)
``compare``        ``dlsched compare`` (policies or variants over traces and seeds, in parallel, with spread)
``variants``       ``compare --variant``/``--variants``: rows as full run specifications
``sweep``          ``dlsched sweep`` (a grid of simulations as Ray tasks or local processes, resumable)
``run``            ``dlsched run`` (real PyTorch jobs on Ray under a scheduler preset)
``clusters``       ``dlsched clusters``
``policies``       ``dlsched policies``
``trace``          ``dlsched trace validate|stats|convert``
``variability``    ``dlsched variability show|fit``
``data``           ``dlsched data list|fetch`` (the public datasets, fetched into the data directory)
``serve``          ``dlsched serve`` (the scheduler service) and ``serve user|quota``
``client``         ``dlsched submit|jobs|show|cancel|logs`` (the service's client, :class:`dlsched.Client`)
``service_info``   ``dlsched whoami|cluster`` (who you are to the service; its nodes and who holds them)
``spec``           ``dlsched spec check|docs`` (a job spec before it is submitted; its reference page)
``report``         ``dlsched report RUN_DIR`` (the dashboard of a finished simulation)
``explain``        ``dlsched explain [RUN_DIR] JOB`` (why a job waits or runs where it does)
``whatif``         ``dlsched whatif`` and ``dlsched world fit`` (a service's jobs replayed under other policies)
``run_options``    the flags that describe a run, turned into a RunConfig
``common``         what the groups share: ``app``, ``--format``, ``error:`` lines, the summary table
=================  =========================================================
"""

from __future__ import annotations

import logging
import signal
import sys

# The shared helpers stay importable from here, where they used to live; the command groups themselves import
# them from dlsched.cli.common (importing this package from a group would close an import circle).
from dlsched.cli.common import (
    TABLE_WIDTH,
    Format,
    FormatOpt,
    WideOpt,
    app,
    err,
    fail,
    guard,
    note,
    out,
    print_json_lines,
    print_summaries,
    warn,
)

__all__ = ["TABLE_WIDTH", "Format", "FormatOpt", "WideOpt", "app", "err", "fail", "guard", "main", "note", "out",
           "print_json_lines", "print_summaries", "warn"]


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (``timeout``, a batch scheduler) unwinds like Ctrl-C, so half-written results are cleaned up."""
    raise SystemExit(128 + signum)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    signal.signal(signal.SIGTERM, _terminated)
    app()


def _mount() -> None:
    """Register every command group (each imports ``app`` and the helpers from :mod:`dlsched.cli.common`)."""
    from dlsched.cli import (  # noqa: F401  (register their commands)
        client,
        clusters,
        compare,
        explain,
        policies,
        report,
        run,
        service_info,
        simulate,
        sweep,
    )
    from dlsched.cli.data import app as data_app
    from dlsched.cli.serve import app as serve_app
    from dlsched.cli.spec import app as spec_app
    from dlsched.cli.trace import app as trace_app
    from dlsched.cli.variability import app as variability_app
    from dlsched.cli.whatif import world_app

    app.add_typer(trace_app, name="trace", help="Validate, summarise and convert traces.")
    app.add_typer(variability_app, name="variability", help="Show and fit PAL's per-GPU PM-score bins.")
    app.add_typer(data_app, name="data", help="List the public datasets dlsched reads and fetch them.")
    app.add_typer(serve_app, name="serve", help="Run the scheduler service; manage its users and quotas.")
    app.add_typer(world_app, name="world", help="Fit a simulator world to a service's reports.")
    app.add_typer(spec_app, name="spec", help="Check a job spec; print the job spec's reference page.")


_mount()
