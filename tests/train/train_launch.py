"""Start a job's ranks as real processes with the worker protocol's environment, as the executor does."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
SCRIPT = Path(__file__).resolve().parent / "job_script.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Job:
    job_dir: Path
    checkpoint_dir: Path


def job_env(job: Job | None, rank: int, world: int, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLSCHED_")}
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), PYTHONPATH=str(SRC), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    if job is not None:
        env.update(DLSCHED_JOB_ID="job-1", DLSCHED_JOB_DIR=str(job.job_dir),
                   DLSCHED_CHECKPOINT_DIR=str(job.checkpoint_dir))
    env.update(extra)
    return env


def start(job: Job | None, world: int, args: list[str], script: Path = SCRIPT,
          **extra: str) -> list[subprocess.Popen[str]]:
    port = free_port()
    return [subprocess.Popen([sys.executable, str(script), *args], env=job_env(job, r, world, port, **extra),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for r in range(world)]


def wait(procs: list[subprocess.Popen[str]], timeout: float = 90.0) -> list[tuple[int, str]]:
    out = []
    try:
        for p in procs:
            text, _ = p.communicate(timeout=timeout)
            out.append((p.returncode, text))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def run(job: Job | None, world: int, args: list[str], timeout: float = 90.0, **extra: str) -> list[tuple[int, str]]:
    return wait(start(job, world, args, **extra), timeout)
