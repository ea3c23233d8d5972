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
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    host: Annotated[str, Field(min_length=1)] = "127.0.0.1"
    #: a database URL (``postgresql+psycopg://...``); default ``sqlite:///STATE/dlsched.db``
    database: Annotated[str, Field(min_length=1)] | None = None
    #: the jobs' shared checkpoint folder (default ``STATE/checkpoints``)
    checkpoint_dir: Path | None = None
    round_s: Annotated[float, Field(ge=1.0, le=86400.0)] = 10.0
    executor: Literal["ray", "dry-run"] = "ray"

    @field_validator("round_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
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
