"""The executor's vocabulary: nodes, launch specifications and rank states, shared by every executor.

Kept apart from :mod:`dlsched.runtime.executor` so that the dry-run executor and the service's round loop
can use these types without importing Ray (the runtime is an optional extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class NodeInfo:
    """One node the executor can start ranks on, as the scheduler sees it."""

    #: Stable dlsched node name: the preset's node name for an emulated local node; for a joined Ray node
    #: its ``dlsched_node_<name>`` resource if it carries one, else ``<hostname>-<first 8 of the node id>``.
    name: str
    #: A GPU type name known to dlsched (:data:`dlsched.core.gpu.KNOWN_GPU_TYPES`).
    gpu_type: str
    num_gpus: int
    ray_node_id: str
    #: True: CUDA GPUs on that node; False: the type is emulated by CPU processes.
    real_gpus: bool
    #: Emulated: the factor each step is stretched by (:mod:`dlsched.runtime.emulation`); real: 1.0.
    slowdown: float


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one incarnation of a job's workers."""

    job_id: str
    incarnation: int
    #: Run with ``/bin/sh -c`` in ``working_dir``.
    command: str
    working_dir: str
    #: The job's environment plus the protocol variables common to all ranks (``DLSCHED_*``).
    env: dict[str, str]
    #: One entry per rank: (node name, local GPU indices of that rank on the node: one GPU per rank).
    ranks: tuple[tuple[str, tuple[int, ...]], ...]
    #: Each rank's output goes to ``job_dir/logs/rank<r>.log`` (appended, one header line per incarnation).
    job_dir: Path
    #: CPUs and memory each rank reserves on its node (Ray's ``num_cpus`` and ``memory``; 0 and None: none
    #: reserved), and the memory its processes may use together before they are stopped (None: no limit).
    cpus_per_rank: float = 0.0
    memory_bytes_per_rank: int | None = None
    #: The OS account the ranks run as (None: the executor's own; :mod:`dlsched.service.isolation`), and the
    #: bytes each rank's log may hold, current and rotated part together (None: no cap).
    run_as: str | None = None
    max_log_bytes: int | None = None

    @property
    def world_size(self) -> int:
        return len(self.ranks)


class RankState(StrEnum):
    RUNNING = "running"
    EXITED = "exited"
    #: Its host actor or node died, or it cannot be found.
    LOST = "lost"


@dataclass(frozen=True)
class RankStatus:
    rank: int
    state: RankState
    #: The process's exit status once EXITED; a process ended by signal ``s`` reads ``128 + s`` as a
    #: shell would report it (SIGKILL: 137, SIGTERM: 143). None while running or when lost.
    exit_code: int | None
    node: str
    #: Why the executor ended it, when it did (``memory``: its processes used more than the job reserved).
    reason: str | None = None


def log_path(job_dir: Path, rank: int) -> Path:
    """Where a rank's stdout and stderr go (the worker protocol's ``logs/rank<r>.log``)."""
    return Path(job_dir) / "logs" / f"rank{rank}.log"


def actor_name(job_id: str, incarnation: int, rank: int) -> str:
    """The name a rank's host actor is registered under, so that a restarted service finds it again."""
    return f"{job_id}/{incarnation}/{rank}"


def parse_actor_name(name: str) -> tuple[str, int, int] | None:
    """(job id, incarnation, rank) of a host actor's name; None for a name the executor did not give."""
    job_id, _, rest = name.rpartition("/")
    job_id, _, inc = job_id.rpartition("/")
    if not job_id or not inc.isdigit() or not rest.isdigit():
        return None
    return job_id, int(inc), int(rest)


class Executor(Protocol):
    """What the service's round loop calls; :class:`~dlsched.runtime.executor.RayExecutor` and
    :class:`~dlsched.runtime.dry_run.DryRunExecutor` implement it."""

    def nodes(self) -> list[NodeInfo]: ...

    def launch(self, spec: LaunchSpec) -> None: ...

    def poll(self, job_id: str) -> list[RankStatus]: ...

    def stop(self, job_ids: list[str], *, grace_s: float = 30.0) -> None: ...

    def attach(self, job_id: str, incarnation: int, world_size: int) -> bool: ...

    def forget(self, job_id: str) -> None: ...

    def hosted(self) -> dict[str, set[int]]: ...

    def close(self, *, stop_ray: bool) -> None: ...
