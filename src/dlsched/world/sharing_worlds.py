"""Sharing worlds by GPU generation: which pair speeds and MPS curves the world plays, and where each came from.

How much two jobs lose when they share a GPU depends on the GPU. On the older GPUs most public measurements
come from (Gavel's V100 pairs, Lucid's RTX 3090 pairs) a pair usually does more work together than one after
the other; on an H200 two compute-bound training jobs sharing by time-slicing each run at 0.45-0.47 of their
speed alone, a pair sum of 0.90-0.94 (``$DLSCHED_DATA/h200/gpu_profile.json``). A result about packing is
therefore a result about one generation, and the world says which (``world.sharing_world``):

* ``old-gpus`` (the default): the packaged pair table (:class:`~dlsched.catalog.colocation.ColocationTable`,
  Lucid + Gavel + PAL) and one MPS curve for every model, exactly as before;
* ``h200``: the pairs measured on one H200, with :class:`H200PairTable`'s rule for the rest, and per-model
  MPS curves from the measured step times (:func:`h200_curves`).

Every pair and curve carries its provenance, one of :data:`KINDS` (``measured``, ``stand-in``, ``rule``);
:func:`sharing_provenance` counts them over the models of a run, and the run records that count in its
``config.json`` (``data.sharing``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations_with_replacement
from typing import Any

from dlsched.catalog.colocation import ColocationTable, PairSpeed, canonical
from dlsched.core.errors import InputError
from dlsched.world.sharing import DEFAULT_ISOLATION, MpsCurve, SharingModel

#: The named sharing worlds (``world.sharing_world``).
SHARING_WORLDS: tuple[str, ...] = ("old-gpus", "h200")
#: Kinds of provenance of a pair speed or an MPS curve, most direct first.
KINDS: tuple[str, ...] = ("measured", "stand-in", "rule")
#: :class:`PairSpeed`'s ``how`` -> the provenance kind it is.
_KIND_OF = {"measured": "measured", "proxy": "stand-in", "default": "rule"}
#: The H200 measurements, inside the data directory.
H200_FILE = "h200/gpu_profile.json"
#: The profile's model keys (named after Sia's families) -> the architecture they are, as traces name it.
H200_MODELS: dict[str, str] = {"cifar10": "resnet18", "imagenet": "resnet50", "bert": "bert", "gpt2": "gpt2",
                               "ncf": "ncf"}
#: Unmeasured models played as a measured one on the H200, and why.
H200_STAND_INS: dict[str, tuple[str, str]] = {
    "llama": ("gpt2", "decoder-only transformer language model, compute-bound like GPT-2 small (measured)"),
}
#: A model fills less than this share of the GPU's saturated throughput at its pair batch: a small-kernel
#: model (ncf, 0.31), which gains from sharing; the rule for unmeasured pairs is fitted to the others.
SMALL_KERNEL_FILL = 0.5


def gpu_fill(step_time_s: Mapping[str, float], model: str, batch: int) -> float | None:
    """Share of the GPU's saturated throughput ``model`` reaches at ``batch``: samples/s at ``batch`` over the
    best samples/s at any measured batch (None when ``batch`` was not measured)."""
    rows = {int(k.split("/")[1]): float(v) for k, v in step_time_s.items() if k.split("/")[0] == model}
    if batch not in rows:
        return None
    best = max(b / t for b, t in rows.items())
    return (batch / rows[batch]) / best


class H200PairTable:
    """Free-competition pair speeds on one H200: measured pairs, stand-ins, and a rule fitted to the rest.

    Rule for a pair of the profile's models that is absent, or of an unmeasured model (after its stand-in,
    :data:`H200_STAND_INS`): each job runs at the mean of its own measured speeds next to compute-bound
    partners (a measured model), else at the mean speed of both jobs over every measured pair of two
    compute-bound models (``rule_speed``, 0.459 on the 2026-11-28 file: time-slicing gives each process about half of the GPU's
    time, less the switching). Compute-bound means filling at least :data:`SMALL_KERNEL_FILL` of the GPU at
    the pair batch (:func:`gpu_fill`); an unmeasured model is taken as compute-bound, since the one
    small-kernel model measured (NeuMF) is a recommendation model unlike any of the trace models, and no
    measurement says which vision model would behave like it. Memory and profiled utilisation are the
    packaged table's (``base``).
    """

    def __init__(self, profile: Mapping[str, Any], base: ColocationTable | None = None) -> None:
        self.base = base or ColocationTable.load()
        steps = profile["step_time_s"]
        self.pairs: dict[tuple[str, str], tuple[float, float]] = {}
        self.batch: dict[str, int] = {}
        #: (model, its speed) for both jobs of every measured pair
        speeds: list[tuple[str, str, float]] = []
        for p in profile["pairs"]:
            a, b = H200_MODELS.get(p["a"], p["a"]), H200_MODELS.get(p["b"], p["b"])
            sa, sb = float(p["speed_a"]), float(p["speed_b"])
            self.pairs[(a, b)] = (sa, sb)
            if a != b:
                self.pairs[(b, a)] = (sb, sa)
            self.batch[a], self.batch[b] = int(p["batch_a"]), int(p["batch_b"])
            speeds += [(a, b, sa), (b, a, sb)]
        key_of = {v: k for k, v in H200_MODELS.items()}
        self.fill = {m: gpu_fill(steps, key_of.get(m, m), b) for m, b in self.batch.items()}
        heavy = {m for m, f in self.fill.items() if f is not None and f >= SMALL_KERNEL_FILL}
        among = [(m, v) for m, other, v in speeds if m in heavy and other in heavy]
        if not among:
            raise InputError("the H200 profile has no pair of two compute-bound models to fit the rule to",
                             source=H200_FILE, field="pairs")
        #: Mean speed of both jobs of every measured pair of two compute-bound models.
        self.rule_speed = statistics.fmean(v for _, v in among)
        #: Per compute-bound model, the mean of its speeds next to compute-bound partners.
        self.own = {m: statistics.fmean(v for x, v in among if x == m) for m in heavy}

    def _stand_in(self, model: str) -> str:
        m = canonical(model)
        return H200_STAND_INS[m][0] if m in H200_STAND_INS else m

    def pair(self, model_a: str, model_b: str) -> PairSpeed:
        """Speeds of ``model_a`` and ``model_b`` sharing an H200 (the class docstring's rule)."""
        a, b = canonical(model_a), canonical(model_b)
        if (a, b) in self.pairs:
            return PairSpeed(*self.pairs[(a, b)], "measured")
        pa, pb = self._stand_in(a), self._stand_in(b)
        if (pa, pb) in self.pairs:
            return PairSpeed(*self.pairs[(pa, pb)], "proxy")
        return PairSpeed(self.own.get(pa, self.rule_speed), self.own.get(pb, self.rule_speed), "default")

    def memory_gb(self, model: str) -> float:
        return self.base.memory_gb(model)

    def gpu_util_pct(self, model: str) -> float:
        return self.base.gpu_util_pct(model)


def h200_curves(table: H200PairTable) -> dict[str, tuple[MpsCurve, str]]:
    """Per measured model, the MPS curve of the H200 world and how it was found.

    No MPS measurement exists for the H200, so the curves are a rule on measured step times: a model that
    fills ``u`` of the GPU's saturated throughput at its batch (:func:`gpu_fill`) runs, limited to a fraction
    ``p`` of the threads, at ``min(1, p / u)``, and the world's curve form is fitted to that at
    ``p = 0.1 .. 1``. A compute-bound model (``u`` near 1) then loses nearly in proportion to its limit; a
    small-kernel one loses nothing until its limit is below ``u``.
    """
    out = {}
    for model, u in sorted(table.fill.items()):
        if u is None:
            continue
        points = [(p / 10, min(1.0, (p / 10) / u)) for p in range(1, 11)]
        curve = MpsCurve.fit(points)
        out[model] = (curve, f"rule: min(1, p / {u:.2f}) fitted (k = {curve.k:.3g}); {u:.2f} is the share of "
                             f"the H200's saturated throughput measured at batch {table.batch[model]}")
    return out


@dataclass(frozen=True)
class SharingWorld:
    """A named sharing world: the model the world plays packed jobs with, and where its numbers came from."""

    name: str
    model: SharingModel
    #: Per model with a curve of its own: the provenance line of that curve.
    curve_how: Mapping[str, str]
    #: The curve every other model takes, and its provenance line.
    default_curve_how: str

    def provenance(self, models: Iterable[str]) -> dict[str, Any]:
        """Provenance of every pair among ``models`` (each unordered pair once, a model with itself included)
        and of each model's MPS curve: counts per kind, and the pairs and curves by name."""
        names = sorted({canonical(m) for m in models})
        pairs: dict[str, str] = {}
        counts = dict.fromkeys(KINDS, 0)
        for a, b in combinations_with_replacement(names, 2):
            kind = _KIND_OF[self.model.table.pair(a, b).how]
            pairs[f"{a}+{b}"] = kind
            counts[kind] += 1
        curves = {m: self.curve_how.get(m, self.default_curve_how) for m in names}
        curve_counts = dict.fromkeys(KINDS, 0)
        for how in curves.values():
            curve_counts[how.split(":")[0]] += 1
        return {"world": self.name, "pairs": counts, "pair_kinds": pairs, "mps_curves": curve_counts,
                "mps_curve_kinds": curves, "isolation": self.model.isolation}


def load_h200_profile() -> dict[str, Any]:
    """The H200 measurements, or one :class:`InputError` naming the file when the data directory lacks it."""
    from dlsched.datadir import require_data

    path = require_data(H200_FILE, "H200 pair speeds (world.sharing_world=h200)")
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise InputError(f"not valid JSON ({exc})", source=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("pairs"), list) or "step_time_s" not in data:
        raise InputError("expected an object with 'pairs' and 'step_time_s'", source=str(path), field="pairs")
    return data


def sharing_world(name: str, curve: MpsCurve | None = None, *, curve_file: str | None = None,
                  isolation: float = DEFAULT_ISOLATION) -> SharingWorld:
    """The sharing world ``name`` (:data:`SHARING_WORLDS`). ``curve`` is the curve of every model without one
    of its own (the ``world.mps_curve_k`` one unless ``curve_file``, a measured curve file, gave it)."""
    if name not in SHARING_WORLDS:
        raise InputError(f"unknown sharing world '{name}' (known: {', '.join(SHARING_WORLDS)})",
                         field="sharing_world")
    curve = curve or MpsCurve()
    default_how = (f"measured: fitted to {curve_file} (k = {curve.k:.3g})" if curve_file else
                   f"rule: one saturating curve for every model, k = {curve.k:.3g} (published MPS curve shapes, "
                   f"dlsched.world.sharing)")
    if name == "old-gpus":
        return SharingWorld(name, SharingModel(ColocationTable.load(), curve, isolation), {}, default_how)
    table = H200PairTable(load_h200_profile())
    own = h200_curves(table)
    if curve_file is None:
        # models without a curve of their own take the median curvature of those with one
        k = statistics.median(c.k for c, _ in own.values())
        curve = MpsCurve(k)
        default_how = f"rule: the median curvature of the H200 curves, k = {k:.3g}"
    model = SharingModel(table, curve, isolation, curves={m: c for m, (c, _) in own.items()})
    return SharingWorld(name, model, {m: how for m, (_, how) in own.items()}, default_how)
