"""The worker protocol's environment, read once and checked at the edge.

Everything the service tells a rank arrives in environment variables (docs/service.md, "The worker
protocol"); reading them in one place means a bad value is one ``error:`` line naming the variable, and the
rest of the library trusts a typed ``TrainEnv``. Without ``DLSCHED_JOB_DIR`` the script runs standalone
(plain or under torchrun): no reports, no control file, checkpoints only where the user asks for them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dlsched.core import InputError


@dataclass(frozen=True)
class TrainEnv:
    """What the protocol's environment says about this rank and its job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    job_id: str | None = None
    #: The job's folder (control.json, reports.jsonl); None: standalone.
    job_dir: Path | None = None
    checkpoint_dir: Path | None = None
    incarnation: int = 0
    #: The step whose checkpoint to load (0: start fresh).
    resume_step: int = 0
    batch_size: int | None = None
    #: Every rank's share of the global batch (sums to 1); None: equal shares.
    batch_shares: tuple[float, ...] | None = None
    gpu_type: str | None = None
    slowdown: float = 1.0
    lr: float | None = None
    report_s: float = 2.0
    checkpoint_s: float = 30.0

    @property
    def managed(self) -> bool:
        """Whether the service runs this script (it has a job folder) rather than a user by hand."""
        return self.job_dir is not None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _int(env: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    text = _text(env, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"must be an integer, got '{text}'", field=name) from None
    if value < minimum:
        raise InputError(f"must be >= {minimum}, got {value}", field=name)
    return value


def _float(env: Mapping[str, str], name: str, default: float | None, minimum: float,
           strict: bool = False) -> float | None:
    text = _text(env, name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"must be a number, got '{text}'", field=name) from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise InputError(f"must be a finite number {'>' if strict else '>='} {minimum}, got {text}", field=name)
    return value


def _shares(env: Mapping[str, str], world_size: int) -> tuple[float, ...] | None:
    name = "DLSCHED_BATCH_SHARES"
    text = _text(env, name)
    if text is None:
        return None
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise InputError(f"must be comma-separated numbers, got '{text}'", field=name) from None
    if len(values) != world_size:
        raise InputError(f"has {len(values)} shares for a world size of {world_size}", field=name)
    if any(not math.isfinite(v) or v <= 0 for v in values):
        raise InputError(f"every share must be a positive number, got '{text}'", field=name)
    total = sum(values)
    return tuple(v / total for v in values)


def _path(env: Mapping[str, str], name: str) -> Path | None:
    text = _text(env, name)
    if text is None:
        return None
    path = Path(text)
    if not path.is_absolute():
        raise InputError(f"must be an absolute path, got '{text}'", field=name)
    return path


def read_env(env: Mapping[str, str] | None = None) -> TrainEnv:
    """The protocol's variables from ``env`` (default ``os.environ``); raises ``InputError`` naming the bad one."""
    env = os.environ if env is None else env
    world_size = _int(env, "WORLD_SIZE", 1, 1) or 1
    rank = _int(env, "RANK", 0, 0) or 0
    if rank >= world_size:
        raise InputError(f"must be below WORLD_SIZE ({world_size}), got {rank}", field="RANK")
    master_addr = _text(env, "MASTER_ADDR")
    master_port = _int(env, "MASTER_PORT", None, 1)
    if world_size > 1 and (master_addr is None or master_port is None):
        raise InputError("MASTER_ADDR and MASTER_PORT are needed when WORLD_SIZE > 1", field="MASTER_ADDR")
    return TrainEnv(
        rank=rank, world_size=world_size, local_rank=_int(env, "LOCAL_RANK", 0, 0) or 0,
        master_addr=master_addr, master_port=master_port,
        job_id=_text(env, "DLSCHED_JOB_ID"), job_dir=_path(env, "DLSCHED_JOB_DIR"),
        checkpoint_dir=_path(env, "DLSCHED_CHECKPOINT_DIR"),
        incarnation=_int(env, "DLSCHED_INCARNATION", 0, 0) or 0,
        resume_step=_int(env, "DLSCHED_RESUME_STEP", 0, 0) or 0,
        batch_size=_int(env, "DLSCHED_BATCH_SIZE", None, 1),
        batch_shares=_shares(env, world_size),
        gpu_type=_text(env, "DLSCHED_GPU_TYPE"),
        slowdown=_float(env, "DLSCHED_SLOWDOWN", 1.0, 1.0) or 1.0,
        lr=_float(env, "DLSCHED_LR", None, 0.0),
        report_s=_float(env, "DLSCHED_REPORT_S", 2.0, 0.0) or 0.0,
        checkpoint_s=_float(env, "DLSCHED_CHECKPOINT_S", 30.0, 0.0, strict=True) or 30.0,
    )
