"""Measured speeds of two training jobs sharing a GPU, per worker memory, and profiled GPU utilisation.

One table (``params/colocation.json``, derived by ``scripts/fit_colocation.py`` from Lucid's 1+1 GPU pairs on
RTX 3090, Gavel's packed pair throughputs on V100 and PAL's multi-GPU pairs) answers "how fast does each of
two jobs train when one worker of each shares a GPU, with nothing restricted" (free competition), relative to
training alone. The world plays packed jobs from it; Lucid-style schedulers read the profiled utilisation,
which a real cluster measures before packing, never the pair speeds.

Rule for a pair the table lacks, in order (:meth:`ColocationTable.pair`):

1. the measured pair, either order;
2. each unmeasured model replaced by its documented stand-in (``proxies``: VGG-11/16 -> VGG-19, DeepSpeech2 ->
   LSTM, PLNAS/OFA -> MobileNetV3, LLaMA -> GPT-2 XL), then the measured pair;
3. otherwise each job's speed is the median of its speeds over every partner it was measured with (how
   sensitive it is to sharing at all), and the median over all measured speeds for a model never measured.

Model names are matched lower-case with ``-`` and ``_`` removed, so ``ResNet-18``, ``resnet18`` and
``RESNET_18`` are one model.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


def canonical(model: str) -> str:
    """The table's spelling of a model name (lower-case, no ``-`` or ``_``)."""
    return model.lower().replace("_", "").replace("-", "")


@dataclass(frozen=True, slots=True)
class PairSpeed:
    """Speeds of job ``a`` and job ``b`` sharing a GPU, each relative to running alone; how it was found."""

    speed_a: float
    speed_b: float
    #: ``measured``, ``proxy`` or ``default`` (rule 1, 2 or 3 of the module docstring).
    how: str


class ColocationTable:
    """Pair speeds, per-worker memory and profiled utilisation by canonical model name."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._pairs: dict[tuple[str, str], tuple[float, float]] = {}
        per_model: dict[str, list[float]] = {}
        for p in data["pairs"]:
            a, b = canonical(p["a"]), canonical(p["b"])
            sa, sb = float(p["speed_a"]), float(p["speed_b"])
            self._pairs[(a, b)] = (sa, sb)
            self._pairs[(b, a)] = (sb, sa)
            per_model.setdefault(a, []).append(sa)
            per_model.setdefault(b, []).append(sb)
        self._sensitivity = {m: statistics.median(v) for m, v in per_model.items()}
        self._overall = statistics.median(s for v in per_model.values() for s in v)
        self._proxy = {canonical(m): canonical(p["model"]) for m, p in data.get("proxies", {}).items()}
        self._memory = {canonical(m): float(v) for m, v in data["memory_gb"].items()}
        self._util = {canonical(m): float(v) for m, v in data["gpu_util_pct"].items()}
        self._score = {canonical(m): {int(b): int(v) for b, v in by_batch.items()}
                       for m, by_batch in data.get("share_score", {}).items()}
        self._median_memory = statistics.median(self._memory.values())
        self._median_util = statistics.median(self._util.values())

    @staticmethod
    @cache
    def load() -> ColocationTable:
        text = resources.files("dlsched.catalog").joinpath("params/colocation.json").read_text()
        return ColocationTable(json.loads(text))

    def _stand_in(self, model: str) -> str:
        m = canonical(model)
        return self._proxy.get(m, m)

    def pair(self, model_a: str, model_b: str) -> PairSpeed:
        """Free-competition speeds of ``model_a`` and ``model_b`` sharing a GPU (module docstring's rule)."""
        a, b = canonical(model_a), canonical(model_b)
        got = self._pairs.get((a, b))
        if got is not None:
            return PairSpeed(got[0], got[1], "measured")
        pa, pb = self._stand_in(a), self._stand_in(b)
        got = self._pairs.get((pa, pb))
        if got is not None:
            return PairSpeed(got[0], got[1], "proxy")
        return PairSpeed(self._sensitivity.get(pa, self._overall), self._sensitivity.get(pb, self._overall),
                         "default")

    def memory_gb(self, model: str) -> float:
        """GPU memory one worker of ``model`` needs (its stand-in's, else the median over profiled models)."""
        m = canonical(model)
        if m in self._memory:
            return self._memory[m]
        return self._memory.get(self._stand_in(m), self._median_memory)

    def gpu_util_pct(self, model: str) -> float:
        """GPU utilisation (%) ``model`` shows alone, as profiled (its stand-in's, else the median)."""
        m = canonical(model)
        if m in self._util:
            return self._util[m]
        return self._util.get(self._stand_in(m), self._median_util)

    def share_score(self, model: str, batch_size: int | None = None) -> int:
        """Lucid's sharing score (0, 1 or 2: how much a job suffers and inflicts when packed) of ``model`` at
        ``batch_size``, as Lucid profiles it before packing.

        Lucid's profiled label at the nearest profiled batch size (its stand-in's when Lucid did not profile
        the model; the median batch when none is given); for a model Lucid never profiled, Lucid's
        analyzer's labelling rule on the model's median free-competition speed: below 0.85 -> 2, below
        0.95 -> 1, else 0.
        """
        m = canonical(model)
        by_batch = self._score.get(m) or self._score.get(self._stand_in(m))
        if by_batch:
            batches = sorted(by_batch)
            target = batch_size if batch_size else batches[len(batches) // 2]
            return by_batch[min(batches, key=lambda b: (abs(b - target), b))]
        speed = self._sensitivity.get(m, self._sensitivity.get(self._stand_in(m), self._overall))
        return 2 if speed < 0.85 else 1 if speed < 0.95 else 0

    def known(self, model: str) -> bool:
        """Whether ``model`` or its stand-in was measured in some pair."""
        return self._stand_in(model) in self._sensitivity
