"""The settings of one ``dlsched serve``, checked before anything starts.

The command's flags become one :class:`ServeOptions` (a pydantic model, ranges checked, unknown keys
refused), so a bad flag is one ``error:`` line naming it rather than a failure after Ray has started, and a
test or a deployment script can build the same object without the command line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dlsched.core import InputError

#: The cluster ``dlsched serve`` runs when none is named: four emulated nodes on this machine's Ray.
DEFAULT_CLUSTER = "ray-local-4"


class ServeOptions(BaseModel):
    """Where the service keeps its state, what it schedules with, and where it listens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the service's folder: the SQLite database, ``jobs/`` (each job's folder), ``server.json``
    state: Path
    #: a cluster preset or cluster file; with ``address``, what the joined Ray cluster's nodes are
    cluster: Annotated[str, Field(min_length=1)] = DEFAULT_CLUSTER
    #: whether ``cluster`` was named on the command line (joining a Ray cluster reads its nodes otherwise)
    cluster_given: bool = False
    #: an existing Ray cluster to join (default: start Ray here)
    address: Annotated[str, Field(min_length=1)] | None = None
    #: the scheduler preset or composition (see ``dlsched policies``)
    policy: Annotated[str, Field(min_length=1)] = "fifo"
    #: policy tunables, ``--set key=value``
    settings: dict[str, str] = {}
    #: stages swapped into the policy (``--ordering my-edf``), by kind: admission, ordering, allocation,
    #: placement, coordination
    stages: dict[str, Annotated[str, Field(min_length=1)]] = {}
    #: Python files whose ``dlsched.register_stage`` calls register the stages named (``--plugin``), loaded
    #: in this order before the policy is built, as ``dlsched simulate --plugin`` loads them
    plugins: list[Path] = []
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    host: Annotated[str, Field(min_length=1)] = "127.0.0.1"
    #: a database URL (``postgresql+psycopg://...``); default ``sqlite:///STATE/dlsched.db``
    database: Annotated[str, Field(min_length=1)] | None = None
    #: the jobs' shared checkpoint folder (default ``STATE/checkpoints``)
    checkpoint_dir: Path | None = None
    round_s: Annotated[float, Field(ge=1.0, le=86400.0)] = 10.0
    executor: Literal["ray", "dry-run"] = "ray"
    #: seconds a stopped job's workers have to write their stop checkpoint and exit before SIGKILL
    stop_grace_s: Annotated[float, Field(ge=0.0, le=3600.0)] = 60.0
    #: a placed incarnation is not moved or resized before it has reported its first step and a checkpoint,
    #: or this many seconds have passed
    min_run_s: Annotated[float, Field(ge=0.0, le=86400.0)] = 30.0
    #: the largest request body the API reads (KiB; a larger one is refused with 413 before it is read)
    max_body_kb: Annotated[int, Field(ge=1, le=1024 * 1024)] = 1024
    #: requests per second per token the API serves (twice that at once); 429 beyond
    rate_per_s: Annotated[float, Field(ge=1.0, le=1e6)] = 200.0
    #: folders jobs may run in (``working_dir`` under one of them); empty: the host's home folders and
    #: ``STATE/uploads`` (:mod:`dlsched.service.confine`)
    allow_dir: list[Path] = []
    #: who jobs run as (:mod:`dlsched.service.isolation`): ``auto`` (their own accounts when the service
    #: runs as root, else the service's), ``accounts`` (refuse to start without root) or ``none``
    isolation: Literal["auto", "accounts", "none"] = "auto"
    #: the OS account jobs of users without an ``--os-user`` run as (created when missing)
    job_user: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")] = "dlsched-job"
    #: serve more than one user although jobs run as the service's own account (isolation ``none``)
    allow_shared_account: bool = False
    #: the MiB each rank's log may hold, current and rotated part together
    max_log_mb: Annotated[int, Field(ge=1, le=1024 * 1024)] = 1024
    #: explanation records that stopped holding more than this many rounds ago are deleted (None: all kept;
    #: a job's current records are kept whatever their age)
    explain_keep_rounds: Annotated[int, Field(ge=1, le=10**9)] | None = None
    #: accept flags that differ from the configuration the state was created with (and record the change)
    reconfigure: bool = False

    @field_validator("round_s", "stop_grace_s", "min_run_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @field_validator("stages")
    @classmethod
    def _stage_kinds(cls, value: dict[str, str]) -> dict[str, str]:
        from dlsched.policies.registry import STAGE_KINDS

        for kind in value:
            if kind not in STAGE_KINDS:
                raise ValueError(f"unknown stage kind {kind!r} (known: {', '.join(STAGE_KINDS)})")
        return value

    @field_validator("database")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite:", "postgresql")):
            raise ValueError("must be sqlite:///FILE or postgresql+psycopg://USER@HOST/DB")
        return value

    @classmethod
    def parse(cls, values: dict[str, Any]) -> ServeOptions:
        """The options from flag values; InputError naming the flag at fault."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in error["loc"]) or "options"
            message = str(error["msg"]).removeprefix("Value error, ")
            raise InputError(message, field=field) from None
