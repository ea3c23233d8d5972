"""Starting the session: the process group, the device, and the checkpoint to resume from.

``init_process_group`` reads the protocol's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT`` as torchrun sets them; NCCL on CUDA, gloo on the CPU; a one-process group when unset, so the
same DDP code path runs everywhere) and, before any rank waits for another, loads the checkpoint of
``DLSCHED_RESUME_STEP``. A checkpoint that is missing ends every rank with exit code 3 and rank 0 writes an
``error`` report naming the path: a job never silently starts over from step 0. A bad variable is one
``error:`` line naming it and exit code 2.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist

from dlsched.core import InputError
from dlsched.train import checkpoints as ckpt
from dlsched.train.env import TrainEnv, read_env
from dlsched.train.reports import ReportWriter
from dlsched.train.session import Session

#: Exit code of a rank whose checkpoint to resume from is missing (docs/service.md).
EXIT_MISSING_CHECKPOINT = 3
EXIT_BAD_INPUT = 2

_session: Session | None = None


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """End this rank on bad input found after the start (one ``error:`` line, an ``error`` report from rank 0)."""
    _fail(None if _session is None else _session.env, message, code)


def _fail(env: TrainEnv | None, message: str, code: int) -> NoReturn:
    print(f"error: {message}", file=sys.stderr, flush=True)
    if env is not None and env.rank == 0:
        ReportWriter(env.job_dir, env.incarnation).write("error", message=message)
    sys.exit(code)


def _device(env: TrainEnv) -> torch.device:
    if torch.cuda.is_available():
        index = env.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def init_process_group(backend: str | None = None, *, checkpoint_dir: str | Path | None = None,
                       checkpoint_steps: int | None = None, timeout_s: float = 600.0) -> Session:
    """Start this rank's session (once per process; later calls return the same session).

    ``backend`` overrides the default (``nccl`` on CUDA, ``gloo`` otherwise; gloo also reduces CUDA tensors,
    e.g. two ranks sharing one GPU). ``checkpoint_dir`` is where a standalone run checkpoints (the
    protocol's ``DLSCHED_CHECKPOINT_DIR`` wins); ``checkpoint_steps`` adds a checkpoint every that many steps.
    """
    global _session
    if _session is not None:
        return _session
    env: TrainEnv | None = None
    try:
        env = read_env()
        if checkpoint_steps is not None and checkpoint_steps < 1:
            raise InputError(f"must be >= 1, got {checkpoint_steps}", field="checkpoint_steps")
    except InputError as exc:
        _fail(env, str(exc), EXIT_BAD_INPUT)
    directory = env.checkpoint_dir or (Path(checkpoint_dir).absolute() if checkpoint_dir is not None else None)
    resumed = None
    if env.resume_step > 0:
        path = ckpt.checkpoint_file(directory, env.resume_step) if directory is not None else None
        if path is None or not path.is_file():
            where = str(path) if path is not None else "(no DLSCHED_CHECKPOINT_DIR)"
            _fail(env, f"checkpoint of step {env.resume_step} not found: {where}", EXIT_MISSING_CHECKPOINT)
        try:
            resumed = ckpt.load(path)
        except Exception as exc:  # noqa: BLE001 - a torn or foreign file: retrying cannot load it either
            _fail(env, f"checkpoint of step {env.resume_step} cannot be loaded: {path}: {type(exc).__name__}: "
                       f"{exc}", EXIT_MISSING_CHECKPOINT)
    device = _device(env)
    if backend is None:
        backend = "nccl" if device.type == "cuda" else "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)
    if not dist.is_initialized():
        if env.world_size > 1:
            dist.init_process_group(backend, init_method=f"tcp://{env.master_addr}:{env.master_port}",
                                    rank=env.rank, world_size=env.world_size, timeout=timeout)
        else:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    comm_device = device if dist.get_backend() == "nccl" else torch.device("cpu")
    _session = Session(env, device, comm_device, directory, checkpoint_steps, resumed)
    _session.signal.install()
    return _session


def current_session() -> Session:
    """The process's session, started with the defaults if the script did not start it itself."""
    return _session if _session is not None else init_process_group()


def reset_session() -> None:
    """Forget the session and leave the process group (for scripts that train twice in one process)."""
    global _session
    if dist.is_initialized():
        dist.destroy_process_group()
    _session = None
