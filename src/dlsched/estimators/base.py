"""The interface every goodput estimator offers to policies.

Sia, Pollux and any adaptive policy ask "how much useful progress per second would this job make on
``num_gpus`` GPUs of ``gpu_type`` over ``num_nodes`` nodes, and at which batch size?". A learned estimator
answers from profiles and observations; the simulator's oracle adapter (``dlsched.sim.oracle``) answers
from the world's truth, for comparison runs only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dlsched.core import ClusterView, JobView


@dataclass(frozen=True, slots=True)
class GoodputEstimate:
    """Estimated goodput (samples/s at the initial batch's statistical efficiency) and how it is reached."""

    goodput: float
    batch_size: int
    throughput_sps: float
    efficiency: float


class GoodputTableLike(Protocol):
    """Per-shape answers aligned with the queried shapes (see ``estimators.goodput.GoodputTable``).

    Read-only, so frozen dataclasses satisfy it.
    """

    @property
    def goodput(self) -> np.ndarray: ...

    @property
    def batch_size(self) -> np.ndarray: ...

    @property
    def throughput_sps(self) -> np.ndarray: ...

    @property
    def efficiency(self) -> np.ndarray: ...


class GoodputEstimator(Protocol):
    """What an allocation stage may ask of an estimator. Every method is required: a stage never probes
    an estimator for optional abilities."""

    #: "bootstrap", "oracle" or "none" (learn as you go).
    mode: str

    def update(self, view: ClusterView) -> None:
        """Ingest the observations in the view; forget jobs that are no longer active."""
        ...

    def estimate(self, job: JobView, gpu_type: str, num_nodes: int, num_gpus: int) -> GoodputEstimate | None:
        """Goodput of ``job`` on the shape, at the goodput-maximising batch size it may use; None if unknown."""
        ...

    def goodput_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> np.ndarray:
        """Goodput for each ``(num_nodes, num_gpus)`` row of ``shapes``; 0 where the job cannot run."""
        ...

    def evaluate_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> GoodputTableLike:
        """Like :meth:`goodput_many`, with the batch size, throughput and efficiency behind each goodput
        (batched evaluation: one call per job and type, not per shape)."""
        ...

    def unusable_types(self, job: JobView) -> tuple[str, ...]:
        """GPU types where the job reported that it cannot run (no model for the type, out of memory)."""
        ...

    def restart_delay_s(self, job: JobView) -> float | None:
        """The checkpoint-restore cost the estimator knows for the job (seconds); None if it does not know,
        and the policy then uses its own assumption."""
        ...
