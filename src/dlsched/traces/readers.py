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

import ast
import functools
import gzip
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec
from dlsched.traces.schema import (
    check_spec,
    check_unique_ids,
    csv_rows,
    parse_int,
    parse_text,
    read_canonical,
    req_float,
    req_int,
    sort_by_submit,
)

PathLike = str | os.PathLike[str]

#: Accepted formats and how each is recognised, for the "unknown format" error.
FORMATS: dict[str, str] = {
    "canonical": "CSV with columns job_id,submit_time_s,model,num_gpus,... (dlsched canonical)",
    "sia": "CSV name,time,application,num_replicas,batch_size (Sia/Pollux workloads)",
    "pal": "CSV job_id,num_gpus,submit_time,duration,model[,batch_size] (PAL/Blox; duration = iterations)",
    "philly": "CSV timestamp,duration,num_gpus[,...] (Philly-style log)",
    "tiresias": "CSV job_id,num_gpu,submit_time,iterations,model_name,duration[,interval] (Tiresias)",
    "gavel": "tab-separated, no header, 7 fields (msr) or 10 fields (Gavel), optionally gzipped",
}

#: Columns that identify each CSV format (all must be present); checked in this order.
_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    ("canonical", frozenset({"job_id", "submit_time_s", "model", "num_gpus"})),
    ("sia", frozenset({"name", "time", "application", "num_replicas"})),
    ("pal", frozenset({"job_id", "num_gpus", "submit_time", "duration", "model"})),
    ("tiresias", frozenset({"job_id", "num_gpu", "submit_time", "model_name", "duration"})),
    ("philly", frozenset({"timestamp", "duration", "num_gpus"})),
)

_GZIP_MAGIC = b"\x1f\x8b"


# -- shared helpers ---------------------------------------------------------------------------------------------

def _open_text(path: PathLike) -> str:
    """The whole file as text, un-gzipping when the file starts with the gzip magic bytes."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot open trace: {exc.strerror or exc}", source=source) from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(f"corrupt gzip file: {exc}", source=source) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not a UTF-8 text file ({exc.reason})", source=source) from None


def _first_line(path: PathLike) -> str:
    """The first non-blank line (plain files are not read further; gzip files are small)."""
    source = str(path)
    try:
        with open(path, "rb") as fh:
            if fh.read(2) == _GZIP_MAGIC:
                lines: list[str] = _open_text(path).splitlines()
            else:
                fh.seek(0)
                lines = []
                for raw in fh:
                    if raw.strip():
                        lines = [raw.decode("utf-8-sig", errors="replace")]
                        break
    except OSError as exc:
        raise InputError(f"cannot open trace: {exc.strerror or exc}", source=source) from None
    for line in lines:
        if line.strip():
            return line.rstrip("\r\n")
    raise InputError("empty trace file", source=source)


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


def _finish(specs: list[JobSpec], source: str) -> list[JobSpec]:
    check_unique_ids(specs, source)
    return sort_by_submit(specs)


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
    return _finish(specs, source)


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
    return _finish(specs, source)


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
    return _finish(specs, source)


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
    return _finish(specs, source)


# -- Gavel --------------------------------------------------------------------------------------------------------

#: Gavel job-type families -> the short model label dlsched uses.
GAVEL_MODELS: dict[str, str] = {
    "ResNet-18": "resnet18", "ResNet-50": "resnet50", "Transformer": "transformer", "LM": "lm",
    "Recommendation": "recommendation", "A3C": "a3c", "CycleGAN": "cyclegan",
}
_GAVEL_TYPE = re.compile(r"^(?P<base>.+?)(?:\s*\(batch size (?P<bs>\d+)\))?$")
#: Field positions: (job_type, total_steps, scale_factor, arrival, priority_weight or None, SLO or None).
_GAVEL_LAYOUT: dict[int, tuple[int, int, int, int, int | None, int | None]] = {
    10: (0, 5, 6, 9, 7, 8),
    7: (0, 4, 6, 5, None, None),
}
#: Where the throughput file lives inside the data directory.
GAVEL_THROUGHPUTS = Path("gavel") / "simulation_throughputs.json"

StepsBasis = Literal["auto", "one-gpu", "scale-factor"]


def gavel_model(job_type: str) -> tuple[str, int | None]:
    """``"ResNet-50 (batch size 64)"`` -> ``("resnet50", 64)``; ``"A3C"`` -> ``("a3c", None)``."""
    m = _GAVEL_TYPE.match(job_type.strip())
    base = m.group("base").strip() if m else job_type.strip()
    if base not in GAVEL_MODELS:
        raise KeyError(base)
    bs = m.group("bs") if m else None
    return GAVEL_MODELS[base], (int(bs) if bs else None)


@functools.lru_cache(maxsize=4)
def _load_throughputs(path: str, mtime_ns: int) -> dict[tuple[str, int], float]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read Gavel throughputs: {exc}", source=path) from None
    if "v100" not in data:
        raise InputError("no 'v100' section in Gavel throughputs", source=path)
    out: dict[tuple[str, int], float] = {}
    for key, entry in data["v100"].items():
        try:
            job_type, scale = ast.literal_eval(key)
            value = float(entry["null"])
        except (ValueError, SyntaxError, TypeError, KeyError):
            raise InputError(f"unexpected entry {key!r} in the 'v100' section", source=path) from None
        out[(str(job_type), int(scale))] = value
    return out


def gavel_throughputs(path: PathLike | None = None) -> tuple[dict[tuple[str, int], float], str]:
    """Isolated V100 throughputs (steps/s) by ``(job_type, scale_factor)``, and the file they came from."""
    if path is None:
        from dlsched.datadir import require_data

        path = require_data(GAVEL_THROUGHPUTS, "Gavel throughputs (needed to turn Gavel steps into time)")
    p = Path(path)
    if not p.is_file():
        raise InputError("Gavel throughput file not found (needed to turn Gavel steps into time)",
                         source=str(p))
    return _load_throughputs(str(p), p.stat().st_mtime_ns), str(p)


def read_gavel_trace(path: PathLike, *, throughputs: PathLike | None = None,
                     steps_basis: StepsBasis = "auto") -> list[JobSpec]:
    """Gavel trace: tab-separated, 10 fields (physical-cluster / current) or 7 fields (older msr format).

    Gavel gives work as ``total_steps``; dlsched's duration jobs need a run time, so
    ``duration_s = total_steps / throughput`` with the isolated V100 throughput (steps/s) from
    ``gavel/simulation_throughputs.json`` (or ``throughputs``). ``steps_basis`` picks which throughput:

    * ``scale-factor``: the job's own ``(job_type, scale_factor)`` entry, as Gavel's ``generate_trace.py``
      computes ``total_steps``; an unmeasured pair is an error.
    * ``one-gpu``: the ``(job_type, 1)`` entry. The msr traces were built this way: their
      ``total_steps / tput(type, 1)`` matches the Philly durations of the same jobs at every scale factor
      (median ratio about 1.2 at 1, 2, 4 and 8 GPUs), while ``/ tput(type, scale)`` makes 8-GPU jobs about
      5x shorter than in Philly; they also have scale factors (12 to 64) and single-GPU-only job types at
      several GPUs that Gavel never measured.
    * ``auto`` (default): ``one-gpu`` for 7-field files and ``scale-factor`` for 10-field files.

    Jobs are numbered in file order (``"0"``, ``"1"``, ...), as Gavel numbers them. The 10-field format's
    ``priority_weight`` becomes ``priority`` and a positive ``SLO`` becomes
    ``deadline_s = arrival + SLO * duration_s`` (Gavel's definition); ``SLO <= 0`` means none.
    """
    source = str(path)
    table, tput_source = gavel_throughputs(throughputs)
    text = _open_text(path)
    specs: list[JobSpec] = []
    width: int | None = None
    index = 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.split("\t")
        if width is None:
            if len(fields) not in _GAVEL_LAYOUT:
                raise InputError(f"malformed line: {len(fields)} tab-separated fields, expected 7 (msr) or 10 "
                                 "(Gavel)", source=source, line=line)
            width = len(fields)
        elif len(fields) != width:
            raise InputError(f"malformed line: {len(fields)} tab-separated fields, earlier lines have {width}",
                             source=source, line=line)
        i_type, i_steps, i_scale, i_arrival, i_prio, i_slo = _GAVEL_LAYOUT[width]
        job_type = fields[i_type].strip()
        try:
            model, batch = gavel_model(job_type)
        except KeyError:
            raise InputError(f"unknown Gavel job type {job_type!r} (known families: {', '.join(GAVEL_MODELS)})",
                             source=source, line=line, field="job_type") from None
        steps = req_float(fields[i_steps], "total_steps", source, line, positive=True)
        scale = req_int(fields[i_scale], "scale_factor", source, line, minimum=1)
        arrival = req_float(fields[i_arrival], "arrival_time", source, line, minimum=0.0)
        basis = steps_basis if steps_basis != "auto" else ("one-gpu" if width == 7 else "scale-factor")
        key = (job_type, 1 if basis == "one-gpu" else scale)
        tput = table.get(key)
        if tput is None or not tput > 0:
            raise InputError(f"no measured V100 throughput for {key!r} in {tput_source}", source=source, line=line,
                             field="job_type")
        duration = steps / tput
        priority = 1.0
        deadline: float | None = None
        if i_prio is not None:
            priority = req_float(fields[i_prio], "priority_weight", source, line, positive=True)
        if i_slo is not None:
            slo = req_float(fields[i_slo], "SLO", source, line)
            if slo > 0:
                deadline = arrival + slo * duration
        spec = JobSpec(
            job_id=str(index), submit_time_s=arrival, model=model, num_gpus=scale,
            batch_size=batch, adaptivity=Adaptivity.RIGID, deadline_s=deadline, duration_s=duration,
            reference_gpu="v100", priority=priority, origin=f"{source}:{line}",
        )
        specs.append(check_spec(spec, source, line))
        index += 1
    if width is None:
        raise InputError("empty trace file", source=source)
    return _finish(specs, source)


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
    first = _first_line(path)
    if "\t" in first and len(first.split("\t")) in _GAVEL_LAYOUT:
        return "gavel"
    header = {c.strip().lstrip("\ufeff") for c in first.split(",")}
    for name, cols in _SIGNATURES:
        if cols <= header:
            return name
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
    }
    return readers[fmt]()
