"""The truth of two training workers sharing one GPU (packing), as the world plays it.

Three effects decide how fast a packed job trains:

* **Interference under free competition**: two unrestricted workers on one GPU each run at the measured pair
  speed relative to running alone (:class:`dlsched.catalog.colocation.ColocationTable`).
* **Share restriction** (MPS ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``, set in steps of 10%): a worker limited to a
  fraction ``p`` of the GPU's threads runs alone at :meth:`MpsCurve.speed` ``s(p)``, a concave saturating
  curve ``s(p) = (1 - exp(-k p)) / (1 - exp(-k))``: throughput climbs steeply at small thread shares and
  flattens once the kernels no longer fill the extra SMs. That shape is what published MPS measurements show
  for deep-learning kernels: GSLICE (Dhakal et al., SoCC'20, throughput against active-thread percentage for
  DNN inference: near-linear at small percentages, flat beyond a knee) and Gilman & Walls, "Characterizing
  concurrency mechanisms for NVIDIA GPUs under deep learning workloads" (Performance Evaluation 2021); Gimbal's
  own Figure 2-a (JCT against the second job's limit) is concave too. The default ``k`` gives 90% of the
  unrestricted speed at 50% of the threads (``s(0.5) = 0.9``); ``experiments/mps`` measures and fits a GPU's
  own curve. A sharing world may give a model a curve of its own (:mod:`dlsched.world.sharing_worlds`:
  the H200 world's curves follow how much of the GPU each model fills).
* **Combining the two**: the interference a worker suffers comes from its partner's activity on the GPU.
  Part of it is contention for the SMs, which disappears when the two limits do not overlap (NVIDIA's MPS
  documentation: limits that split the threads between clients "concentrate the work submitted by
  different clients to disjoint sets of the SMs and effectively minimize the interference"); the rest
  (memory bandwidth, caches) follows the partner's speed. With ``iso`` the share of interference that
  disjoint limits remove, worker ``a`` with limit ``p_a`` next to ``b`` with limit ``p_b`` runs at
  ``s(p_a) * (1 - (1 - r_a) * ((1 - iso) * s(p_b) + iso * clip(p_a + p_b - 1, 0, 1)))``, where ``r_a`` is
  ``a``'s measured free-competition pair speed. Two unrestricted workers (``p = 1``) reproduce the measured
  pair exactly; restricting ``b`` speeds ``a`` up; a partner limited to nothing leaves ``a`` as fast as
  alone. MPS limits do not isolate strictly (Gimbal section 2.2), hence the default ``iso`` of 0.5.

A data-parallel job synchronises every step, so it moves at its slowest worker's pace (``min`` of its
workers' speeds) unless its global batch is redistributed: with per-worker batch fractions ``f_i`` (summing
to 1, the global batch unchanged) a step takes ``max_i f_i / v_i`` of the time one worker would need for the
whole batch, so the job's speed relative to an unshared job is ``1 / (n max_i f_i / v_i)``. Fractions in
proportion to the workers' speeds (lossless input-sample stealing) make it the mean of the speeds.

Changing a worker's share restarts nothing but pauses the job for :data:`SHARE_CHANGE_S` (Gimbal section 7.4:
3.6 s on average to switch CUDA contexts, stable across benchmarks); changing the batch split costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from dlsched.catalog.colocation import ColocationTable, PairSpeed, canonical

#: Seconds a job pauses when the share restriction of any of its workers changes (Gimbal section 7.4).
SHARE_CHANGE_S = 3.6
#: Share restrictions are MPS active-thread percentages in steps of this many percent (Gimbal section 4.1).
SHARE_STEP_PCT = 10
#: Default curvature: 90% of the unrestricted speed at half the threads, s(0.5) = 1 / (1 + exp(-k/2)).
DEFAULT_K = 2.0 * math.log(9.0)
#: Default share of a pair's interference that non-overlapping share limits remove.
DEFAULT_ISOLATION = 0.5


@dataclass(frozen=True, slots=True)
class MpsCurve:
    """Speed of a worker alone on a GPU against the fraction of the GPU's threads it may use."""

    #: Curvature of ``s(p) = (1 - exp(-k p)) / (1 - exp(-k))``; larger saturates earlier.
    k: float = DEFAULT_K

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k) and 0.0 < self.k <= 50.0):
            raise ValueError(f"MPS curve curvature k must be in (0, 50], got {self.k!r}")

    def speed(self, fraction: float) -> float:
        """Relative speed (1 at ``fraction`` 1, 0 at 0) at an active-thread fraction in [0, 1]."""
        p = min(1.0, max(0.0, fraction))
        return (1.0 - math.exp(-self.k * p)) / (1.0 - math.exp(-self.k))

    @staticmethod
    def fit(points: Sequence[tuple[float, float]]) -> MpsCurve:
        """The curve closest (least squares) to measured ``(fraction, relative speed)`` points."""
        from scipy.optimize import minimize_scalar

        pts = [(float(p), float(v)) for p, v in points]
        if len(pts) < 2:
            raise ValueError("fitting an MPS curve needs at least two measured points")

        def loss(k: float) -> float:
            curve = MpsCurve(k)
            return sum((curve.speed(p) - v) ** 2 for p, v in pts)

        best = minimize_scalar(loss, bounds=(1e-3, 50.0), method="bounded")
        return MpsCurve(float(best.x))

    @staticmethod
    def from_file(path: str) -> MpsCurve:
        """The curve of a curve file (``experiments/mps`` writes one): JSON with ``points``, a list of
        ``[active-thread percentage, speed relative to 100 %]``; the curve is fitted to them."""
        import json

        from dlsched.core.errors import InputError

        try:
            data = json.loads(open(path).read())
        except OSError as exc:
            raise InputError(f"cannot read MPS curve file ({exc.strerror})", source=path) from None
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc})", source=path) from None
        points = data.get("points") if isinstance(data, dict) else None
        if not isinstance(points, list) or len(points) < 2:
            raise InputError("expected an object with 'points': at least two [percentage, speed] pairs",
                             source=path, field="points")
        pairs = []
        for i, pt in enumerate(points):
            ok = isinstance(pt, list) and len(pt) == 2 and all(isinstance(x, (int, float)) for x in pt)
            if not ok or not (0 < pt[0] <= 100 and math.isfinite(pt[1]) and 0 <= pt[1] <= 1.5):
                raise InputError(f"point {i} must be [percentage in (0, 100], relative speed in [0, 1.5]], got "
                                 f"{pt!r}", source=path, field=f"points[{i}]")
            pairs.append((pt[0] / 100.0, float(pt[1])))
        return MpsCurve.fit(pairs)


@dataclass(frozen=True, slots=True)
class WorkerShare:
    """One worker of a job as the world sees it: its own limit and who shares its GPU at which limit."""

    pct: int = 100
    partner: str | None = None
    partner_pct: int = 100


@dataclass(frozen=True, slots=True)
class JobSharing:
    """How a job's workers share their GPUs (placement order) and how its global batch is split among them.

    ``batch_split`` empty means an equal split; otherwise one fraction per worker, summing to 1.
    """

    workers: tuple[WorkerShare, ...]
    batch_split: tuple[float, ...] = ()

    @property
    def restricted_or_shared(self) -> bool:
        return any(w.pct < 100 or w.partner is not None for w in self.workers)


def job_speed(worker_speeds: Sequence[float], batch_split: Sequence[float] = ()) -> float:
    """A data-parallel job's speed relative to unshared workers: ``1 / (n max_i f_i / v_i)``."""
    n = len(worker_speeds)
    if n == 0:
        return 0.0
    split = list(batch_split) if batch_split else [1.0 / n] * n
    worst = 0.0
    for f, v in zip(split, worker_speeds, strict=True):
        if f <= 0:
            continue
        if v <= 0:
            return 0.0
        worst = max(worst, f / v)
    return 1.0 / (n * worst) if worst > 0 else 0.0


def balanced_split(worker_speeds: Sequence[float]) -> tuple[float, ...]:
    """Batch fractions in proportion to the workers' speeds (input-sample stealing): no straggler left."""
    total = sum(worker_speeds)
    n = len(worker_speeds)
    if total <= 0:
        return tuple(1.0 / n for _ in worker_speeds)
    return tuple(v / total for v in worker_speeds)


class PairTable(Protocol):
    """What the sharing model reads of a pair table (:class:`ColocationTable`, or a GPU generation's own in
    :mod:`dlsched.world.sharing_worlds`)."""

    def pair(self, model_a: str, model_b: str) -> PairSpeed: ...

    def memory_gb(self, model: str) -> float: ...


class SharingModel:
    """Worker and job speeds of packed jobs from the pair table and MPS curves (module docstring).

    ``curve`` is every model's curve unless ``curves`` (by canonical model name) gives the model its own.
    """

    def __init__(self, table: PairTable | None = None, curve: MpsCurve | None = None,
                 isolation: float = DEFAULT_ISOLATION, curves: Mapping[str, MpsCurve] | None = None) -> None:
        if not 0.0 <= isolation <= 1.0:
            raise ValueError(f"isolation must be in [0, 1], got {isolation!r}")
        self.table: PairTable = table or ColocationTable.load()
        self.curve = curve or MpsCurve()
        self.curves = {canonical(m): c for m, c in (curves or {}).items()}
        self.isolation = isolation

    def curve_of(self, model: str) -> MpsCurve:
        """The MPS curve ``model``'s workers follow."""
        return self.curves.get(canonical(model), self.curve) if self.curves else self.curve

    def worker_speed(self, model: str, worker: WorkerShare) -> float:
        """A worker's speed relative to running alone and unrestricted on its GPU."""
        own = self.curve_of(model).speed(worker.pct / 100.0)
        if worker.partner is None:
            return own
        r = self.table.pair(model, worker.partner).speed_a
        overlap = min(1.0, max(0.0, (worker.pct + worker.partner_pct) / 100.0 - 1.0))
        partner = self.curve_of(worker.partner).speed(worker.partner_pct / 100.0)
        activity = (1.0 - self.isolation) * partner + self.isolation * overlap
        return own * (1.0 - (1.0 - r) * activity)

    def worker_speeds(self, model: str, sharing: JobSharing) -> list[float]:
        return [self.worker_speed(model, w) for w in sharing.workers]

    def job_factor(self, model: str, sharing: JobSharing) -> float:
        """Factor on the job's unshared rate: its workers' speeds combined by its batch split."""
        return job_speed(self.worker_speeds(model, sharing), sharing.batch_split)

    def fits(self, models: Sequence[str], memory_gb: float) -> bool:
        """Whether workers of ``models`` fit one GPU's memory together."""
        return sum(self.table.memory_gb(m) for m in models) <= memory_gb
