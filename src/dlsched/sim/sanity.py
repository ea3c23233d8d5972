"""Results a user should look at twice before trusting, each said in one line.

A policy that restarts its jobs far more than it should (random placement moves every job every round:
hundreds of checkpoint-restores) still produces a table, and its numbers then measure restart costs more
than scheduling. These checks turn that into a warning the CLI prints on stderr.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

#: ``simulate`` warns above this many restarts per job: a job restoring its checkpoint ten times or more
#: spends much of its life restarting (the presets in ``dlsched policies`` stay well below it on the demo).
RESTARTS_PER_JOB_WARN = 10.0
#: ``compare`` warns about a policy restarting this many times more than the median of the others ...
RESTARTS_RELATIVE_WARN = 5.0
#: ... as long as it restarts at least this often per job (a tenth of a restart per job against zero is noise).
RESTARTS_MIN_WARN = 1.0


def _restores(summary: dict[str, Any]) -> float | None:
    """Checkpoint-restores per job: every one charged, moves to GPUs of the same shape included (summaries
    made before that key existed have only ``restarts_per_job``)."""
    value = summary.get("checkpoint_restores_per_job", summary.get("restarts_per_job"))
    return None if value is None else float(value)


def restart_warning(summary: dict[str, Any]) -> str | None:
    """A one-line warning when one run's restarts per job exceed :data:`RESTARTS_PER_JOB_WARN`."""
    rpj = _restores(summary)
    if rpj is None or rpj <= RESTARTS_PER_JOB_WARN:
        return None
    return (f"{summary.get('policy', 'this run')} restarts each job {rpj:.1f} times on average (more than "
            f"{RESTARTS_PER_JOB_WARN:g}): its times are dominated by checkpoint-restores")


def restart_outliers(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One warning per policy whose restarts per job are far above the other policies' median."""
    found = []
    for i, row in enumerate(rows):
        rpj = _restores(row)
        others: list[float] = [float(x) for j, r in enumerate(rows) if j != i and (x := _restores(r)) is not None]
        if rpj is None or not others or rpj < RESTARTS_MIN_WARN:
            continue
        median = statistics.median(others)
        if rpj > RESTARTS_RELATIVE_WARN * max(median, RESTARTS_MIN_WARN / RESTARTS_RELATIVE_WARN):
            found.append(f"{row.get('policy')} restarts each job {rpj:.1f} times on average, the other policies "
                         f"{median:.1f} (median): its times are dominated by checkpoint-restores")
    return found
