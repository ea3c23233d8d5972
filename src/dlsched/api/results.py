"""What the Python API returns: a run's summary, tables and resolved configuration; a comparison's table.

The summary is a dict of plain Python values (no numpy scalars), so it prints, compares and serialises to
JSON as it is; the tables are pandas DataFrames with the columns of ``jobs.csv`` and ``rounds.csv``, so
what a notebook reads is what ``dlsched simulate --out`` writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from dlsched.sim.config import RunConfig
    from dlsched.sim.run import RunRecords


def plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays turned into Python numbers and lists, recursively."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class SimulationResult:
    """One run: ``summary`` (headline metrics), ``jobs`` and ``rounds`` (tables), ``config`` (resolved: replays
    the run, with every default filled in)."""

    summary: dict[str, Any]
    jobs: pd.DataFrame = field(repr=False)
    rounds: pd.DataFrame = field(repr=False)
    config: RunConfig = field(repr=False)
    #: The run's name in tables (the policy plus its stage overrides, or the label given).
    label: str = ""
    #: The scheduler as built, naming every stage.
    scheduler: str = ""
    #: The engine's records (segments, per-job records) for analyses the tables do not cover.
    records: RunRecords | None = field(default=None, repr=False)

    @classmethod
    def of(cls, records: RunRecords) -> SimulationResult:
        from dlsched.sim.metrics import jobs_frame, rounds_frame

        return cls(summary=plain(records.summary), jobs=jobs_frame(records.jobs),
                   rounds=rounds_frame(records.rounds), config=records.config, label=records.label,
                   scheduler=records.scheduler, records=records)

    def save(self, out_dir: str | Path, *, force: bool = False) -> Path:
        """Write the files ``dlsched simulate --out`` writes (jobs.csv, rounds.csv, summary.json, config.json,
        report.html) into ``out_dir``; returns the folder."""
        from dlsched.sim.output import check_out_dir, write_outputs

        assert self.records is not None, "a result built from records"
        check_out_dir(out_dir, force=force)
        return write_outputs(out_dir, [self.records], self.summary, force=force)


@dataclass(frozen=True)
class ComparisonResult:
    """Several runs: ``summary`` has one row per run (index: its label), each metric the mean over seeds and,
    with several seeds, ``<metric>_std`` beside it; ``runs`` maps each label to its results, one per seed."""

    summary: pd.DataFrame
    runs: dict[str, list[SimulationResult]] = field(repr=False)

    def __getitem__(self, label: str) -> list[SimulationResult]:
        return self.runs[label]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a number other than NaN (a metric a run could not define), else None."""
    if not _is_number(value) or math.isnan(float(value)):
        return None
    return float(value)


def summary_frame(groups: Mapping[str, Sequence[SimulationResult]]) -> pd.DataFrame:
    """One row per label: numeric metrics averaged over its runs (Nones skipped), their sample standard
    deviation as ``<metric>_std`` when there are several runs, other values from the first run."""
    rows = []
    for label, results in groups.items():
        summaries = [r.summary for r in results]
        keys: list[str] = []
        for s in summaries:
            keys.extend(k for k in s if k not in keys and k not in ("policy", "seed"))
        row: dict[str, Any] = {"policy": label, "seeds": len(results)}
        for key in keys:
            present = [s.get(key) for s in summaries]
            numbers = [x for v in present if (x := _number(v)) is not None]
            if numbers:
                row[key] = float(np.mean(numbers))
                if len(results) > 1:
                    row[f"{key}_std"] = float(np.std(numbers, ddof=1)) if len(numbers) > 1 else math.nan
            else:
                row[key] = next((v for v in present if v is not None), None)
        rows.append(row)
    return pd.DataFrame(rows).set_index("policy", drop=False)
