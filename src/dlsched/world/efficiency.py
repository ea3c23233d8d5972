"""Statistical efficiency of the Sia/Pollux models: how much training progress one sample buys.

A larger batch makes each step cheaper per sample but each sample less useful. Pollux measures this with
the gradient noise scale: with ``phi = grad_var / grad_sqr`` at the initial batch size ``B0`` and
``s = B / B0``, one step at batch ``B`` makes the progress of ``gain = (phi + 1) / (phi / s + 1)`` steps at
``B0``, so per sample the efficiency is ``gain / s = (phi + 1) / (phi + s)``: 1 at ``B0`` and falling with
``B``.

Progress is counted in samples at the initial batch size: goodput (samples/s x efficiency) is progress per
second, and a job is done at :meth:`EfficiencyModel.target_progress`. The packaged table
(``scripts/fit_efficiency.py``) holds, per model and per progress milestone, the efficiency of every
profiled batch size from that batch size's own gradient statistics; this reproduces the iterations each
batch size needed in the profiles to within 2%. Between profiled batch sizes the efficiency is interpolated
in log batch size; beyond the largest (or below the initial one) Pollux's formula extends it with the noise
scale implied at the nearest profiled size. Efficiency is piecewise constant in progress (one value per
statistical epoch), which also makes :meth:`EfficiencyModel.progress_bucket` an exact cache key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from dlsched.core.errors import InputError

#: Noise-to-signal ratio standing for "all noise" (efficiency 1 at every batch size).
_PHI_CAP = 1e9


@dataclass(frozen=True)
class _ModelTable:
    init_batch: int
    max_batch: int
    target: float
    #: Upper progress (samples) of each milestone.
    progress: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray
    log_sizes: np.ndarray
    scales: np.ndarray
    #: efficiency[milestone, batch size]
    eff: np.ndarray
    #: Noise ratio implied at the largest profiled size, for extrapolation, per milestone.
    phi_hi: np.ndarray
    #: Noise ratio at the initial batch, for batches below it, per milestone.
    phi_lo: np.ndarray


def _phi_from_eff(eff: np.ndarray | float, scale: float | np.ndarray) -> np.ndarray:
    """Invert ``eff = (phi + 1) / (phi + s)``: the noise ratio that gives efficiency ``eff`` at scale ``s``."""
    eff = np.asarray(eff, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = (eff * scale - 1.0) / (1.0 - eff)
    return np.where(eff >= 1.0, _PHI_CAP, np.clip(phi, 0.0, _PHI_CAP))


def _pollux(phi: np.ndarray | float, scale: np.ndarray | float) -> np.ndarray:
    return (np.asarray(phi) + 1.0) / (np.asarray(phi) + np.asarray(scale))


class EfficiencyModel:
    """Per-model efficiency tables; see the module docstring."""

    def __init__(self, params: dict[str, Any]) -> None:
        raw = params["models"]
        self._tables: dict[str, _ModelTable] = {}
        for name, entry in raw.items():
            if "same_as" in entry:
                continue
            self._tables[name] = self._build(entry)
        for name, entry in raw.items():
            if "same_as" in entry:
                self._tables[name] = self._tables[entry["same_as"]]

    @staticmethod
    def _build(e: dict[str, Any]) -> _ModelTable:
        sizes = np.asarray(e["batch_sizes"], dtype=float)
        b0 = float(e["init_batch_size"])
        eff = np.asarray(e["efficiency"], dtype=float)
        sqr = np.asarray(e["grad_sqr"], dtype=float)
        var = np.asarray(e["grad_var"], dtype=float)
        scales = sizes / b0
        with np.errstate(divide="ignore", invalid="ignore"):
            phi0 = np.where(sqr > 0, var / np.where(sqr > 0, sqr, 1.0), _PHI_CAP)
        phi_lo = np.clip(phi0, 0.0, _PHI_CAP)
        phi_hi = _phi_from_eff(eff[:, -1], scales[-1]) if len(sizes) > 1 else phi_lo
        return _ModelTable(init_batch=int(e["init_batch_size"]), max_batch=int(e["max_batch_size"]),
                           target=float(e["target_progress"]), progress=np.asarray(e["progress"], dtype=float),
                           grad_sqr=sqr, grad_var=var, log_sizes=np.log(sizes), scales=scales, eff=eff,
                           phi_hi=phi_hi, phi_lo=phi_lo)

    @classmethod
    def load(cls) -> EfficiencyModel:
        """The packaged tables (cached, shared by every World)."""
        return _load_packaged()

    def _table(self, model: str) -> _ModelTable:
        try:
            return self._tables[model]
        except KeyError:
            known = ", ".join(sorted(self._tables))
            raise InputError(f"no efficiency profile for model '{model}' (known: {known})") from None

    def models(self) -> set[str]:
        return set(self._tables)

    def init_batch_size(self, model: str) -> int:
        """Smallest profiled global batch: the batch at which efficiency is 1."""
        return self._table(model).init_batch

    def max_batch_size(self, model: str) -> int:
        """Largest profiled global batch (adaptive jobs never go beyond it)."""
        return self._table(model).max_batch

    def target_progress(self, model: str) -> float:
        """Work to finish training, in samples at the initial batch size."""
        return self._table(model).target

    def progress_bucket(self, model: str, progress: float) -> int:
        """Index of the milestone ``progress`` lies in; efficiency is constant inside one."""
        t = self._table(model)
        return min(int(np.searchsorted(t.progress, progress, side="left")), len(t.progress) - 1)

    def grad_stats(self, model: str, progress: float, batch_size: int | None = None) -> tuple[float, float]:
        """(grad_sqr, grad_var) a job reports at this progress.

        At the initial batch size (the default) these are the measured statistics. At another batch size the
        variance is the one for which Pollux's formula gives that batch's true efficiency, so an estimator
        fed these observations sees what a real job running at that batch would let it infer.
        """
        t = self._table(model)
        i = self.progress_bucket(model, progress)
        sqr, var = float(t.grad_sqr[i]), float(t.grad_var[i])
        if batch_size is None or batch_size == t.init_batch:
            return sqr, var
        scale = batch_size / t.init_batch
        phi = float(_phi_from_eff(self.efficiency(model, batch_size, progress), scale))
        if sqr > 0:
            return sqr, phi * sqr
        # The measured squared norm underflowed to zero (late epochs of some profiles): keep the measured
        # variance and report the norm that gives this batch's true efficiency, never the meaningless 0/0.
        var = var if var > 0 else 1.0
        return var / phi, var

    def efficiency(self, model: str, batch_size: float, progress: float) -> float:
        """Efficiency of one global batch size at this progress (1 at the initial batch size)."""
        return float(self.efficiency_many(model, np.asarray([batch_size], dtype=float), progress)[0])

    def efficiency_many(self, model: str, batch_sizes: np.ndarray, progress: float) -> np.ndarray:
        """Vectorised :meth:`efficiency` over an array of global batch sizes."""
        t = self._table(model)
        i = self.progress_bucket(model, progress)
        b = np.asarray(batch_sizes, dtype=float)
        out = np.interp(np.log(np.maximum(b, 1e-9)), t.log_sizes, t.eff[i])
        scale = b / t.init_batch
        above = scale > t.scales[-1]
        if above.any():
            out = np.where(above, _pollux(t.phi_hi[i], scale), out)
        below = scale < 1.0
        if below.any():
            out = np.where(below, _pollux(t.phi_lo[i], np.maximum(scale, 1e-9)), out)
        return out


@cache
def _load_packaged() -> EfficiencyModel:
    text = resources.files("dlsched").joinpath("world/params/efficiency.json").read_text(encoding="utf-8")
    return EfficiencyModel(json.loads(text))
