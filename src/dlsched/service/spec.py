"""The job spec a user submits to ``dlsched serve`` (a YAML file for ``dlsched submit``, JSON for the API).

It is checked once, at the edge, by a pydantic model that forbids unknown keys and checks every range, so
the service stores only specs it can schedule; :func:`parse_submission` turns pydantic's error into one
:class:`~dlsched.core.InputError` naming the field. :meth:`JobSubmission.to_job_spec` maps a spec onto the
simulator's :class:`~dlsched.core.JobSpec`, so the service's jobs reach the schedulers in the same shape
as a trace's jobs.

``gpus`` and ``adaptivity`` together say what the scheduler may change:

=================  ==========================================  ==============================================
adaptivity         gpus                                        the JobSpec
=================  ==========================================  ==============================================
``rigid``          an integer                                  RIGID on exactly that many GPUs
``per-gpu-batch``  an integer or a requirement set ``[1, 2]``  ``per_gpu_batch`` with ``gpu_counts`` (Hops):
                                                               STRONG_SCALING with several counts, else RIGID
``adaptive``       ``{min, max}``, an integer n (1..n) or a    ADAPTIVE between the bounds, starting at the
                   requirement set                             smallest (Pollux and Sia start jobs small)
=================  ==========================================  ==============================================
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dlsched.core import KNOWN_GPU_TYPES, Adaptivity, InputError, JobSpec

#: Largest GPU count one job may ask for.
MAX_GPUS = 1024
#: Largest batch size (global, or per GPU) a spec may give.
MAX_BATCH = 1_000_000

GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS, strict=True)]
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class GpuRange(BaseModel):
    """``gpus: {min: 1, max: 8}``: an adaptive job's bounds."""

    model_config = ConfigDict(extra="forbid")

    min: GpuCount
    max: GpuCount

    @model_validator(mode="after")
    def _ordered(self) -> GpuRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class Resources(BaseModel):
    """What each worker process needs besides its GPU (Ray's CPU and memory resources)."""

    model_config = ConfigDict(extra="forbid")

    cpus_per_worker: Annotated[float, Field(gt=0, le=256)] = 1.0
    memory_gb_per_worker: Annotated[float, Field(gt=0, le=4096)] = 4.0


class JobSubmission(BaseModel):
    """One training job as a user submits it (see the module docstring for ``gpus`` and ``adaptivity``)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
    command: Annotated[str, Field(min_length=1, max_length=10_000,
                                  description="Run by /bin/sh -c in working_dir.")]
    working_dir: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^/",
                                      description="An absolute path.")]
    env: Annotated[dict[str, Annotated[str, Field(max_length=10_000)]], Field(max_length=256)] = {}
    gpus: GpuCount | Annotated[list[GpuCount], Field(min_length=1, max_length=64)] | GpuRange
    gpu_types: Annotated[list[str], Field(max_length=32)] = []
    adaptivity: Literal["rigid", "per-gpu-batch", "adaptive"] = "rigid"
    batch_size: Annotated[int, Field(ge=1, le=MAX_BATCH, strict=True)] | None = None
    max_batch_size: Annotated[int, Field(ge=1, le=MAX_BATCH, strict=True)] | None = None
    model: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    deadline_s: Annotated[float, Field(gt=0, le=10 * 365 * 86400.0)] | None = None
    priority: Annotated[float, Field(gt=0, le=1e6)] = 1.0
    max_failures: Annotated[int, Field(ge=0, le=100, strict=True)] = 3
    resources: Resources | None = None

    @field_validator("name", "command", "working_dir", "model")
    @classmethod
    def _plain_text(cls, value: str | None) -> str | None:
        if value is not None:
            _check_text(value)
        return value

    @field_validator("working_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not PurePosixPath(value).is_absolute():
            raise ValueError(f"must be an absolute path, got {value!r}")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not _ENV_KEY.match(key):
                raise ValueError(f"{key!r} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
            _check_text(text)
        return value

    @field_validator("gpu_types")
    @classmethod
    def _known_types(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in KNOWN_GPU_TYPES:
                close = difflib.get_close_matches(name, KNOWN_GPU_TYPES, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(KNOWN_GPU_TYPES))})"
                raise ValueError(f"unknown GPU type '{name}'{hint}")
        if len(set(value)) != len(value):
            raise ValueError("lists a GPU type twice")
        return value

    @field_validator("deadline_s", "priority")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JobSubmission:
        gpus = self.gpus
        if isinstance(gpus, list) and any(b <= a for a, b in zip(gpus, gpus[1:], strict=False)):
            raise _FieldError("gpus", "a requirement set must be ascending without repeats, e.g. [1, 2, 4]")
        if self.adaptivity == "rigid" and not isinstance(gpus, int):
            raise _FieldError("gpus", "a rigid job needs an integer GPU count")
        if self.adaptivity == "per-gpu-batch":
            if isinstance(gpus, GpuRange):
                raise _FieldError("gpus", "a per-gpu-batch job needs an integer or a list of GPU counts")
            if self.batch_size is None:
                raise _FieldError("batch_size", "a per-gpu-batch job needs its per-GPU batch size")
        if self.adaptivity == "adaptive" and self.batch_size is None:
            raise _FieldError("batch_size", "an adaptive job needs its initial (global) batch size")
        if self.max_batch_size is not None:
            if self.adaptivity != "adaptive":
                raise _FieldError("max_batch_size", "only an adaptive job may give max_batch_size")
            if self.batch_size is not None and self.max_batch_size < self.batch_size:
                raise _FieldError("max_batch_size", f"must be at least batch_size ({self.batch_size})")
        return self

    def gpu_bounds(self) -> tuple[int, int, tuple[int, ...]]:
        """The smallest and largest GPU count the job accepts, and its requirement set (empty: a range)."""
        gpus = self.gpus
        if isinstance(gpus, GpuRange):
            return gpus.min, gpus.max, ()
        if isinstance(gpus, list):
            return gpus[0], gpus[-1], tuple(gpus)
        if self.adaptivity == "adaptive":
            return 1, gpus, ()
        return gpus, gpus, (gpus,) if self.adaptivity == "per-gpu-batch" else ()

    def to_job_spec(self, job_id: str, submit_time_s: float, user: str) -> JobSpec:
        """The simulator's JobSpec for this submission (``deadline_s`` becomes absolute)."""
        low, high, counts = self.gpu_bounds()
        deadline = None if self.deadline_s is None else submit_time_s + self.deadline_s
        common: dict[str, Any] = dict(
            job_id=job_id, submit_time_s=submit_time_s, model=self.model or self.name, user=user,
            batch_size=self.batch_size, deadline_s=deadline, gpu_types=tuple(self.gpu_types),
            priority=self.priority)
        if self.adaptivity == "rigid":
            return JobSpec(num_gpus=low, min_gpus=low, max_gpus=low, adaptivity=Adaptivity.RIGID, **common)
        if self.adaptivity == "per-gpu-batch":
            median = counts[(len(counts) - 1) // 2]
            return JobSpec(num_gpus=median, min_gpus=counts[0], max_gpus=counts[-1],
                           adaptivity=Adaptivity.STRONG_SCALING if len(counts) > 1 else Adaptivity.RIGID,
                           gpu_counts=counts, per_gpu_batch=True, **common)
        return JobSpec(num_gpus=low, min_gpus=low, max_gpus=high, adaptivity=Adaptivity.ADAPTIVE,
                       gpu_counts=counts, **common)


def _check_text(value: str) -> None:
    """Refuse what no database column and no shell command can hold: NUL and unpaired surrogates."""
    if "\x00" in value:
        raise ValueError("holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode text (an unpaired surrogate)") from None


class _FieldError(ValueError):
    """A cross-field check's failure that names the field at fault (pydantic would name the whole model)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


def describe_error(exc: ValidationError) -> tuple[str, str]:
    """The first problem of a pydantic error as (field path, message), e.g. ``("resources.cpus_per_worker",
    "Input should be greater than 0")``; a cross-field check names its own field."""
    errors = exc.errors(include_url=False)
    # a union (gpus) reports one error per member it tried: the member of the input's own type says more
    # than "Input should be a valid integer"
    error = next((e for e in errors if not str(e["type"]).endswith("_type")), errors[0])
    loc = [str(part) for part in error["loc"] if not _is_union_tag(part)]
    if loc == ["gpus"] and str(error["type"]).endswith("_type"):
        return "gpus", f"must be an integer 1..{MAX_GPUS}, a list of them, or {{min: N, max: M}}"
    message = str(error["msg"]).removeprefix("Value error, ")
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, _FieldError):
        return ".".join([*loc, original.field]) if loc else original.field, original.reason
    if error["type"] == "extra_forbidden":
        message = "unknown key (not a job spec field)"
    elif error["type"] == "string_pattern_mismatch" and loc == ["name"]:
        message = "must be 1 to 64 of the characters A-Z a-z 0-9 . _ -"
    elif error["type"] == "string_pattern_mismatch" and loc == ["working_dir"]:
        message = f"must be an absolute path, got {error.get('input')!r}"
    elif error["type"] == "missing":
        message = "required"
    return ".".join(loc) or "spec", message


def _is_union_tag(part: object) -> bool:
    """Pydantic names the union member it tried (``int``, ``list[constrained-int]``, ``GpuRange``) in a
    location; the user's spec has no such key."""
    return isinstance(part, str) and (part in ("int", "GpuRange", "Resources", "float", "str")
                                      or part.startswith(("list[", "constrained-", "function-")))


def parse_submission(data: object, *, source: str | None = None) -> JobSubmission:
    """``data`` (a parsed YAML or JSON object) as a JobSubmission; InputError naming the field otherwise."""
    if not isinstance(data, dict):
        raise InputError("a job spec must be a mapping of fields (name, command, gpus, ...)", source=source)
    try:
        return JobSubmission.model_validate(data)
    except ValidationError as exc:
        field, message = describe_error(exc)
        raise InputError(message, source=source, field=field) from None
