"""A job that completed must not read as a crashed one: gloo's workers free a collective's tensor a moment
after it completes, and a process already finalizing then aborts (-6). dlsched.train keeps its tensors until
the workers let go (``collectives.SentTensors``); real two-rank gloo processes, many exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from train_launch import free_port, job_env

pytestmark = pytest.mark.timeout(300)

SCRIPT = Path(__file__).resolve().parent / "exit_after_collective.py"
#: Unkept, about four in ten of these exits abort (12 of 30 measured); kept and left as dlsched.train leaves, none may.
RUNS = 12


def _exits(mode: str) -> list[int]:
    codes: list[int] = []
    for _ in range(RUNS):
        port = free_port()
        procs = [subprocess.Popen([sys.executable, str(SCRIPT), mode], env=job_env(None, r, 2, port),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for r in range(2)]
        codes += [p.wait(timeout=60) for p in procs]
    return codes


def test_ranks_that_end_on_an_all_reduce_exit_cleanly_every_time() -> None:
    assert _exits("keep") == [0] * (2 * RUNS)
