"""The tensors this library hands to gloo's collectives, kept until gloo's worker threads have let them go.

A gloo worker thread keeps its reference to a collective's tensor a moment after the collective completes.
When the Python side has dropped the tensor by then, the worker's drop is the last one and must take the GIL
to free the Python object; if the interpreter is finalizing at that moment, the thread is torn down inside
a ``noexcept`` frame and the process aborts with SIGABRT ("terminate called without an active exception").
A script whose last act is an all-reduce aborts this way in a large share of exits (measured: 12 of 30
two-rank runs), so a job that completed reads as one that crashed. Keeping the last tensors referenced here
and waiting, at exit, until only this keeper holds them, then leaving the process group (whose destructor
joins gloo's worker threads, so that none is left to run during finalization) closes that window.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import torch
import torch.distributed as dist

#: Collectives that may still be in a worker's hands at once: gloo runs two worker threads per group, each
#: holding one; the margin covers the step's small exchange, launched behind the last bucket.
KEPT = 4
#: The longest an exit waits for the workers (they let go within microseconds of completing).
RELEASE_WAIT_S = 2.0


def _use_count(tensor: torch.Tensor) -> int:
    """References to the tensor's C++ object (Python's own counts as one).

    ``Tensor._use_count`` is PyTorch's own (private, untyped) accessor. A PyTorch without it gives 1, so the
    exit does not wait: the behaviour before this keeper, not a hang.
    """
    count = getattr(tensor, "_use_count", None)
    return int(count()) if callable(count) else 1


class SentTensors:
    """The most recent tensors given to collectives, each referenced until the exit has seen it released."""

    def __init__(self, gloo: bool) -> None:
        # only gloo's workers drop tensors this way; under NCCL keeping them would only hold device memory
        self._kept: collections.deque[torch.Tensor] = collections.deque(maxlen=KEPT if gloo else 0)

    def keep(self, tensor: torch.Tensor) -> torch.Tensor:
        """Keep ``tensor`` (one this library created) referenced; returns it."""
        if self._kept.maxlen:
            self._kept.append(tensor)
        return tensor

    def all_reduce(self, tensor: torch.Tensor, async_op: bool = False) -> Any:
        """``dist.all_reduce`` of a tensor this library created, kept for the exit."""
        self.keep(tensor)
        return dist.all_reduce(tensor, async_op=async_op)

    def held_elsewhere(self) -> int:
        """How many kept tensors something besides this keeper still references (a worker, or a view)."""
        return sum(1 for t in self._kept if _use_count(t) > 1)

    def wait_released(self, timeout_s: float = RELEASE_WAIT_S) -> bool:
        """Wait until no worker holds a kept tensor (True), or ``timeout_s`` passes (False: a view of one is
        still alive, which is harmless, since then the worker's drop is not the last)."""
        deadline = time.monotonic() + timeout_s
        while self.held_elsewhere():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.0005)
        return True

    def leave_group(self, timeout_s: float = RELEASE_WAIT_S) -> None:
        """The exit: wait for the workers to let go of the kept tensors, then leave the process group.

        Leaving joins gloo's worker threads while Python still runs, so no thread is left that could free a
        tensor during finalization, whatever the wait saw (a timeout under a heavily loaded host included).
        """
        if not dist.is_initialized():
            return
        self.wait_released(timeout_s)
        try:
            dist.destroy_process_group()
        except (RuntimeError, ValueError):  # already left, or never fully joined
            pass
