"""Gavel traces: tab-separated job lists whose work is given in steps, turned into V100 run times.

Gavel gives work as ``total_steps``; dlsched's duration jobs need a run time, so each job's steps are
divided by Gavel's own isolated V100 throughput for its job type (``gavel/simulation_throughputs.json`` in
the data directory). Two layouts exist: the current 10-field one and the older 7-field msr one.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path
from typing import Literal

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec
from dlsched.traces.cells import req_float, req_int
from dlsched.traces.files import PathLike, read_text
from dlsched.traces.validation import check_spec, finish_specs

#: Gavel job-type families -> the short model label dlsched uses.
GAVEL_MODELS: dict[str, str] = {
    "ResNet-18": "resnet18", "ResNet-50": "resnet50", "Transformer": "transformer", "LM": "lm",
    "Recommendation": "recommendation", "A3C": "a3c", "CycleGAN": "cyclegan",
}
_GAVEL_TYPE = re.compile(r"^(?P<base>.+?)(?:\s*\(batch size (?P<bs>\d+)\))?$")
#: Field positions: (job_type, total_steps, scale_factor, arrival, priority_weight or None, SLO or None).
GAVEL_LAYOUT: dict[int, tuple[int, int, int, int, int | None, int | None]] = {
    10: (0, 5, 6, 9, 7, 8),
    7: (0, 4, 6, 5, None, None),
}
#: Where the throughput file lives inside the data directory.
GAVEL_THROUGHPUTS = Path("gavel") / "simulation_throughputs.json"

StepsBasis = Literal["auto", "one-gpu", "scale-factor"]

def looks_like_gavel(first_line: str) -> bool:
    """Whether a trace's first line is a Gavel line (tab-separated, 7 or 10 fields)."""
    return "\t" in first_line and len(first_line.split("\t")) in GAVEL_LAYOUT


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
    text = read_text(path)
    specs: list[JobSpec] = []
    width: int | None = None
    index = 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.split("\t")
        if width is None:
            if len(fields) not in GAVEL_LAYOUT:
                raise InputError(f"malformed line: {len(fields)} tab-separated fields, expected 7 (msr) or 10 "
                                 "(Gavel)", source=source, line=line)
            width = len(fields)
        elif len(fields) != width:
            raise InputError(f"malformed line: {len(fields)} tab-separated fields, earlier lines have {width}",
                             source=source, line=line)
        i_type, i_steps, i_scale, i_arrival, i_prio, i_slo = GAVEL_LAYOUT[width]
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
    return finish_specs(specs, source)
