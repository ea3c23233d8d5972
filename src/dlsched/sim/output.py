"""The files a run leaves in its ``--out`` folder, written so a reader never sees half of them.

One run: ``jobs.csv``, ``rounds.csv``, ``summary.json``, ``config.json`` (the resolved configuration that
replays it with ``dlsched simulate --config``) and ``report.html``. Several runs (``compare``): per-run tables
named after policy and seed, the summary rows, every run's configuration as a JSON list, one overlaid report.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlsched.sim.metrics import jobs_frame, rounds_frame
from dlsched.sim.run import RunRecords


def write_outputs(out_dir: str | Path, runs: Sequence[RunRecords],
                  summary: dict[str, Any] | list[dict[str, Any]]) -> None:
    """Write everything to a temporary folder next to ``out_dir`` first, then move it into place."""
    from dlsched.sim.report import RunArtifacts, write_report

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        if len(runs) == 1:
            run = runs[0]
            jobs_frame(run.jobs).to_csv(tmp / "jobs.csv", index=False)
            rounds_frame(run.rounds).to_csv(tmp / "rounds.csv", index=False)
            _write_json(tmp / "config.json", run.config_record())
        else:
            for run in runs:
                stem = _safe(run.label) + f"-seed{run.config.seed}"
                jobs_frame(run.jobs).to_csv(tmp / f"jobs-{stem}.csv", index=False)
                rounds_frame(run.rounds).to_csv(tmp / f"rounds-{stem}.csv", index=False)
            _write_json(tmp / "config.json", [run.config_record() for run in runs])
        _write_json(tmp / "summary.json", summary)
        seen: set[str] = set()
        overlays = []
        for run in runs:  # one overlay per policy (its first seed), so the report stays readable
            if run.label in seen:
                continue
            seen.add(run.label)
            overlays.append(RunArtifacts(label=run.label, jobs=run.jobs, rounds=run.rounds, segments=run.segments,
                                         summary=run.summary, num_gpus=run.num_gpus))
        write_report(tmp / "report.html", overlays)
        if not out.exists():
            os.replace(tmp, out)
        else:
            for f in tmp.iterdir():
                os.replace(f, out / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_json(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2) + "\n")


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
