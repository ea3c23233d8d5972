"""The files a run leaves in its ``--out`` folder, written so a reader never sees half of them.

One run: ``jobs.csv``, ``rounds.csv``, ``summary.json``, ``config.json`` (the resolved configuration that
replays it with ``dlsched simulate --config``), ``report.html`` and, unless the run turned explanations off,
``explanations.jsonl`` (one record a line of why each stage decided; ``dlsched explain`` reads it). Several runs (``compare``): per-run tables
named after policy and seed, the summary rows, every run's configuration as a JSON list, one overlaid report.

The folder is handled by :mod:`dlsched.outputs`: checked before the simulation (:func:`check_out_dir`),
each file written to a temporary file inside it and renamed into place, an earlier run's results replaced
only when forced.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlsched.explain.records import EXPLANATIONS_FILE, write_records
from dlsched.outputs import check_output_dir, staged_dir
from dlsched.sim.about import describe_runs, header_line
from dlsched.sim.metrics import jobs_frame, rounds_frame
from dlsched.sim.run import RunRecords

#: What ``simulate --out`` writes (``compare`` writes per-run tables instead of the first two).
RUN_FILES: tuple[str, ...] = ("jobs.csv", "rounds.csv", "summary.json", "config.json", "report.html")


def check_out_dir(out_dir: str | Path, *, force: bool = False) -> Path:
    """Refuse a bad ``--out`` before any simulation (see :func:`dlsched.outputs.check_output_dir`)."""
    return check_output_dir(out_dir, force=force)


def write_outputs(out_dir: str | Path, runs: Sequence[RunRecords],
                  summary: dict[str, Any] | list[dict[str, Any]], *, force: bool = False) -> Path:
    """Write every result file into ``out_dir``, all or none; with ``force`` an earlier run's are replaced."""
    from dlsched.sim.report import RunArtifacts, write_report

    with staged_dir(out_dir, force=force) as stage:
        if len(runs) == 1:
            run = runs[0]
            jobs_frame(run.jobs).to_csv(stage.path("jobs.csv"), index=False)
            rounds_frame(run.rounds).to_csv(stage.path("rounds.csv"), index=False)
            _write_json(stage.path("config.json"), run.config_record())
            if run.explanations:
                write_records(stage.path(EXPLANATIONS_FILE), run.explanations)
        else:
            for run in runs:
                stem = _safe(run.label) + f"-seed{run.config.seed}"
                jobs_frame(run.jobs).to_csv(stage.path(f"jobs-{stem}.csv"), index=False)
                rounds_frame(run.rounds).to_csv(stage.path(f"rounds-{stem}.csv"), index=False)
            _write_json(stage.path("config.json"), [run.config_record() for run in runs])
        _write_json(stage.path("summary.json"), summary)
        seen: set[str] = set()
        overlays = []
        for run in runs:  # one overlay per policy (its first seed), so the report stays readable
            if run.label in seen:
                continue
            seen.add(run.label)
            overlays.append(RunArtifacts(label=run.label, jobs=run.jobs, rounds=run.rounds, segments=run.segments,
                                         summary=run.summary, num_gpus=run.num_gpus))
        write_report(stage.path("report.html"), overlays, about=header_line(describe_runs(runs)))
        return stage.folder


def _write_json(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2) + "\n")


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
