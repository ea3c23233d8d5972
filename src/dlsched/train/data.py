"""The elastic data loader: a global batch split over the ranks, resumable at any sample on any world size.

Each epoch walks one permutation of the data set drawn from the seed and the epoch number, so every rank
(and every later incarnation) can compute it alone. A step takes the next ``batch_size`` positions of the
permutation and splits them by the ranks' shares (``DLSCHED_BATCH_SHARES``, else equal); the position
(epoch, offset) advances by exactly the global batch. That position is all the checkpoint needs: a job that
resumes on another world size takes the very next samples, so none is lost or seen twice within the epoch.

An epoch's tail shorter than the world size would leave some rank an empty batch, so the last step of an
epoch takes the tail with it instead (a step at most ``world_size - 1`` samples over the batch). Only when
fewer samples are left than there are ranks (a job resumed on a larger world near an epoch's end) do some
ranks get an empty batch for that one step: tensors of length 0 shaped as a real batch, with weight 0.

The loading itself is PyTorch's ``torch.utils.data.DataLoader``, driven by a batch sampler that walks the
same plan as the training loop, so ``num_workers``, ``pin_memory``, ``prefetch_factor``,
``persistent_workers`` and any ``collate_fn`` work as they do there. Its workers run ahead of the training;
what they fetched is never the position: the checkpoint records only the steps trained. When the plan
changes under them (a new batch size, another ``accumulate``) the loader restarts its iterator at the
position reached, so no prefetched batch of the old plan is used. A ``TensorDataset`` with the default
collation is indexed a whole batch at a time (PyTorch's batched fetch, ``batch_size=None``), not sample by
sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sized
from typing import Any

import torch
import torch.utils.data
from torch.utils.data import Dataset, Sampler, TensorDataset, default_collate

from dlsched.core import InputError
from dlsched.train.session import Session, micro_split, micro_steps, split_counts
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


def empty_like(batch: Any) -> Any:
    """``batch`` with no samples: each tensor cut to length 0, a list of per-sample values emptied."""
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, Mapping):
        return type(batch)({k: empty_like(v) for k, v in batch.items()})  # type: ignore[call-arg]
    if isinstance(batch, tuple):
        items = [empty_like(v) for v in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else tuple(items)
    if isinstance(batch, list):
        nested = all(isinstance(v, (torch.Tensor, Mapping, tuple, list)) for v in batch) and batch
        return [empty_like(v) for v in batch] if nested else []
    return batch


class _PlanSampler(Sampler[Any]):
    """The batch sampler of the inner PyTorch loader: this rank's micro-batches of each step, from the loader's
    position and plan at the moment an iterator starts, up to the epoch's end."""

    def __init__(self, loader: DataLoader, tensors: bool) -> None:
        self.loader = loader
        self.tensors = tensors

    def __iter__(self) -> Iterator[Any]:
        lo = self.loader
        sampler = ElasticSampler(lo.sampler.size, lo.sampler.seed)
        sampler.epoch, sampler.offset = lo.sampler.epoch, lo.sampler.offset
        batch, shares, accumulation = lo.batch_size, lo.session.shares(), lo.session.accumulation
        rank = lo.session.env.rank
        lo._plan_key = (batch, shares, accumulation)
        return self._walk(sampler, batch, shares, accumulation, rank)

    def _walk(self, sampler: ElasticSampler, batch: int, shares: tuple[float, ...], accumulation: int,
              rank: int) -> Iterator[Any]:
        epoch = sampler.epoch
        while sampler.epoch == epoch:
            take, counts = sampler.plan(batch, shares)
            mine = sampler.indices(counts, rank)
            pad = sampler.order()[sampler.offset: sampler.offset + 1]  # stands in for an empty micro-batch
            first = 0
            for m in micro_split(counts[rank], micro_steps(counts, accumulation)):
                idx = mine[first: first + m] if m > 0 else pad
                first += m
                yield idx if self.tensors else idx.tolist()
            sampler.advance(take)

    def __len__(self) -> int:
        return len(self.loader) * max(1, self.loader.session.accumulation)


#: Options of ``torch.utils.data.DataLoader`` the elastic loader decides itself.
_OWN = ("shuffle", "sampler", "batch_sampler", "drop_last")


class DataLoader:
    """Batches of this rank's share of an elastic global batch; iterate it once per epoch.

    ``batch_size`` is the job's own initial global batch (``B0`` of the gradient statistics); the scheduler
    may change the batch within ``[world_size, max_batch_size]`` (``DLSCHED_BATCH_SIZE`` at start,
    ``control.json`` while running). Handing out a batch starts a step; asking for the next one ends it.
    Under ``dt.accumulate(k)`` a step is handed out as ``k`` micro-batches. Every other keyword
    (``num_workers``, ``pin_memory``, ``prefetch_factor``, ``persistent_workers``, ``worker_init_fn``,
    ``multiprocessing_context``, ``timeout``, ...) goes to ``torch.utils.data.DataLoader``.
    """

    def __init__(self, dataset: Dataset[Any], batch_size: int, *, max_batch_size: int | None = None,
                 seed: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None, **loader_kwargs: Any) -> None:
        try:
            self._setup(dataset, batch_size, max_batch_size, seed, collate_fn, loader_kwargs)
        except InputError as exc:  # a script's or a checkpoint's mistake: one error line, never a traceback
            fail(str(exc))

    def _setup(self, dataset: Dataset[Any], batch_size: int, max_batch_size: int | None, seed: int,
               collate_fn: Callable[[list[Any]], Any] | None, loader_kwargs: dict[str, Any]) -> None:
        if not isinstance(dataset, Sized):
            raise InputError("the data set must have a length (a map-style Dataset)", field="dataset")
        if batch_size < 1:
            raise InputError(f"must be >= 1, got {batch_size}", field="batch_size")
        if max_batch_size is not None and max_batch_size < batch_size:
            raise InputError(f"must be >= batch_size ({batch_size}), got {max_batch_size}", field="max_batch_size")
        for name in _OWN:
            if name in loader_kwargs:
                raise InputError("is decided by the elastic loader (a per-epoch permutation of the whole data "
                                 "set, split over the ranks)", field=name)
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
        self._plan_key: tuple[int, tuple[float, ...], int] | None = None
        tensors = isinstance(dataset, TensorDataset) and collate_fn is None
        plan = _PlanSampler(self, tensors)
        try:
            if tensors:  # batched fetch: the data set is indexed by a whole micro-batch at once
                self.inner: torch.utils.data.DataLoader[Any] = torch.utils.data.DataLoader(
                    dataset, sampler=plan, batch_size=None, **loader_kwargs)
            else:
                self.inner = torch.utils.data.DataLoader(dataset, batch_sampler=plan, collate_fn=self.collate_fn,
                                                         **loader_kwargs)
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc), field="DataLoader") from None
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

    def __iter__(self) -> Iterator[Any]:
        session = self.session
        session.close_open_step()
        epoch = self.sampler.epoch
        rank = session.env.rank
        batches: Iterator[Any] | None = None
        while self.sampler.epoch == epoch:
            shares = session.shares()
            take, counts = self.sampler.plan(self.batch_size, shares)
            micro = micro_split(counts[rank], micro_steps(counts, session.accumulation))
            if batches is None or self._plan_key != (self.batch_size, shares, session.accumulation):
                batches = iter(self.inner)  # the plan changed: start again where the training is
            for j, m in enumerate(micro):
                batch = next(batches)
                if m == 0:
                    batch = empty_like(batch)
                if j == 0:
                    session.begin_step(take, counts, micro)
                session.begin_micro(j)
                yield batch
            session.end_step()

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.sampler.state_dict(), "batch_size": self.batch_size}
