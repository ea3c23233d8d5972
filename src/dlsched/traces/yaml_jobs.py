"""Job specs written by hand in YAML: one mapping per job, keyed by the canonical columns.

A CSV cell holds one value, so the canonical table packs lists into ``;``-separated cells. A user writing a
few jobs by hand (Hops's user-selectable requirements above all) reads and writes YAML more easily::

    jobs:
      - job_id: bert-a
        submit_time_s: 0
        model: bert
        num_gpus: 4
        adaptivity: strong-scaling
        gpu_counts: [2, 4, 8]          # or min_gpus / max_gpus / gpu_levels
        gpu_types: [rtx3090, titanxp]
        per_gpu_batch: true
        batch_size: 32                 # per GPU, as per_gpu_batch says
        learning_rates: {4: 0.1}       # one rate, the others by lr_scaling; or one per count
        lr_scaling: sqrt
        duration_s: 3600

Keys are the canonical columns (:mod:`dlsched.traces.schema`, docs/trace-format.md); every job goes through
the same parsing and checks as a CSV row, and an error names the file and the line where the job's mapping
starts. A file is recognised by its ``.yaml`` / ``.yml`` name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from dlsched.core.errors import InputError
from dlsched.core.job import JobSpec
from dlsched.traces.cells import GPU_TYPES_SEP
from dlsched.traces.schema import COLUMNS, REQUIRED_COLUMNS, spec_from_record
from dlsched.traces.validation import finish_specs

#: Suffixes of job-spec files.
YAML_SUFFIXES = (".yaml", ".yml")


def is_yaml_trace(path: str | os.PathLike[str]) -> bool:
    return Path(path).suffix.lower() in YAML_SUFFIXES


def _cell(key: str, value: object, source: str, line: int) -> object:
    """A YAML value as the canonical cell it stands for: lists joined, ``learning_rates`` as ``count:rate``."""
    if isinstance(value, list):
        if any(isinstance(v, (list, dict)) for v in value):
            raise InputError("expected a list of plain values", source=source, line=line, field=key)
        return GPU_TYPES_SEP.join(str(v) for v in value)
    if isinstance(value, dict):
        if key != "learning_rates":
            raise InputError("expected a single value or a list, not a mapping", source=source, line=line, field=key)
        return GPU_TYPES_SEP.join(f"{k}:{v}" for k, v in value.items())
    return value


def _job_lines(text: str) -> list[int]:
    """The 1-based line where each job's mapping starts (from the YAML node tree)."""
    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, node in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "jobs" and isinstance(node, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in node.value]
    return []


def read_yaml_jobs(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Jobs from a YAML job-spec file (``jobs:`` and a list of mappings), sorted by submit time."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    try:
        data = yaml.safe_load(text)
        lines = _job_lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not YAML: {getattr(exc, 'problem', None) or exc}", source=source,
                         line=None if mark is None else mark.line + 1) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("jobs"), list) or not data["jobs"]:
        raise InputError("expected a mapping with a non-empty list 'jobs' of job mappings", source=source,
                         field="jobs")
    extra = sorted(str(k) for k in data if k != "jobs")
    if extra:
        raise InputError(f"unknown key(s) {', '.join(extra)} (a job-spec file has only 'jobs')", source=source)
    specs = []
    for i, job in enumerate(data["jobs"]):
        line = lines[i] if i < len(lines) else 1
        if not isinstance(job, Mapping):
            raise InputError("each job is a mapping of canonical columns", source=source, line=line)
        unknown = [str(k) for k in job if str(k) not in COLUMNS]
        if unknown:
            raise InputError(f"unknown key(s) {', '.join(unknown)} (keys: {', '.join(COLUMNS)})", source=source,
                             line=line, field=unknown[0])
        missing = [c for c in REQUIRED_COLUMNS if c not in job]
        if missing:
            raise InputError(f"missing key(s) {', '.join(missing)}", source=source, line=line, field=missing[0])
        record = {str(k): _cell(str(k), v, source, line) for k, v in job.items()}
        specs.append(spec_from_record(record, source, line))
    return finish_specs(specs, source)
