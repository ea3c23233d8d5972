"""Which active jobs hold which GPUs, kept up to date on placement events rather than rebuilt every round.

At 25,600 GPUs and thousands of running jobs, the engine's per-round questions "which jobs share a GPU or run
under a share restriction" (packing, :mod:`dlsched.sim.colocated`) and "how many GPUs of each type are in
use" (the round record) would otherwise be scans of every placement, every stretch of time. The engine
tells :class:`GpuHolders` of each placement change (a job placed, moved, emptied, completed; a worker's
share restriction or batch split changed), at a cost proportional to the GPUs that changed hands, and asks:

* :meth:`GpuHolders.sharing_candidates`: the jobs :func:`~dlsched.sim.colocated.sharing_of` can report,
  those with a share restriction or uneven split and those on a GPU another job holds, in arrival order
  (``sharing_of`` over them equals ``sharing_of`` over every active job: the test checks it); empty in the
  common case where no job shares, so a run without packing pays nothing.
* :meth:`GpuHolders.used_by_type`: GPUs held per type, with the GPUs a round's profiling uses on top.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from dlsched.core import Cluster


class GpuHolders:
    """Per GPU, the active jobs holding it; per type, the GPUs held by at least one job."""

    def __init__(self, cluster: Cluster) -> None:
        self._type_of = np.asarray(cluster.gpu_type_index, dtype=np.int64)
        self.num_types = len(cluster.type_names)
        #: GPU -> job ids holding it, in the order they took it.
        self._holders: dict[int, list[str]] = {}
        #: GPUs held by two jobs or more.
        self._shared: set[int] = set()
        #: Job id -> (arrival order, GPUs held); only jobs holding GPUs.
        self._jobs: dict[str, tuple[int, tuple[int, ...]]] = {}
        #: Placed jobs whose workers run under a share restriction or split the batch unevenly.
        self._touched: set[str] = set()
        self._held_by_type = np.zeros(self.num_types, dtype=np.int64)

    @property
    def running(self) -> int:
        """Jobs holding GPUs."""
        return len(self._jobs)

    def update(self, job_id: str, order: int, gpus: tuple[int, ...], touched: bool) -> None:
        """The job now holds ``gpus`` (empty: none), ``touched`` if restricted or splitting unevenly.

        ``order`` is the job's place in arrival order (the engine's active set iterates in it). Costs the
        GPUs the job gave up plus those it took.
        """
        old = self._jobs.get(job_id)
        old_gpus = old[1] if old is not None else ()
        if old_gpus != gpus:
            for g in old_gpus:
                holders = self._holders[g]
                holders.remove(job_id)
                if not holders:
                    del self._holders[g]
                    self._held_by_type[self._type_of[g]] -= 1
                elif len(holders) < 2:
                    self._shared.discard(g)
            for g in gpus:
                holders = self._holders.setdefault(g, [])
                holders.append(job_id)
                if len(holders) == 1:
                    self._held_by_type[self._type_of[g]] += 1
                else:
                    self._shared.add(g)
        if gpus:
            self._jobs[job_id] = (order, gpus)
        else:
            self._jobs.pop(job_id, None)
        if gpus and touched:
            self._touched.add(job_id)
        else:
            self._touched.discard(job_id)

    def sharing_candidates(self) -> list[str]:
        """Placed jobs that are restricted, split unevenly or on a GPU another job holds, in arrival order."""
        if not self._shared and not self._touched:
            return []
        ids = set(self._touched)
        for g in self._shared:
            ids.update(self._holders[g])
        return sorted(ids, key=lambda j: self._jobs[j][0])

    def used_by_type(self, extra: Iterable[int] = ()) -> np.ndarray:
        """GPUs in use per type (index of ``Cluster.type_names``): those held, plus ``extra`` ones not held."""
        out = self._held_by_type.copy()
        for g in set(extra):
            if g not in self._holders:
                out[self._type_of[g]] += 1
        return out

    def held(self, gpu: int) -> tuple[str, ...]:
        """Job ids holding ``gpu``, in the order they took it."""
        return tuple(self._holders.get(gpu, ()))
