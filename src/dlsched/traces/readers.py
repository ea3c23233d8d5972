"""Readers for the trace formats of the systems dlsched compares against; each returns canonical jobs.

Every reader validates every row and raises :class:`~dlsched.core.InputError` naming the file, the line
(1-based, header = line 1) and the column at fault, so a bad trace fails at load time with one clear line
rather than as a strange simulation result. Every reader returns the jobs sorted by submission time (stable:
jobs submitted together keep their file order) and sets ``JobSpec.origin = "<file>:<line>"``.

Formats (detected by :func:`detect_format` from the header, or from tab separation for Gavel):

* ``sia``: Sia/Pollux workloads ``name,time,application,num_replicas,batch_size``. The jobs are the
  adaptive Sia/Pollux models, so they are ADAPTIVE unless the caller forces another adaptivity; the
  request is the starting point (``min_gpus`` 1, no ``max_gpus``).
* ``pal``: PAL/Blox traces ``job_id,num_gpus,submit_time,duration,model[,batch_size]``. PAL's simulator
  uses ``duration`` as the total *iteration count*, so it becomes ``iterations``; rigid.
* ``gavel``: Gavel traces, tab-separated, no header, 10 fields (current ``utils.parse_trace``) or the
  older 7-field msr format; ``.gz`` files are read transparently. Gavel gives ``total_steps``, converted to
  a V100 run time with Gavel's measured isolated throughputs (see :func:`read_gavel_trace`); rigid.
* ``philly``: Philly-style logs ``timestamp,duration,num_gpus[,...]`` with ISO timestamps or numeric
  seconds; submit times become relative to the earliest job; rigid, model ``philly``, reference V100.
* ``tiresias``: the Tiresias simulator trace ``job_id,num_gpu,submit_time,iterations,model_name,duration,...``;
  durations (s) on the reference GPU, rigid.
* ``canonical``: dlsched's own table (:mod:`dlsched.traces.schema`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec
from dlsched.core.suggest import closest
from dlsched.traces.cells import parse_int, parse_text, req_float, req_int
from dlsched.traces.files import PathLike, csv_rows, first_line
from dlsched.traces.gavel import gavel_model, looks_like_gavel, read_gavel_trace
from dlsched.traces.schema import read_canonical
from dlsched.traces.validation import check_spec, finish_specs
from dlsched.traces.yaml_jobs import is_yaml_trace, read_yaml_jobs

# The Gavel reader lives in dlsched.traces.gavel; these names are still imported from here.
__all__ = ["FORMATS", "PathLike", "detect_format", "gavel_model", "read_gavel_trace", "read_pal_trace",
           "read_philly_log", "read_sia_workload", "read_tiresias_trace", "read_trace"]

#: Accepted formats and how each is recognised, for the "unknown format" error.
FORMATS: dict[str, str] = {
    "canonical": "CSV with columns job_id,submit_time_s,model,num_gpus,... (dlsched canonical)",
    "sia": "CSV name,time,application,num_replicas,batch_size (Sia/Pollux workloads)",
    "pal": "CSV job_id,num_gpus,submit_time,duration,model[,batch_size] (PAL/Blox; duration = iterations)",
    "philly": "CSV timestamp,duration,num_gpus[,...] (Philly-style log)",
    "tiresias": "CSV job_id,num_gpu,submit_time,iterations,model_name,duration[,interval] (Tiresias)",
    "gavel": "tab-separated, no header, 7 fields (msr) or 10 fields (Gavel), optionally gzipped",
    "yaml": "a .yaml/.yml file of job specs: 'jobs:' and a mapping per job keyed by the canonical columns",
}

#: Columns that identify each CSV format (all must be present); checked in this order.
_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    ("canonical", frozenset({"job_id", "submit_time_s", "model", "num_gpus"})),
    ("sia", frozenset({"name", "time", "application", "num_replicas"})),
    ("pal", frozenset({"job_id", "num_gpus", "submit_time", "duration", "model"})),
    ("tiresias", frozenset({"job_id", "num_gpu", "submit_time", "model_name", "duration"})),
    ("philly", frozenset({"timestamp", "duration", "num_gpus"})),
)


# -- shared helpers ---------------------------------------------------------------------------------------------

def _require(header: Sequence[str], required: Sequence[str], source: str, fmt: str) -> None:
    for col in required:
        if col not in header:
            raise InputError(f"missing column '{col}' ({FORMATS[fmt]})", source=source, line=1, field=col)


def _text(value: str | None, field: str, source: str, line: int, *, default: str | None = None) -> str:
    """A stripped, non-empty text cell (foreign formats pad cells with spaces now and then)."""
    text = parse_text(value, field, source, line, required=default is None, default=default)
    text = (text or "").strip()
    if not text:
        if default is not None:
            return default
        raise InputError("missing value", source=source, line=line, field=field)
    return text


def _rows(path: PathLike, required: Sequence[str], fmt: str) -> list[tuple[int, dict[str, str]]]:
    header, rows = csv_rows(path)
    _require(header, required, str(path), fmt)
    return [(line, dict(zip(header, cells, strict=True))) for line, cells in rows]


# -- Sia / Pollux -------------------------------------------------------------------------------------------------

def read_sia_workload(path: PathLike, *, adaptivity: Adaptivity | str = Adaptivity.ADAPTIVE) -> list[JobSpec]:
    """Sia/Pollux workload CSV (``name,time,application,num_replicas,batch_size``).

    ``adaptivity`` defaults to ADAPTIVE because these jobs are the elastic Sia/Pollux models; pass
    ``strong-scaling`` or ``rigid`` to replay the same arrivals with less freedom (Sia section 3.3.4).
    """
    source = str(path)
    mode = _adaptivity(adaptivity)
    specs = []
    for line, row in _rows(path, ("name", "time", "application", "num_replicas"), "sia"):
        spec = JobSpec(
            job_id=_text(row["name"], "name", source, line),
            submit_time_s=req_float(row["time"], "time", source, line, minimum=0.0),
            model=_text(row["application"], "application", source, line),
            num_gpus=req_int(row["num_replicas"], "num_replicas", source, line, minimum=1),
            batch_size=parse_int(row.get("batch_size"), "batch_size", source, line, minimum=1),
            min_gpus=1,
            max_gpus=None,
            adaptivity=mode,
            origin=f"{source}:{line}",
        )
        specs.append(check_spec(spec, source, line))
    return finish_specs(specs, source)


def _adaptivity(value: Adaptivity | str) -> Adaptivity:
    try:
        return Adaptivity(str(value).strip().lower())
    except ValueError:
        known = ", ".join(a.value for a in Adaptivity)
        raise InputError(f"unknown adaptivity {value!r} (one of: {known})", field="adaptivity") from None


# -- PAL / Blox ---------------------------------------------------------------------------------------------------

def read_pal_trace(path: PathLike) -> list[JobSpec]:
    """PAL/Blox trace (``job_id,num_gpus,submit_time,duration,model[,batch_size]``).

    PAL's simulator sets ``job_total_iteration = duration``: the column is an iteration count whose
    per-iteration time comes from PAL's per-model constants, so it becomes ``iterations`` here.
    """
    source = str(path)
    specs = []
    for line, row in _rows(path, ("job_id", "num_gpus", "submit_time", "duration", "model"), "pal"):
        spec = JobSpec(
            job_id=_text(row["job_id"], "job_id", source, line),
            submit_time_s=req_float(row["submit_time"], "submit_time", source, line, minimum=0.0),
            model=_text(row["model"], "model", source, line),
            num_gpus=req_int(row["num_gpus"], "num_gpus", source, line, minimum=1),
            batch_size=parse_int(row.get("batch_size"), "batch_size", source, line, minimum=1),
            iterations=req_float(row["duration"], "duration", source, line, positive=True),
            adaptivity=Adaptivity.RIGID,
            origin=f"{source}:{line}",
        )
        specs.append(check_spec(spec, source, line))
    return finish_specs(specs, source)


# -- Tiresias ---------------------------------------------------------------------------------------------------

def read_tiresias_trace(path: PathLike) -> list[JobSpec]:
    """Tiresias simulator trace (``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``).

    Only ``duration`` (s) is kept: the Tiresias models (vgg, inception, alexnet, ...) have no per-iteration
    constants in dlsched, so the iteration count could not be turned into time. The Tiresias testbed ran
    P100s, which dlsched has no profile for; the durations are taken as V100 times (``reference_gpu``).
    """
    source = str(path)
    specs = []
    for line, row in _rows(path, ("job_id", "num_gpu", "submit_time", "model_name", "duration"), "tiresias"):
        spec = JobSpec(
            job_id=_text(row["job_id"], "job_id", source, line),
            submit_time_s=req_float(row["submit_time"], "submit_time", source, line, minimum=0.0),
            model=_text(row["model_name"], "model_name", source, line),
            num_gpus=req_int(row["num_gpu"], "num_gpu", source, line, minimum=1),
            duration_s=req_float(row["duration"], "duration", source, line, positive=True),
            adaptivity=Adaptivity.RIGID,
            reference_gpu="v100",
            origin=f"{source}:{line}",
        )
        specs.append(check_spec(spec, source, line))
    return finish_specs(specs, source)


# -- Philly-style logs --------------------------------------------------------------------------------------------

def _timestamp(value: str, source: str, line: int) -> tuple[str, float]:
    """``("seconds", x)`` for a number, ``("iso", epoch seconds)`` for an ISO date-time (naive = UTC)."""
    text = value.strip()
    if not text:
        raise InputError("missing value", source=source, line=line, field="timestamp")
    try:
        x = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(x) or x < 0:
            raise InputError(f"must be a finite time >= 0, got {value!r}", source=source, line=line,
                             field="timestamp")
        return "seconds", x
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"not a number of seconds or an ISO date-time: {value!r}", source=source, line=line,
                         field="timestamp") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return "iso", dt.timestamp()


def read_philly_log(path: PathLike, *, model: str = "philly") -> list[JobSpec]:
    """Philly-style job log (``timestamp,duration,num_gpus`` plus optional columns).

    ``timestamp`` is an ISO date-time (as in Sia's ``philly.csv``) or seconds; every job's submit time is
    made relative to the earliest one, so the trace starts at 0. ``duration`` (s) is the run time on the
    requested GPUs, taken to be V100s. Optional columns used when present: ``job_id`` (else the 0-based row
    index), ``model``, ``batch_size``, ``user`` or else ``cluster`` (the Philly virtual cluster, i.e. the team
    that owns the job) as the user. Other columns (``gpu_time``, ...) are ignored.
    """
    source = str(path)
    raw: list[tuple[int, dict[str, str], float]] = []
    kind: str | None = None
    for line, row in _rows(path, ("timestamp", "duration", "num_gpus"), "philly"):
        this_kind, t = _timestamp(row["timestamp"], source, line)
        if kind is None:
            kind = this_kind
        elif this_kind != kind:
            raise InputError(f"mixes {kind} and {this_kind} timestamps", source=source, line=line,
                             field="timestamp")
        raw.append((line, row, t))
    if not raw:
        return []
    t0 = min(t for _, _, t in raw)
    specs = []
    for index, (line, row, t) in enumerate(raw):
        user = row.get("user") or row.get("cluster") or "default"
        job_id = row.get("job_id", "").strip() or str(index)
        spec = JobSpec(
            job_id=_text(job_id, "job_id", source, line),
            submit_time_s=t - t0,
            model=_text(row.get("model"), "model", source, line, default=model),
            num_gpus=req_int(row["num_gpus"], "num_gpus", source, line, minimum=1),
            batch_size=parse_int(row.get("batch_size"), "batch_size", source, line, minimum=1),
            duration_s=req_float(row["duration"], "duration", source, line, positive=True),
            user=_text(user, "user", source, line, default="default"),
            adaptivity=Adaptivity.RIGID,
            reference_gpu="v100",
            origin=f"{source}:{line}",
        )
        specs.append(check_spec(spec, source, line))
    return finish_specs(specs, source)


# -- detection and dispatch ---------------------------------------------------------------------------------

def detect_format(path: PathLike) -> str:
    """The format name of a trace file (a key of :data:`FORMATS`), from its first line."""
    source = str(path)
    if not Path(path).exists():
        raise InputError("trace file not found", source=source)
    if Path(path).is_dir():
        raise InputError("is a directory, not a trace file", source=source)
    if source.endswith(".parquet"):
        return "canonical"
    if is_yaml_trace(path):
        return "yaml"
    first = first_line(path)
    if looks_like_gavel(first):
        return "gavel"
    header = {c.strip().lstrip("\ufeff") for c in first.split(",")}
    for name, cols in _SIGNATURES:
        if cols <= header:
            return name
    # A header that has most of one format's columns is that format with columns missing: say which.
    best, cols = max(_SIGNATURES, key=lambda sig: len(sig[1] & header) / len(sig[1]))
    if len(cols & header) * 2 >= len(cols):
        missing = [c for c in sorted(cols) if c not in header]
        near = next(((h, m) for m in missing for h in sorted(header - cols) if closest(h, [m]) == m), None)
        hint = f" (the header has '{near[0]}': did you mean '{near[1]}'?)" if near else ""
        raise InputError(f"missing column(s) {', '.join(missing)}{hint}: the header looks like the {best} format, "
                         f"which needs {', '.join(sorted(cols))} ({FORMATS[best]})", source=source, line=1,
                         field=missing[0])
    accepted = "; ".join(f"{k}: {v}" for k, v in FORMATS.items())
    raise InputError(f"unrecognised trace header {first[:120]!r}; accepted formats: {accepted}",
                     source=source, line=1)


def read_trace(path: PathLike, *, adaptivity: Adaptivity | str | None = None,
               throughputs: PathLike | None = None) -> list[JobSpec]:
    """Read any supported trace file, detecting its format; jobs sorted by submit time.

    ``adaptivity`` overrides the adaptivity of Sia/Pollux workloads (the only format whose jobs can be
    elastic); ``throughputs`` points Gavel traces at another throughput JSON.
    """
    fmt = detect_format(path)
    if adaptivity is not None and fmt != "sia":
        # Silently ignoring it would run a rigid trace while the user believes it is elastic.
        raise InputError(f"an adaptivity override applies only to Sia/Pollux workloads, not to {fmt} traces",
                         source=str(path), field="adaptivity")
    readers: dict[str, Callable[[], list[JobSpec]]] = {
        "canonical": lambda: read_canonical(path),
        "sia": lambda: read_sia_workload(path, adaptivity=adaptivity or Adaptivity.ADAPTIVE),
        "pal": lambda: read_pal_trace(path),
        "tiresias": lambda: read_tiresias_trace(path),
        "philly": lambda: read_philly_log(path),
        "gavel": lambda: read_gavel_trace(path, throughputs=throughputs),
        "yaml": lambda: read_yaml_jobs(path),
    }
    return readers[fmt]()
