"""The user-facing functions that are not classes: epochs, named states, loss, and finishing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from dlsched.train.session import Stateful
from dlsched.train.state import current_session, fail


def remaining_epochs(epochs: int) -> Iterator[int]:
    """The epochs still to train, from where a resumed job stopped (its current, perhaps partial, epoch).

    Iterate the ``DataLoader`` once per epoch inside it. When the last epoch is over the job is complete:
    rank 0 writes the final checkpoint and the ``done`` report.
    """
    session = current_session()
    session.total_epochs = epochs
    while True:
        loader = session.loader
        epoch = loader.epoch if loader is not None else 0
        if epoch >= epochs:
            break
        yield epoch
        if loader is None and session.loader is None:
            raise RuntimeError("remaining_epochs() needs a dlsched.train.DataLoader iterated in each epoch")
    session.finish()


def register_state(name: str, obj: Stateful) -> None:
    """Checkpoint ``obj`` (anything with ``state_dict()``/``load_state_dict()``) under ``name``; on a resume it
    is restored right here, from the checkpoint being resumed."""
    current_session().register_state(name, obj)


def report_loss(loss: torch.Tensor | float) -> None:
    """This step's loss (the mean over this rank's batch), for ``progress`` reports and ``smoothed_loss()``."""
    current_session().record_loss(loss if isinstance(loss, torch.Tensor) else torch.tensor(float(loss)))


def smoothed_loss() -> float | None:
    """The global batch's loss averaged over recent steps: the same on every rank from the first step boundary
    on, so ranks that stop at a target loss stop together.

    Within the first step (before any boundary has shared the losses) it is this rank's own reported loss,
    so a loop that prints it every step sees a number from the start; None only before any ``report_loss``.
    """
    return current_session().smoothed_loss()


def accumulate(k: int) -> None:
    """Hand out each step's batch in ``k`` micro-batches from the next step on (gradient accumulation).

    The training loop stays as it is: the model exchanges gradients only after the last micro-batch, and the
    optimiser's (and a ``GradScaler``'s) ``step``/``zero_grad`` do nothing before it. The loss stays the mean
    over the micro-batch; each micro-batch is weighted by its share of the rank's samples. The global batch,
    and so AdaScale's gain and the noise scale, are those of the whole step. ``k`` micro-batches need a
    rank's share of at least ``k`` samples; smaller shares get fewer.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        fail(f"field 'accumulate': must be an integer >= 1, got {k!r}")
    current_session().set_accumulation(k)


def accumulating() -> bool:
    """Whether the micro-batch in hand is not the step's last: skip per-step work of your own (a learning-rate
    scheduler's ``step``, logging) while it is True."""
    return current_session().accumulating


def batch_size() -> int:
    """The global batch of the step in flight (between steps: the one the next step will take)."""
    return current_session().current_batch_size()


def local_batch_size() -> int:
    """This rank's samples in the step in flight, over all its micro-batches (between steps: its share of the
    next step's batch); 0 when the world outgrew the samples left in an epoch."""
    return current_session().current_local_batch_size()


def finish() -> None:
    """Declare training complete now (final checkpoint and ``done``); ``remaining_epochs`` calls it itself."""
    current_session().finish()


def checkpoint() -> Path | None:
    """Checkpoint the current step now (rank 0; None on other ranks or without a checkpoint folder)."""
    return current_session().save_checkpoint()


def device() -> torch.device:
    """The device this rank computes on (``cuda:<local rank>`` on GPU nodes, else the CPU)."""
    return current_session().device


def rank() -> int:
    return current_session().env.rank


def world_size() -> int:
    return current_session().env.world_size


def step() -> int:
    """Steps completed so far, counting those before a resume."""
    return current_session().step
