"""The canonical job table: one row per :class:`~dlsched.core.JobSpec`, the format every reader converges on.

Every trace dlsched reads (Sia/Pollux workloads, PAL/Blox iteration traces, Gavel traces, Philly logs,
generated ones) becomes a list of ``JobSpec``; the canonical table writes that list to disk so a converted or
generated trace can be inspected, diffed, edited by hand and replayed without the reader that made it.
CSV is the canonical on-disk format (readable anywhere, diff-friendly); Parquet is written and read as well
when ``pyarrow`` happens to be importable, but never required.

Columns, in order (an empty cell means "not given" and takes the default shown):

=================  ========  ==========================================================================
column             default   meaning
=================  ========  ==========================================================================
``job_id``         required  unique name of the job within the trace
``submit_time_s``  required  submission time, seconds from the start of the trace (>= 0)
``model``          required  model / application name (``cifar10``, ``resnet50``, ``philly``, ...)
``num_gpus``       required  requested GPU count (>= 1): a hard requirement for rigid jobs, the starting
                             point for adaptive ones
``batch_size``     empty     requested global batch size (>= 1)
``min_gpus``       1         smallest GPU count a non-rigid job accepts
``max_gpus``       empty     largest GPU count a non-rigid job accepts (empty: no limit of its own)
``adaptivity``     rigid     ``adaptive`` (type, count and batch may change), ``strong-scaling`` (type and
                             count may change, batch fixed) or ``rigid`` (only the type may change)
``deadline_s``     empty     absolute time (seconds from trace start) the job should finish by; must not
                             precede ``submit_time_s``
``user``           default   owner of the job, for per-user fairness
``duration_s``     empty     run time (s) on ``num_gpus`` GPUs of ``reference_gpu`` (duration traces)
``iterations``     empty     total iteration count (PAL/Blox iteration traces)
``reference_gpu``  v100      GPU type ``duration_s`` was measured on
``gpu_types``      empty     ``;``-separated GPU types the job accepts (``a100;v100``); empty means any
``gpu_unit``       1         scale-out unit: GPU counts must be multiples of it (``num_gpus`` included)
``priority``       1.0       scheduling weight (> 0)
``gpu_counts``     empty     ``;``-separated GPU counts an elastic job accepts (``2;4;8``: Hops's
                             user-selectable requirements); ``num_gpus`` must be one of them
``gpu_levels``     empty     with ``min_gpus`` and ``max_gpus`` of an elastic job: at most this many
                             counts spaced evenly between the bounds (read into ``gpu_counts``)
``per_gpu_batch``  false     ``true``: ``batch_size`` is per GPU and the global batch grows with the count
``learning_rates`` empty     ``;``-separated ``count:rate`` pairs (``2:0.1;8:0.4``): the learning rate the
                             user gives for each GPU count it names (Hops section 2.2)
``lr_scaling``     linear    how a count without a rate gets one from the nearest given count below it:
                             ``linear`` (rate x k / k0) or ``sqrt`` (rate x sqrt(k / k0))
=================  ========  ==========================================================================

A job without ``gpu_counts`` or ``gpu_levels`` keeps its old meaning: rigid jobs run on ``num_gpus``,
elastic ones anywhere in ``min_gpus..max_gpus``.

A job that gives neither ``duration_s`` nor ``iterations`` is an adaptive-model job (Sia/Pollux): it trains
until its model reaches its statistical target.

Every job a reader makes carries ``origin = "<file>:<line>"`` (1-based file line; the header is line 1), so
an error found later (an unknown model, an impossible request) can point at the input line. For Parquet
files the line is the one the row would have in the equivalent CSV (row index + 2).

Values are validated where they enter (:func:`spec_from_record`, cell by cell with
:mod:`dlsched.traces.cells`) and again before they are written (:func:`~dlsched.traces.validation.check_spec`),
so an invalid table never lands on disk and a bad cell is reported as ``InputError(file:line field 'name': ...)``.
File handling (line-numbered CSV rows, atomic writes) is :mod:`dlsched.traces.files`.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import cast

import pandas as pd

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec
from dlsched.core.suggest import closest, did_you_mean
from dlsched.traces.cells import (
    GPU_TYPES_SEP,
    level_counts,
    parse_adaptivity,
    parse_bool,
    parse_float,
    parse_gpu_counts,
    parse_gpu_types,
    parse_int,
    parse_learning_rates,
    parse_text,
    req_float,
    req_int,
    req_text,
)
from dlsched.traces.files import atomic_path, csv_rows, pyarrow_available
from dlsched.traces.options import parse_trace_options
from dlsched.traces.validation import check_spec, check_unique_ids, finish_specs

# check_spec and parse_trace_options were defined here once and are still imported from here.
__all__ = ["COLUMNS", "REQUIRED_COLUMNS", "check_spec", "from_frame", "parse_trace_options", "read_canonical",
           "spec_from_record", "strip_origin", "to_frame", "write_trace"]

#: Canonical columns, in the order they are written.
COLUMNS: tuple[str, ...] = (
    "job_id", "submit_time_s", "model", "num_gpus", "batch_size", "min_gpus", "max_gpus", "adaptivity",
    "deadline_s", "user", "duration_s", "iterations", "reference_gpu", "gpu_types", "gpu_unit", "priority",
    "gpu_counts", "gpu_levels", "per_gpu_batch", "learning_rates", "lr_scaling",
)
#: Columns a canonical file must have; the others may be left out and take their defaults.
REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time_s", "model", "num_gpus")


def spec_from_record(rec: Mapping[str, object], source: str, line: int) -> JobSpec:
    """Build and validate one job from a canonical row (cells as strings or numbers)."""
    def get(name: str) -> object:
        return rec.get(name)

    # Ranges are checked once, on the whole job, by check_spec (with the allowed range in the message).
    submit = req_float(get("submit_time_s"), "submit_time_s", source, line)
    num_gpus = req_int(get("num_gpus"), "num_gpus", source, line)
    min_gpus = parse_int(get("min_gpus"), "min_gpus", source, line)
    gpu_unit = parse_int(get("gpu_unit"), "gpu_unit", source, line)
    priority = parse_float(get("priority"), "priority", source, line)
    reference = parse_text(get("reference_gpu"), "reference_gpu", source, line, default="v100")
    max_gpus = parse_int(get("max_gpus"), "max_gpus", source, line)
    adaptivity = parse_adaptivity(get("adaptivity"), source, line)
    counts = parse_gpu_counts(get("gpu_counts"), source, line)
    levels = parse_int(get("gpu_levels"), "gpu_levels", source, line)
    if levels is not None:
        if counts:
            raise InputError("give either gpu_counts or gpu_levels (with min_gpus and max_gpus), not both",
                             source=source, line=line, field="gpu_levels")
        if max_gpus is None:
            raise InputError("gpu_levels needs max_gpus (the upper bound of the levels)", source=source,
                             line=line, field="gpu_levels")
        counts = level_counts(1 if min_gpus is None else min_gpus, max_gpus, levels, source, line)
    spec = JobSpec(
        job_id=req_text(get("job_id"), "job_id", source, line),
        submit_time_s=submit,
        model=req_text(get("model"), "model", source, line),
        num_gpus=num_gpus,
        batch_size=parse_int(get("batch_size"), "batch_size", source, line),
        min_gpus=1 if min_gpus is None else min_gpus,
        max_gpus=max_gpus,
        adaptivity=adaptivity,
        deadline_s=parse_float(get("deadline_s"), "deadline_s", source, line),
        user=parse_text(get("user"), "user", source, line, default="default") or "default",
        duration_s=parse_float(get("duration_s"), "duration_s", source, line),
        iterations=parse_float(get("iterations"), "iterations", source, line),
        reference_gpu=(reference or "v100").strip(),
        gpu_types=parse_gpu_types(get("gpu_types"), source, line),
        gpu_unit=1 if gpu_unit is None else gpu_unit,
        priority=1.0 if priority is None else priority,
        gpu_counts=counts,
        per_gpu_batch=parse_bool(get("per_gpu_batch"), "per_gpu_batch", source, line),
        learning_rates=parse_learning_rates(get("learning_rates"), source, line),
        lr_scaling=(parse_text(get("lr_scaling"), "lr_scaling", source, line, default="linear") or "linear").strip(),
        origin=f"{source}:{line}",
    )
    return check_spec(spec, source, line)


def _cells(spec: JobSpec) -> list[str]:
    """One CSV row; floats use ``repr`` so every value reads back bit-for-bit."""
    def num(x: float | int | None) -> str:
        if x is None:
            return ""
        return repr(float(x)) if isinstance(x, float) else str(int(x))

    return [
        spec.job_id, num(float(spec.submit_time_s)), spec.model, num(spec.num_gpus), num(spec.batch_size),
        num(spec.min_gpus), num(spec.max_gpus), Adaptivity(spec.adaptivity).value,
        num(None if spec.deadline_s is None else float(spec.deadline_s)), spec.user,
        num(None if spec.duration_s is None else float(spec.duration_s)),
        num(None if spec.iterations is None else float(spec.iterations)), spec.reference_gpu,
        GPU_TYPES_SEP.join(spec.gpu_types), num(spec.gpu_unit), num(float(spec.priority)),
        GPU_TYPES_SEP.join(str(k) for k in spec.gpu_counts), "", "true" if spec.per_gpu_batch else "",
        _rates(spec.learning_rates), "" if spec.lr_scaling == "linear" else spec.lr_scaling,
    ]


def _rates(rates: tuple[tuple[int, float], ...]) -> str:
    """The ``learning_rates`` cell: ``count:rate`` pairs, rates with ``repr`` so they read back exactly."""
    return GPU_TYPES_SEP.join(f"{k}:{lr!r}" for k, lr in rates)


def to_frame(specs: Iterable[JobSpec]) -> pd.DataFrame:
    """The canonical table as a DataFrame (nullable integer columns, NaN for missing floats)."""
    rows = [
        {
            "job_id": s.job_id, "submit_time_s": float(s.submit_time_s), "model": s.model,
            "num_gpus": s.num_gpus, "batch_size": s.batch_size, "min_gpus": s.min_gpus, "max_gpus": s.max_gpus,
            "adaptivity": Adaptivity(s.adaptivity).value, "deadline_s": s.deadline_s, "user": s.user,
            "duration_s": s.duration_s, "iterations": s.iterations, "reference_gpu": s.reference_gpu,
            "gpu_types": GPU_TYPES_SEP.join(s.gpu_types), "gpu_unit": s.gpu_unit, "priority": float(s.priority),
            "gpu_counts": GPU_TYPES_SEP.join(str(k) for k in s.gpu_counts), "gpu_levels": None,
            "per_gpu_batch": s.per_gpu_batch, "learning_rates": _rates(s.learning_rates),
            "lr_scaling": s.lr_scaling,
        }
        for s in specs
    ]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in ("num_gpus", "batch_size", "min_gpus", "max_gpus", "gpu_unit", "gpu_levels"):
        df[col] = df[col].astype("Int64")
    for col in ("submit_time_s", "deadline_s", "duration_s", "iterations", "priority"):
        df[col] = df[col].astype("float64")
    for col in ("job_id", "model", "adaptivity", "user", "reference_gpu", "gpu_types", "gpu_counts",
                "learning_rates", "lr_scaling"):
        df[col] = df[col].astype(object)
    return df


def _check_columns(columns: Iterable[str], source: str) -> list[str]:
    cols = [str(c).strip() for c in columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in cols]
    unknown = [c for c in cols if c not in COLUMNS]
    if missing:
        near = next(((u, m) for m in missing for u in unknown if closest(u, [m]) == m), None)
        hint = f"; the file has '{near[0]}': did you mean '{near[1]}'?" if near else ""
        raise InputError(f"missing column(s) {', '.join(missing)}{hint} (canonical columns: {', '.join(COLUMNS)})",
                         source=source, line=1)
    if unknown:
        # Strict on purpose: a misspelt optional column ("deadline") would otherwise be silently ignored.
        raise InputError(f"unknown column(s) {', '.join(unknown)}{did_you_mean(unknown[0], COLUMNS)} (canonical "
                         f"columns: {', '.join(COLUMNS)})", source=source, line=1)
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise InputError(f"repeated column(s) {', '.join(dup)}", source=source, line=1)
    return cols


def from_frame(df: pd.DataFrame, source: str, *, first_line: int = 2) -> list[JobSpec]:
    """Jobs from a canonical DataFrame; row ``i`` is reported as line ``first_line + i`` of ``source``."""
    cols = _check_columns(df.columns, source)
    frame = df.copy()
    frame.columns = cols
    # the columns were just set to the (str) names in ``cols``; pandas-stubs types record keys as Hashable
    records = cast(list[dict[str, object]], frame.to_dict(orient="records"))
    specs = [spec_from_record(rec, source, first_line + i) for i, rec in enumerate(records)]
    return finish_specs(specs, source)



def read_canonical(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Read a canonical trace (CSV, or Parquet when the name ends in ``.parquet``), sorted by submit time."""
    source = str(path)
    if source.endswith(".parquet"):
        if not pyarrow_available():
            raise InputError("reading Parquet needs pyarrow, which is not installed; use CSV", source=source)
        try:
            df = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read Parquet: {exc}", source=source) from None
        return from_frame(df, source)
    header, rows = csv_rows(path)
    cols = _check_columns(header, source)
    specs = [spec_from_record(dict(zip(cols, cells, strict=True)), source, line) for line, cells in rows]
    return finish_specs(specs, source)



def write_trace(specs: Iterable[JobSpec], path: str | os.PathLike[str]) -> Path:
    """Write jobs as a canonical trace (CSV; Parquet if the name ends in ``.parquet``), atomically.

    Every job is validated first, so what is written always reads back; rows keep the given order.
    """
    specs = list(specs)
    for s in specs:
        check_spec(s)
    check_unique_ids(specs, str(path))
    target = Path(path)
    if target.suffix == ".parquet":
        if not pyarrow_available():
            raise InputError("writing Parquet needs pyarrow, which is not installed; use a .csv name",
                             source=str(path))
        with atomic_path(target) as tmp:
            to_frame(specs).to_parquet(tmp, index=False)
        return target
    with atomic_path(target) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(COLUMNS)
        for s in specs:
            writer.writerow(_cells(s))
    return target


def strip_origin(specs: Iterable[JobSpec]) -> list[JobSpec]:
    """Specs without their origin (for comparing jobs read from different files)."""
    return [replace(s, origin=None) for s in specs]

