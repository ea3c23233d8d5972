"""The files a run leaves in its ``--out`` folder, written so a reader never sees half of them.

One run: ``jobs.csv``, ``rounds.csv``, ``allocations.csv`` and ``cluster.json`` (which GPUs each job held
when, on which nodes: what ``dlsched report`` draws), ``summary.json``, ``config.json`` (the resolved configuration that
replays it with ``dlsched simulate --config``), ``report.html`` and, unless the run turned explanations off,
``explanations.jsonl`` (one record a line of why each stage decided; ``dlsched explain`` reads it). Several runs (``compare``): per-run tables
named after policy and seed, the summary rows, every run's configuration as a JSON list, one overlaid report.

The folder is handled by :mod:`dlsched.outputs`: checked before the simulation (:func:`check_out_dir`),
each file written to a temporary file inside it and renamed into place, an earlier run's results replaced
only when forced.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlsched.explain.records import EXPLANATIONS_FILE, write_records
from dlsched.outputs import check_output_dir, staged_dir
from dlsched.sim.about import describe_runs, header_line
from dlsched.sim.config import RunConfig
from dlsched.sim.metrics import jobs_frame, rounds_frame
from dlsched.sim.records import Segment
from dlsched.sim.run import RunRecords

#: What ``simulate --out`` writes (``compare`` writes per-run tables instead of the first four).
RUN_FILES: tuple[str, ...] = ("jobs.csv", "rounds.csv", "allocations.csv", "cluster.json", "summary.json", "config.json",
                               "report.html")


def check_out_dir(out_dir: str | Path, *, force: bool = False) -> Path:
    """Refuse a bad ``--out`` before any simulation (see :func:`dlsched.outputs.check_output_dir`)."""
    return check_output_dir(out_dir, force=force)


def write_outputs(out_dir: str | Path, runs: Sequence[RunRecords],
                  summary: dict[str, Any] | list[dict[str, Any]], *, force: bool = False,
                  figures: Sequence[str] = ()) -> Path:
    """Write every result file into ``out_dir``, all or none; with ``force`` an earlier run's are replaced.
    ``figures`` (``svg``, ``pdf``, ``png``) also writes the report's figures as ``figure-*`` files."""
    from dlsched.sim.report import RunArtifacts, write_report
    from dlsched.sim.report_spread import has_spread, spread_table

    with staged_dir(out_dir, force=force) as stage:
        if len(runs) == 1:
            run = runs[0]
            jobs_frame(run.jobs).to_csv(stage.path("jobs.csv"), index=False)
            rounds_frame(run.rounds).to_csv(stage.path("rounds.csv"), index=False)
            write_allocations(stage.path("allocations.csv"), run.segments)
            _write_json(stage.path("cluster.json"), cluster_record(run.config))
            _write_json(stage.path("config.json"), run.config_record())
            if run.explanations:
                write_records(stage.path(EXPLANATIONS_FILE), run.explanations)
        else:
            stems = [_safe(run.label) + f"-seed{run.config.seed}" for run in runs]
            for run, stem in zip(runs, stems, strict=True):
                if stems.count(stem) > 1:  # one row over several traces: the trace tells its tables apart
                    stem += f"-{_safe(run.trace_name)}"
                jobs_frame(run.jobs).to_csv(stage.path(f"jobs-{stem}.csv"), index=False)
                rounds_frame(run.rounds).to_csv(stage.path(f"rounds-{stem}.csv"), index=False)
            _write_json(stage.path("config.json"), [run.config_record() for run in runs])
        _write_json(stage.path("summary.json"), summary)
        by_label: dict[str, list[dict[str, Any]]] = {}
        for run in runs:
            by_label.setdefault(run.label, []).append(run.summary)
        seen: set[str] = set()
        overlays = []
        for run in runs:  # one overlay per policy (its first seed), so the report stays readable
            if run.label in seen:
                continue
            seen.add(run.label)
            overlays.append(RunArtifacts(label=run.label, jobs=run.jobs, rounds=run.rounds, segments=run.segments,
                                         summary=run.summary, num_gpus=run.num_gpus,
                                         seed_summaries=by_label[run.label]))
        rows = summary if isinstance(summary, list) else [summary]
        write_report(stage.path("report.html"), overlays, about=header_line(describe_runs(runs)),
                     spread=spread_table(rows) if has_spread(rows) else None,
                     figures=figures, figure_path=stage.path)
        return stage.folder


def write_allocations(path: Path, segments: Sequence[Segment]) -> None:
    """``allocations.csv``: every stretch a job held one placement, with the global GPU ids (space-separated)
    that ``dlsched report`` draws on the nodes of ``cluster.json``."""
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["job_id", "start_s", "end_s", "gpu_type", "num_gpus", "restarting_until_s", "gpus"])
        for s in segments:
            out.writerow([s.job_id, repr(s.start_s), repr(s.end_s), s.gpu_type, s.num_gpus,
                          repr(s.restarting_until_s), " ".join(str(g) for g in s.gpus)])


def cluster_record(config: RunConfig) -> dict[str, Any]:
    """``cluster.json``: the run's nodes in GPU-id order (GPU ids are given in node order)."""
    from dlsched.clusters import cluster_file
    from dlsched.sim.run import scale_cluster

    cluster = scale_cluster(cluster_file(config.cluster).build(), config.cluster_scale)
    return {"name": cluster.name, "nodes": [{"name": n.name or f"node{n.node_id}", "gpu_type": n.gpu_type,
                                             "gpus": n.num_gpus} for n in cluster.nodes]}


def _write_json(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2) + "\n")


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
