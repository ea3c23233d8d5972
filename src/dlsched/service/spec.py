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
``elastic``        ``{min, max}`` or an integer n (1..n)       STRONG_SCALING between the bounds: the GPU count
                                                               changes only by a restart, never the batch
                                                               (``torchrun --nnodes=MIN:MAX``'s elasticity)
``adaptive``       ``{min, max}``, an integer n (1..n) or a    ADAPTIVE between the bounds, starting at the
                   requirement set                             smallest (Pollux and Sia start jobs small)
=================  ==========================================  ==============================================

``rigid`` and ``elastic`` jobs may be plain scripts that know nothing of dlsched (docs/train.md): each rank
gets torchrun's environment, and ``command: torchrun --nproc-per-node N script.py`` runs as N ranks.
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
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: Variables the service sets for every rank (docs/service.md, "The worker protocol"): a job may not set
#: them, since they say which job, folder, checkpoint and rank a process is (the service's values would
#: win anyway; a refusal says so instead of dropping the job's silently).
RESERVED_ENV = frozenset({
    "DLSCHED_JOB_ID", "DLSCHED_JOB_DIR", "DLSCHED_CHECKPOINT_DIR", "DLSCHED_INCARNATION", "DLSCHED_RESUME_STEP",
    "DLSCHED_BATCH_SIZE", "DLSCHED_BATCH_SHARES", "DLSCHED_GPU_TYPE", "DLSCHED_SLOWDOWN", "DLSCHED_LR",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "PATH",
    "PYTHONUNBUFFERED"})


class GpuRange(BaseModel):
    """``gpus: {min: 1, max: 8}``: an adaptive job's bounds."""

    model_config = ConfigDict(extra="forbid")

    min: Annotated[GpuCount, Field(description="The fewest GPUs the job runs on (it starts there).")]
    max: Annotated[GpuCount, Field(description="The most GPUs the scheduler may give the job.")]

    @model_validator(mode="after")
    def _ordered(self) -> GpuRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class Resources(BaseModel):
    """What each worker process needs besides its GPU (Ray's CPU and memory resources)."""

    model_config = ConfigDict(extra="forbid")

    cpus_per_worker: Annotated[float, Field(gt=0, le=256, description="CPUs each worker (rank) needs.")] = 1.0
    memory_gb_per_worker: Annotated[float, Field(gt=0, le=4096,
                                                 description="Memory in GB each worker (rank) needs.")] = 4.0


class JobSubmission(BaseModel):
    """One training job as a user submits it (see the module docstring for ``gpus`` and ``adaptivity``)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$",
                               description="The job's name, shown by `dlsched jobs` (not unique: the id is).")]
    command: Annotated[str, Field(min_length=1, max_length=10_000,
                                  description="Run by /bin/sh -c in working_dir, once per rank.")]
    working_dir: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^/",
                                      description="The folder the command runs in: an absolute path (`dlsched "
                                                  "submit` makes a relative one absolute from the spec file's "
                                                  "folder, the default).")]
    env: Annotated[dict[str, Annotated[str, Field(max_length=10_000)]],
                   Field(max_length=256, description="Environment variables set for every rank.")] = {}
    gpus: Annotated[GpuCount | Annotated[list[GpuCount], Field(min_length=1, max_length=64)] | GpuRange,
                    Field(description="How many GPUs: an integer, an ascending list of counts (a requirement "
                                      "set) or {min, max}; what each means depends on adaptivity.")]
    gpu_types: Annotated[list[str], Field(max_length=32, description="The GPU types the job may run on "
                                          "(empty: any); a misspelt type is refused with a suggestion.")] = []
    adaptivity: Annotated[Literal["rigid", "elastic", "per-gpu-batch", "adaptive"],
                          Field(description="What the scheduler may change: nothing (rigid), the GPU count by "
                                            "a restart, never the batch (elastic: torchrun's elasticity), the "
                                            "GPU count with a fixed per-GPU batch (per-gpu-batch), or the GPU "
                                            "count and the global batch (adaptive, for dlsched.train "
                                            "scripts).")] = "rigid"
    batch_size: Annotated[Annotated[int, Field(ge=1, le=MAX_BATCH, strict=True)] | None,
                          Field(description="per-gpu-batch: the batch per GPU (required); adaptive: the "
                                            "initial global batch (required); rigid: the batch the "
                                            "estimators assume (optional).")] = None
    max_batch_size: Annotated[Annotated[int, Field(ge=1, le=MAX_BATCH, strict=True)] | None,
                              Field(description="adaptive only: the largest global batch the scheduler may "
                                                "choose (at least batch_size).")] = None
    model: Annotated[Annotated[str, Field(min_length=1, max_length=64)] | None,
                     Field(description="The name the simulator's world and the estimators know the job by "
                                       "(e.g. resnet, transformer: the throughput and noise-scale models "
                                       "a policy starts from); default: the job's name.")] = None
    deadline_s: Annotated[Annotated[float, Field(gt=0, le=10 * 365 * 86400.0)] | None,
                          Field(description="Seconds after submission by which the job should end (for "
                                            "deadline-aware policies).")] = None
    priority: Annotated[float, Field(gt=0, le=1e6, description="The job's weight for policies that "
                                     "weigh jobs (higher: more).")] = 1.0
    max_failures: Annotated[int, Field(ge=0, le=100, strict=True,
                                       description="Crashes of the job's command before it is failed "
                                                   "(each one restarts it from its last checkpoint).")] = 3
    resources: Annotated[Resources | None,
                         Field(description="What each worker needs besides its GPU: reserved on its node, and "
                                           "its memory enforced (over it, the job fails).")] = None
    #: Slurm's time limit: once the job has run this long (its attained service), it is stopped with a
    #: checkpoint and ends ``timeout``.
    wall_time_s: Annotated[Annotated[float, Field(gt=0, le=10 * 365 * 86400.0)] | None,
                           Field(description="Seconds the job may run (not counting its waits): then it is "
                                             "stopped, checkpointed, and ends 'timeout'.")] = None

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
                raise ValueError(f"{key!r} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most "
                                 "128 characters)")
            if key in RESERVED_ENV:
                raise ValueError(f"{key} is set by the service for every rank and cannot be given")
            _check_text(text)
        return value

    @field_validator("gpu_types")
    @classmethod
    def _known_types(cls, value: list[str]) -> list[str]:
        unknown = [problem for name in value if (problem := gpu_type_problem(name)) is not None]
        if unknown:  # every misspelt type at once, each with its suggestion
            raise ValueError("; ".join(unknown))
        if len(set(value)) != len(value):
            raise ValueError("lists a GPU type twice")
        return value

    @field_validator("deadline_s", "priority", "wall_time_s")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JobSubmission:
        problems = self._cross_field_problems()
        if problems:  # the first is the error; `dlsched spec check` lists them all (``also``)
            problems[0].also = problems
            raise problems[0]
        return self

    def _cross_field_problems(self) -> list[_FieldError]:
        gpus, problems = self.gpus, []
        if isinstance(gpus, list) and any(b <= a for a, b in zip(gpus, gpus[1:], strict=False)):
            problems.append(_FieldError("gpus", "a requirement set must be ascending without repeats, e.g. [1, 2, 4]"))
        if self.adaptivity == "rigid" and not isinstance(gpus, int):
            problems.append(_FieldError("gpus", "a rigid job needs an integer GPU count"))
        if self.adaptivity == "per-gpu-batch":
            if isinstance(gpus, GpuRange):
                problems.append(_FieldError("gpus", "a per-gpu-batch job needs an integer or a list of GPU counts"))
            if self.batch_size is None:
                problems.append(_FieldError("batch_size", "a per-gpu-batch job needs its per-GPU batch size"))
        if self.adaptivity == "elastic" and isinstance(gpus, list):
            problems.append(_FieldError("gpus", "an elastic job needs {min: N, max: M} or an integer (1..n)"))
        if self.adaptivity == "adaptive" and self.batch_size is None:
            problems.append(_FieldError("batch_size", "an adaptive job needs its initial (global) batch size"))
        if self.max_batch_size is not None:
            if self.adaptivity != "adaptive":
                problems.append(_FieldError("max_batch_size", "only an adaptive job may give max_batch_size"))
            if self.batch_size is not None and self.max_batch_size < self.batch_size:
                problems.append(_FieldError("max_batch_size", f"must be at least batch_size ({self.batch_size})"))
        return problems

    def gpu_bounds(self) -> tuple[int, int, tuple[int, ...]]:
        """The smallest and largest GPU count the job accepts, and its requirement set (empty: a range)."""
        gpus = self.gpus
        if isinstance(gpus, GpuRange):
            return gpus.min, gpus.max, ()
        if isinstance(gpus, list):
            return gpus[0], gpus[-1], tuple(gpus)
        if self.adaptivity in ("adaptive", "elastic"):
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
        if self.adaptivity == "elastic":
            return JobSpec(num_gpus=low, min_gpus=low, max_gpus=high, adaptivity=Adaptivity.STRONG_SCALING,
                           **common)
        return JobSpec(num_gpus=low, min_gpus=low, max_gpus=high, adaptivity=Adaptivity.ADAPTIVE,
                       gpu_counts=counts, **common)


def gpu_type_problem(name: str) -> str | None:
    """Why ``name`` is not a GPU type, with the one most likely meant; None for a known type."""
    if name in KNOWN_GPU_TYPES:
        return None
    close = difflib.get_close_matches(name, KNOWN_GPU_TYPES, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f" (known: {', '.join(sorted(KNOWN_GPU_TYPES))})"
    return f"unknown GPU type '{name}'{hint}"


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
        #: Every cross-field problem found with this one (this one first).
        self.also: list[_FieldError] = [self]


def describe_error(exc: ValidationError) -> tuple[str, str]:
    """The first problem of a pydantic error as (field path, message), e.g. ``("resources.cpus_per_worker",
    "Input should be greater than 0")``; a cross-field check names its own field."""
    return describe_line_errors(exc.errors(include_url=False))


def describe_line_errors(errors: list[Any]) -> tuple[str, str]:
    """:func:`describe_error` of pydantic's error records (``exc.errors()``, or those of one field)."""
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
