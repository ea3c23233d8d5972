"""A sweep's finished cells gathered into one table (``results.csv``) and one report (``report.md``).

The table has one row per cell: where it sits in the grid, then every summary key. The report averages
the seeds of each preset, trace and tunable combination and lays the main metrics out for reading.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dlsched.sim.metrics import average_summaries
from dlsched.sweep.config import Cell, SweepConfig
from dlsched.sweep.store import CellStore

#: Report columns: (title, summary key, divisor).
REPORT_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("done", "completed", 1), ("jobs", "jobs", 1), ("avg JCT h", "avg_jct_s", 3600),
    ("p99 JCT h", "p99_jct_s", 3600), ("makespan h", "makespan_s", 3600), ("util", "utilization", 1),
    ("restarts/job", "restarts_per_job", 1))


def _tunable_text(tunables: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in tunables.items())


def table(cells: Sequence[Cell], store: CellStore) -> pd.DataFrame:
    """One row per cell (preset, trace, seed, tunables, then the summary's scalar keys)."""
    rows = []
    for cell in cells:
        summary = store.load(cell)["summary"]
        row: dict[str, Any] = {"preset": cell.preset, "trace": cell.trace, "seed": cell.seed,
                               "tunables": _tunable_text(dict(cell.tunables))}
        row.update({k: v for k, v in summary.items()
                    if k not in row and not isinstance(v, (list, dict))})
        rows.append(row)
    return pd.DataFrame(rows)


def grouped(cells: Sequence[Cell], store: CellStore) -> list[dict[str, Any]]:
    """Summaries averaged over seeds, one per (preset, trace, tunables), in grid order."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for cell in cells:
        key = (cell.preset, cell.trace, _tunable_text(dict(cell.tunables)))
        groups.setdefault(key, []).append(store.load(cell)["summary"])
    out = []
    for (preset, trace, tunables), summaries in groups.items():
        avg = average_summaries(summaries)
        label = f"{preset} {trace}" + (f" [{tunables}]" if tunables else "")
        avg.update(policy=label, preset=preset, trace=trace, tunables=tunables, seed=summaries[0].get("seed"),
                   seeds=len(summaries))
        out.append(avg)
    return out


def _number(value: Any, scale: float) -> str:
    return "-" if value is None else f"{value / scale:.2f}"


def write(folder: Path, sweep: SweepConfig, cells: Sequence[Cell], store: CellStore,
          provenance: dict[str, Any]) -> list[dict[str, Any]]:
    """Write ``results.csv``, ``summary.json`` and ``report.md`` into ``folder``; returns the grouped rows."""
    table(cells, store).to_csv(folder / "results.csv", index=False)
    rows = grouped(cells, store)
    (folder / "summary.json").write_text(json.dumps({**provenance, "sweep": sweep.model_dump(mode="json"),
                                                     "rows": rows}, indent=1) + "\n")
    lines = [f"# Sweep on {sweep.cluster}", "",
             f"{len(sweep.presets)} presets x {len(sweep.traces)} traces x {len(sweep.seed_list)} seeds"
             + (f" x {len(rows) // (len(sweep.presets) * len(sweep.traces))} tunable combinations"
                if sweep.tunables else "")
             + f" = {len(cells)} cells; each row is the mean over seeds {sweep.seed_list}.", "",
             f"Code: commit {str(provenance.get('commit') or 'not recorded')[:7]}"
             + (" with uncommitted changes" if provenance.get("dirty") else "") + ".", ""]
    for trace in sweep.traces:
        lines += [f"## {trace}", "", "| preset | " + " | ".join(t for t, _, _ in REPORT_COLUMNS) + " |",
                  "|---" * (len(REPORT_COLUMNS) + 1) + "|"]
        for row in rows:
            if row["trace"] == trace:
                name = row["preset"] + (f" [{row['tunables']}]" if row["tunables"] else "")
                lines.append(f"| {name} | "
                             + " | ".join(_number(row.get(k), s) for _, k, s in REPORT_COLUMNS) + " |")
        lines.append("")
    (folder / "report.md").write_text("\n".join(lines))
    return rows
