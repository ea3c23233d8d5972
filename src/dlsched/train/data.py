"""The elastic data loader: a global batch split over the ranks, resumable at any sample on any world size.

Each epoch walks one permutation of the data set drawn from the seed and the epoch number, so every rank
(and every later incarnation) can compute it alone. A step takes the next ``batch_size`` positions of the
permutation and splits them by the ranks' shares (``DLSCHED_BATCH_SHARES``, else equal); the position
(epoch, offset) advances by exactly the global batch. That position is all the checkpoint needs: a job that
resumes on another world size takes the very next samples, so none is lost or seen twice within the epoch.

An epoch's tail shorter than the world size would leave some rank an empty batch, so the last step of an
epoch takes the tail with it instead (a step at most ``world_size - 1`` samples over the batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sized
from typing import Any

import torch
from torch.utils.data import Dataset, TensorDataset, default_collate

from dlsched.core import InputError
from dlsched.train.session import Session, split_counts
from dlsched.train.state import current_session, fail


def permutation(seed: int, epoch: int, n: int) -> torch.Tensor:
    """The order in which epoch ``epoch`` visits ``n`` samples (the same on every rank and incarnation)."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))


class ElasticSampler:
    """Position (epoch, offset) in the per-epoch permutations, and the split of each global batch."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed = size, seed
        self.epoch, self.offset = 0, 0
        self._perm: tuple[int, torch.Tensor] | None = None

    def order(self) -> torch.Tensor:
        if self._perm is None or self._perm[0] != self.epoch:
            self._perm = (self.epoch, permutation(self.seed, self.epoch, self.size))
        return self._perm[1]

    def plan(self, batch: int, shares: tuple[float, ...]) -> tuple[int, list[int]]:
        """The next step's global batch (``take``) and each rank's count."""
        left = self.size - self.offset
        take = min(batch, left)
        if 0 < left - take < len(shares):
            take = left
        return take, split_counts(take, shares)

    def indices(self, counts: list[int], rank: int) -> torch.Tensor:
        first = self.offset + sum(counts[:rank])
        return self.order()[first: first + counts[rank]]

    def advance(self, take: int) -> None:
        self.offset += take
        if self.offset >= self.size:
            self.epoch, self.offset = self.epoch + 1, 0

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "size": self.size, "epoch": self.epoch, "offset": self.offset}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["size"]) != self.size:
            raise InputError(f"the checkpoint's data set has {state['size']} samples, this one {self.size}",
                             field="dataset")
        self.seed, self.epoch, self.offset = int(state["seed"]), int(state["epoch"]), int(state["offset"])


class DataLoader:
    """Batches of this rank's share of an elastic global batch; iterate it once per epoch.

    ``batch_size`` is the job's own initial global batch (``B0`` of the gradient statistics); the scheduler
    may change the batch within ``[world_size, max_batch_size]`` (``DLSCHED_BATCH_SIZE`` at start,
    ``control.json`` while running). Handing out a batch starts a step; asking for the next one ends it.
    """

    def __init__(self, dataset: Dataset[Any], batch_size: int, *, max_batch_size: int | None = None,
                 seed: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None) -> None:
        try:
            self._setup(dataset, batch_size, max_batch_size, seed, collate_fn)
        except InputError as exc:  # a script's or a checkpoint's mistake: one error line, never a traceback
            fail(str(exc))

    def _setup(self, dataset: Dataset[Any], batch_size: int, max_batch_size: int | None, seed: int,
               collate_fn: Callable[[list[Any]], Any] | None) -> None:
        if not isinstance(dataset, Sized):
            raise InputError("the data set must have a length (a map-style Dataset)", field="dataset")
        if batch_size < 1:
            raise InputError(f"must be >= 1, got {batch_size}", field="batch_size")
        if max_batch_size is not None and max_batch_size < batch_size:
            raise InputError(f"must be >= batch_size ({batch_size}), got {max_batch_size}", field="max_batch_size")
        self.session: Session = current_session()
        world = self.session.env.world_size
        if len(dataset) < world:
            raise InputError(f"has {len(dataset)} samples, fewer than the {world} ranks", field="dataset")
        self.dataset = dataset
        self.dataset_size = len(dataset)
        self.init_batch = batch_size
        self.max_batch_size = max_batch_size
        self.collate_fn = collate_fn or default_collate
        self.sampler = ElasticSampler(self.dataset_size, seed)
        saved = self.session.part("loader")
        start = self.session.env.batch_size
        if saved is not None:
            self.sampler.load_state_dict(saved["sampler"])
            start = start or int(saved["batch_size"])
        self.batch_size = batch_size
        self.set_batch_size(start or batch_size)
        self.session.attach_loader(self, batch_size)

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    @property
    def local_batch_size(self) -> int:
        """This rank's share of the current global batch (away from an epoch's end)."""
        return split_counts(self.batch_size, self.session.shares())[self.session.env.rank]

    def set_batch_size(self, batch: int) -> None:
        """Use global batch ``batch`` from the next step on (kept within ``[world_size, max_batch_size]``)."""
        upper = self.max_batch_size if self.max_batch_size is not None else max(batch, self.init_batch)
        self.batch_size = max(self.session.env.world_size, min(batch, upper))

    def advance(self, take: int) -> None:
        self.sampler.advance(take)

    def __len__(self) -> int:
        """Steps left in the current epoch at the current batch size."""
        left = self.dataset_size - self.sampler.offset
        return max(1, -(-left // self.batch_size))

    def _fetch(self, idx: torch.Tensor) -> Any:
        if isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
            return tuple(t[idx] for t in self.dataset.tensors)
        return self.collate_fn([self.dataset[i] for i in idx.tolist()])

    def __iter__(self) -> Iterator[Any]:
        session = self.session
        session.close_open_step()
        epoch = self.sampler.epoch
        while self.sampler.epoch == epoch:
            take, counts = self.sampler.plan(self.batch_size, session.shares())
            batch = self._fetch(self.sampler.indices(counts, session.env.rank))
            session.begin_step(take, counts)
            yield batch
            session.end_step()

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.sampler.state_dict(), "batch_size": self.batch_size}
