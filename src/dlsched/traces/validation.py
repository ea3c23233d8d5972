"""The rules every job must satisfy, whoever made it: readers check after parsing, writers before writing.

Keeping them in one place means a trace dlsched writes always reads back, and every reader rejects the
same impossible requests with the same message. The numeric ranges (:data:`~dlsched.traces.cells.JOB_RANGES`) follow from what a
trace is: it spans at most a year, so submit times lie in [0, 1 year] and run times in (0, 1 year]; counts
are bounded by the largest cluster a file may describe. A value outside them would stall the simulator (a
submit time of 1e17 s is a trillion empty rounds) and is refused with the range in the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dlsched.core.errors import InputError
from dlsched.core.job import LR_SCALING_RULES, Adaptivity, JobSpec
from dlsched.traces.cells import (
    GPU_TYPES_SEP,
    JOB_RANGES,
    LEARNING_RATE,
    check_gpu_type,
    out_of_range,
    parse_text,
)


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
    check_gpu_type(spec.reference_gpu, "reference_gpu", src, line)
    for t in spec.gpu_types:
        if not t or GPU_TYPES_SEP in t:
            raise bad(f"invalid GPU type {t!r}", "gpu_types")
        check_gpu_type(t, "gpu_types", src, line)
    for name in JOB_RANGES:
        problem = out_of_range(name, getattr(spec, name))
        if problem is not None:
            raise bad(problem, name)
    if spec.duration_s is not None and spec.iterations is not None:
        raise bad("a job gives either duration_s (run time) or iterations (iteration count), not both; "
                  "leave one cell empty", "iterations")
    if spec.max_gpus is not None and spec.max_gpus < spec.min_gpus:
        raise bad(f"max_gpus {spec.max_gpus} is below min_gpus {spec.min_gpus}", "max_gpus")
    if spec.num_gpus % spec.gpu_unit:
        raise bad(f"num_gpus {spec.num_gpus} is not a multiple of gpu_unit {spec.gpu_unit}", "num_gpus")
    if Adaptivity(spec.adaptivity) != Adaptivity.RIGID:
        # The request is the starting allocation of an elastic job, so it has to lie in the job's own range.
        if spec.num_gpus < spec.min_gpus:
            raise bad(f"num_gpus {spec.num_gpus} is below min_gpus {spec.min_gpus}", "num_gpus")
        if spec.max_gpus is not None and spec.num_gpus > spec.max_gpus:
            raise bad(f"num_gpus {spec.num_gpus} is above max_gpus {spec.max_gpus}", "num_gpus")
    if spec.gpu_counts:
        if Adaptivity(spec.adaptivity) == Adaptivity.RIGID and spec.gpu_counts != (spec.num_gpus,):
            raise bad(f"a rigid job runs on num_gpus only, yet gpu_counts lists {_counts(spec.gpu_counts)}; "
                      f"make it elastic (adaptivity strong-scaling) or leave gpu_counts empty", "gpu_counts")
        if spec.num_gpus not in spec.gpu_counts:
            raise bad(f"num_gpus {spec.num_gpus} is not one of gpu_counts {_counts(spec.gpu_counts)}", "num_gpus")
        odd = [k for k in spec.gpu_counts if k % spec.gpu_unit]
        if odd:
            raise bad(f"gpu_counts {_counts(spec.gpu_counts)}: {odd[0]} is not a multiple of gpu_unit "
                      f"{spec.gpu_unit}", "gpu_counts")
    if spec.lr_scaling not in LR_SCALING_RULES:
        raise bad(f"unknown rule {spec.lr_scaling!r} (known: {', '.join(LR_SCALING_RULES)})", "lr_scaling")
    for k, lr in spec.learning_rates:
        if not spec.allows_gpu_count(k):
            raise bad(f"a rate is given for {k} GPUs, which the job does not accept "
                      f"(it accepts {_counts(spec.requirement_set()[:16])})", "learning_rates")
        if lr not in LEARNING_RATE:
            raise bad(f"every rate must be {LEARNING_RATE.phrase}, got {lr!r}", "learning_rates")
    if spec.deadline_s is not None:
        if spec.deadline_s < spec.submit_time_s:
            raise bad(f"deadline {spec.deadline_s:g} s precedes submission at {spec.submit_time_s:g} s",
                      "deadline_s")
    return spec


def _counts(counts: tuple[int, ...]) -> str:
    return GPU_TYPES_SEP.join(str(k) for k in counts)


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


def finish_specs(specs: list[JobSpec], source: str) -> list[JobSpec]:
    """What every reader does last: refuse repeated job ids, then sort by submission time."""
    check_unique_ids(specs, source)
    return sort_by_submit(specs)
