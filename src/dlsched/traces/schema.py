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
=================  ========  ==========================================================================

A job that gives neither ``duration_s`` nor ``iterations`` is an adaptive-model job (Sia/Pollux): it trains
until its model reaches its statistical target.

Every job a reader makes carries ``origin = "<file>:<line>"`` (1-based file line; the header is line 1), so
an error found later (an unknown model, an impossible request) can point at the input line. For Parquet
files the line is the one the row would have in the equivalent CSV (row index + 2).

Values are validated where they enter (:func:`spec_from_record`) and again before they are written
(:func:`check_spec`), so an invalid table never lands on disk and a bad cell is reported as
``InputError(file:line field 'name': ...)``.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

import pandas as pd

from dlsched.core.errors import InputError
from dlsched.core.gpu import KNOWN_GPU_TYPES
from dlsched.core.job import Adaptivity, JobSpec

#: Canonical columns, in the order they are written.
COLUMNS: tuple[str, ...] = (
    "job_id", "submit_time_s", "model", "num_gpus", "batch_size", "min_gpus", "max_gpus", "adaptivity",
    "deadline_s", "user", "duration_s", "iterations", "reference_gpu", "gpu_types", "gpu_unit", "priority",
)
#: Columns a canonical file must have; the others may be left out and take their defaults.
REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time_s", "model", "num_gpus")
#: Separator of the ``gpu_types`` cell (a comma would clash with CSV).
GPU_TYPES_SEP = ";"
#: Control characters (newlines included) are refused in text cells: they would break line numbering.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _pyarrow_available() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


# -- cell parsing ------------------------------------------------------------------------------------------
# Readers hand cells over as strings (CSV) or numbers (DataFrames); each parser accepts both, treats an
# empty cell / None / NaN as "missing", and raises InputError naming the file, line and column.

def is_missing(value: object) -> bool:
    """Whether a cell is empty: None, an all-blank string, or a pandas/NumPy missing value."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() == ""
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def parse_float(value: object, field: str, source: str, line: int | None, *, required: bool = False,
                minimum: float | None = None, positive: bool = False) -> float | None:
    """A finite float, or None for an empty optional cell."""
    if is_missing(value):
        if required:
            raise InputError("missing value", source=source, line=line, field=field)
        return None
    try:
        x = float(value.strip()) if isinstance(value, str) else float(cast(float, value))
    except (TypeError, ValueError):
        raise InputError(f"not a number: {value!r}", source=source, line=line, field=field) from None
    if not math.isfinite(x):
        raise InputError(f"must be finite, got {value!r}", source=source, line=line, field=field)
    if positive and x <= 0:
        raise InputError(f"must be positive, got {value!r}", source=source, line=line, field=field)
    if minimum is not None and x < minimum:
        raise InputError(f"must be >= {minimum:g}, got {value!r}", source=source, line=line, field=field)
    return x


def parse_int(value: object, field: str, source: str, line: int | None, *, required: bool = False,
              minimum: int | None = None) -> int | None:
    """An integer (``"4"`` and ``"4.0"`` both read as 4, ``"4.5"`` is an error), or None if empty."""
    x = parse_float(value, field, source, line, required=required)
    if x is None:
        return None
    if x != int(x):
        raise InputError(f"must be a whole number, got {value!r}", source=source, line=line, field=field)
    n = int(x)
    if minimum is not None and n < minimum:
        raise InputError(f"must be >= {minimum}, got {value!r}", source=source, line=line, field=field)
    return n


def req_float(value: object, field: str, source: str, line: int | None, *, minimum: float | None = None,
              positive: bool = False) -> float:
    """:func:`parse_float` for a required cell (never None)."""
    x = parse_float(value, field, source, line, required=True, minimum=minimum, positive=positive)
    return cast(float, x)


def req_int(value: object, field: str, source: str, line: int | None, *, minimum: int | None = None) -> int:
    """:func:`parse_int` for a required cell (never None)."""
    return cast(int, parse_int(value, field, source, line, required=True, minimum=minimum))


def req_text(value: object, field: str, source: str, line: int | None) -> str:
    """:func:`parse_text` for a required cell (never None)."""
    return cast(str, parse_text(value, field, source, line, required=True))


def parse_text(value: object, field: str, source: str, line: int | None, *, required: bool = False,
               default: str | None = None) -> str | None:
    """A non-empty single-line string kept verbatim (names may contain spaces, commas, quotes)."""
    if is_missing(value):
        if required:
            raise InputError("missing value", source=source, line=line, field=field)
        return default
    text = value if isinstance(value, str) else str(value)
    if _CONTROL.search(text):
        raise InputError(f"control characters are not allowed: {text!r}", source=source, line=line, field=field)
    return text


def parse_adaptivity(value: object, source: str, line: int | None, *,
                     default: Adaptivity = Adaptivity.RIGID) -> Adaptivity:
    if is_missing(value):
        return default
    text = str(value).strip().lower()
    try:
        return Adaptivity(text)
    except ValueError:
        known = ", ".join(a.value for a in Adaptivity)
        raise InputError(f"unknown adaptivity {value!r} (one of: {known})", source=source, line=line,
                         field="adaptivity") from None


def _check_gpu_type(name: str, field: str, source: str, line: int | None) -> str:
    if name not in KNOWN_GPU_TYPES:
        known = ", ".join(sorted(KNOWN_GPU_TYPES))
        raise InputError(f"unknown GPU type {name!r} (known: {known})", source=source, line=line, field=field)
    return name


def parse_gpu_types(value: object, source: str, line: int | None) -> tuple[str, ...]:
    """``"a100;v100"`` -> ``("a100", "v100")``; each name must be a known GPU type."""
    if is_missing(value):
        return ()
    names = [p.strip() for p in str(value).split(GPU_TYPES_SEP)]
    if any(not p for p in names):
        raise InputError(f"empty GPU type in {value!r}", source=source, line=line, field="gpu_types")
    return tuple(_check_gpu_type(p, "gpu_types", source, line) for p in names)


# -- whole-job validation -------------------------------------------------------------------------------------

def check_spec(spec: JobSpec, source: str | None = None, line: int | None = None) -> JobSpec:
    """Reject a job no scheduler could run or no reader could read back; returns the spec unchanged.

    Shared by every reader (after building a spec) and by the writers (before writing), so the rules that
    make a row valid live in one place.
    """
    src = source if source is not None else (spec.origin or f"job {spec.job_id!r}")

    def bad(msg: str, field: str) -> InputError:
        return InputError(msg, source=src, line=line, field=field)

    for name in ("job_id", "model", "user", "reference_gpu"):
        text = getattr(spec, name)
        if not isinstance(text, str) or not text.strip():
            raise bad("must be a non-empty string", name)
        parse_text(text, name, src, line)
    _check_gpu_type(spec.reference_gpu, "reference_gpu", src, line)
    for t in spec.gpu_types:
        if not t or GPU_TYPES_SEP in t:
            raise bad(f"invalid GPU type {t!r}", "gpu_types")
        _check_gpu_type(t, "gpu_types", src, line)
    if not (math.isfinite(spec.submit_time_s) and spec.submit_time_s >= 0):
        raise bad(f"must be a finite time >= 0, got {spec.submit_time_s!r}", "submit_time_s")
    if spec.num_gpus < 1:
        raise bad(f"must be >= 1, got {spec.num_gpus}", "num_gpus")
    if spec.batch_size is not None and spec.batch_size < 1:
        raise bad(f"must be >= 1, got {spec.batch_size}", "batch_size")
    if spec.min_gpus < 1:
        raise bad(f"must be >= 1, got {spec.min_gpus}", "min_gpus")
    if spec.max_gpus is not None and spec.max_gpus < spec.min_gpus:
        raise bad(f"max_gpus {spec.max_gpus} is below min_gpus {spec.min_gpus}", "max_gpus")
    if spec.gpu_unit < 1:
        raise bad(f"must be >= 1, got {spec.gpu_unit}", "gpu_unit")
    if spec.num_gpus % spec.gpu_unit:
        raise bad(f"num_gpus {spec.num_gpus} is not a multiple of gpu_unit {spec.gpu_unit}", "num_gpus")
    if Adaptivity(spec.adaptivity) != Adaptivity.RIGID:
        # The request is the starting allocation of an elastic job, so it has to lie in the job's own range.
        if spec.num_gpus < spec.min_gpus:
            raise bad(f"num_gpus {spec.num_gpus} is below min_gpus {spec.min_gpus}", "num_gpus")
        if spec.max_gpus is not None and spec.num_gpus > spec.max_gpus:
            raise bad(f"num_gpus {spec.num_gpus} is above max_gpus {spec.max_gpus}", "num_gpus")
    for name in ("duration_s", "iterations"):
        v = getattr(spec, name)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise bad(f"must be positive, got {v!r}", name)
    if spec.deadline_s is not None:
        if not math.isfinite(spec.deadline_s):
            raise bad(f"must be finite, got {spec.deadline_s!r}", "deadline_s")
        if spec.deadline_s < spec.submit_time_s:
            raise bad(f"deadline {spec.deadline_s:g} s precedes submission at {spec.submit_time_s:g} s",
                      "deadline_s")
    if not (math.isfinite(spec.priority) and spec.priority > 0):
        raise bad(f"must be positive, got {spec.priority!r}", "priority")
    return spec


def check_unique_ids(specs: Sequence[JobSpec], source: str) -> None:
    """Job ids key everything downstream (records, decisions), so a repeated id is an input error."""
    seen: dict[str, str | None] = {}
    for s in specs:
        if s.job_id in seen:
            first = seen[s.job_id]
            line = _line_of(s.origin)
            raise InputError(f"duplicate job_id {s.job_id!r} (first at {first})", source=source, line=line,
                             field="job_id")
        seen[s.job_id] = s.origin


def _line_of(origin: str | None) -> int | None:
    if origin and ":" in origin:
        tail = origin.rsplit(":", 1)[1]
        if tail.isdigit():
            return int(tail)
    return None


def sort_by_submit(specs: Iterable[JobSpec]) -> list[JobSpec]:
    """Stable sort by submission time: jobs submitted together keep their file order."""
    return sorted(specs, key=lambda s: s.submit_time_s)


# -- records <-> specs ---------------------------------------------------------------------------------------

def spec_from_record(rec: Mapping[str, object], source: str, line: int) -> JobSpec:
    """Build and validate one job from a canonical row (cells as strings or numbers)."""
    def get(name: str) -> object:
        return rec.get(name)

    submit = req_float(get("submit_time_s"), "submit_time_s", source, line, minimum=0.0)
    num_gpus = req_int(get("num_gpus"), "num_gpus", source, line, minimum=1)
    min_gpus = parse_int(get("min_gpus"), "min_gpus", source, line, minimum=1)
    gpu_unit = parse_int(get("gpu_unit"), "gpu_unit", source, line, minimum=1)
    priority = parse_float(get("priority"), "priority", source, line, positive=True)
    reference = parse_text(get("reference_gpu"), "reference_gpu", source, line, default="v100")
    spec = JobSpec(
        job_id=req_text(get("job_id"), "job_id", source, line),
        submit_time_s=submit,
        model=req_text(get("model"), "model", source, line),
        num_gpus=num_gpus,
        batch_size=parse_int(get("batch_size"), "batch_size", source, line, minimum=1),
        min_gpus=1 if min_gpus is None else min_gpus,
        max_gpus=parse_int(get("max_gpus"), "max_gpus", source, line, minimum=1),
        adaptivity=parse_adaptivity(get("adaptivity"), source, line),
        deadline_s=parse_float(get("deadline_s"), "deadline_s", source, line),
        user=parse_text(get("user"), "user", source, line, default="default") or "default",
        duration_s=parse_float(get("duration_s"), "duration_s", source, line, positive=True),
        iterations=parse_float(get("iterations"), "iterations", source, line, positive=True),
        reference_gpu=(reference or "v100").strip(),
        gpu_types=parse_gpu_types(get("gpu_types"), source, line),
        gpu_unit=1 if gpu_unit is None else gpu_unit,
        priority=1.0 if priority is None else priority,
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
    ]


def to_frame(specs: Iterable[JobSpec]) -> pd.DataFrame:
    """The canonical table as a DataFrame (nullable integer columns, NaN for missing floats)."""
    rows = [
        {
            "job_id": s.job_id, "submit_time_s": float(s.submit_time_s), "model": s.model,
            "num_gpus": s.num_gpus, "batch_size": s.batch_size, "min_gpus": s.min_gpus, "max_gpus": s.max_gpus,
            "adaptivity": Adaptivity(s.adaptivity).value, "deadline_s": s.deadline_s, "user": s.user,
            "duration_s": s.duration_s, "iterations": s.iterations, "reference_gpu": s.reference_gpu,
            "gpu_types": GPU_TYPES_SEP.join(s.gpu_types), "gpu_unit": s.gpu_unit, "priority": float(s.priority),
        }
        for s in specs
    ]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in ("num_gpus", "batch_size", "min_gpus", "max_gpus", "gpu_unit"):
        df[col] = df[col].astype("Int64")
    for col in ("submit_time_s", "deadline_s", "duration_s", "iterations", "priority"):
        df[col] = df[col].astype("float64")
    for col in ("job_id", "model", "adaptivity", "user", "reference_gpu", "gpu_types"):
        df[col] = df[col].astype(object)
    return df


def _check_columns(columns: Iterable[str], source: str) -> list[str]:
    cols = [str(c).strip() for c in columns]
    missing = [c for c in REQUIRED_COLUMNS if c not in cols]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)} (canonical columns: {', '.join(COLUMNS)})",
                         source=source, line=1)
    unknown = [c for c in cols if c not in COLUMNS]
    if unknown:
        # Strict on purpose: a misspelt optional column ("deadline") would otherwise be silently ignored.
        raise InputError(f"unknown column(s) {', '.join(unknown)} (canonical columns: {', '.join(COLUMNS)})",
                         source=source, line=1)
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise InputError(f"repeated column(s) {', '.join(dup)}", source=source, line=1)
    return cols


def from_frame(df: pd.DataFrame, source: str, *, first_line: int = 2) -> list[JobSpec]:
    """Jobs from a canonical DataFrame; row ``i`` is reported as line ``first_line + i`` of ``source``."""
    cols = _check_columns(df.columns, source)
    frame = df.copy()
    frame.columns = cols
    specs = [spec_from_record(rec, source, first_line + i)
             for i, rec in enumerate(frame.to_dict(orient="records"))]
    check_unique_ids(specs, source)
    return sort_by_submit(specs)


# -- files ---------------------------------------------------------------------------------------------------

def csv_rows(path: str | os.PathLike[str], *, delimiter: str = ",") -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and ``(line, cells)`` rows of a CSV file, with the file line each row starts on.

    The csv module (not pandas) is used so every row keeps its true line number (blank lines and quoted
    newlines included) and so a row with the wrong number of cells is an error rather than padding.
    Blank lines are skipped.
    """
    source = str(path)
    try:
        fh = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise InputError(f"cannot open trace: {exc.strerror or exc}", source=source) from None
    with fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header: list[str] | None = None
        rows: list[tuple[int, list[str]]] = []
        prev = 0
        try:
            for cells in reader:
                start, prev = prev + 1, reader.line_num
                if not cells or all(not c.strip() for c in cells):
                    continue
                if header is None:
                    header = [c.strip() for c in cells]
                    if header and header[0].startswith("\ufeff"):
                        header[0] = header[0][1:]
                    continue
                if len(cells) != len(header):
                    raise InputError(f"malformed line: {len(cells)} fields, the header has {len(header)}",
                                     source=source, line=start)
                rows.append((start, cells))
        except csv.Error as exc:
            raise InputError(f"malformed CSV: {exc}", source=source, line=reader.line_num) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not a UTF-8 text file ({exc.reason})", source=source) from None
    if header is None:
        raise InputError("empty trace file (no header line)", source=source)
    return header, rows


def read_canonical(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Read a canonical trace (CSV, or Parquet when the name ends in ``.parquet``), sorted by submit time."""
    source = str(path)
    if source.endswith(".parquet"):
        if not _pyarrow_available():
            raise InputError("reading Parquet needs pyarrow, which is not installed; use CSV", source=source)
        try:
            df = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read Parquet: {exc}", source=source) from None
        return from_frame(df, source)
    header, rows = csv_rows(path)
    cols = _check_columns(header, source)
    specs = [spec_from_record(dict(zip(cols, cells, strict=True)), source, line) for line, cells in rows]
    check_unique_ids(specs, source)
    return sort_by_submit(specs)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]):
    """Yield a temp path next to ``path`` and rename it over ``path`` only if the block succeeds.

    A crash or error half-way through writing never leaves a truncated trace behind (a later run would
    otherwise read a silently shorter workload).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; a trace is an ordinary file
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
        if not _pyarrow_available():
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


def parse_trace_options(args: str, spec: str, known: Sequence[str], numeric: Mapping[str, type]) -> dict[str, object]:
    """``key=value,key=value`` options of a generated trace (``synthetic:...``, ``synergy:...``).

    Unknown, repeated or malformed keys are errors naming the trace; ``numeric`` maps keys to int or float.
    """
    out: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in args.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise InputError(f"trace '{spec}': expected key=value, got {item!r}")
        if key not in known:
            raise InputError(f"trace '{spec}': unknown key {key!r} (known: {', '.join(known)})")
        if key in out:
            raise InputError(f"trace '{spec}': key {key!r} given twice")
        try:
            out[key] = numeric[key](value) if key in numeric else value
        except ValueError:
            raise InputError(f"trace '{spec}': {key}={value!r} is not a number") from None
    return out
