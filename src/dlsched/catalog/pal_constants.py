"""PAL's per-model constants for rigid, iteration-count jobs (PAL/Blox traces).

PAL's traces give a job's length as an iteration count and leave the time per iteration to the simulator,
which looks it up per model; the simulator also labels each model with an application class (which per-GPU
variability profile applies to it) and multiplies the iteration time by a per-(model, GPU count) locality
penalty when the job's GPUs span nodes. The numbers live in ``params/pal_constants.json``, transcribed by
``scripts/fit_variability.py`` (through :func:`transcribe`) from ``pal/pal_simulation_constants.json``
(numbers from the PAL code) with the Sia/Pollux models added to the class map, so that one class map serves
every trace. The world plays iteration jobs with them and a scheduler assumes the same locality penalties,
so both read them here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dlsched.catalog.classes import DEFAULT_CLASS
from dlsched.core.errors import InputError

#: The measured constants inside the data directory.
MEASURED_FILE = Path("pal") / "pal_simulation_constants.json"

#: Classes of the Sia/Pollux models, which PAL's map does not name: ResNets are compute-bound like
#: ResNet-50 (A), the transformers BERT-like (B), speech and detection models mixed (C), NCF memory-bound (D).
SIA_MODEL_CLASSES: Mapping[str, str] = MappingProxyType({
    "imagenet": "classA", "cifar10": "classA",
    "bert": "classB", "gpt_pmp": "classB",
    "deepspeech2": "classC", "yolov3": "classC",
    "ncf": "classD",
})


class PalConstants:
    """Iteration times, application classes and locality penalties per model.

    Model names match exactly first and then case-insensitively, because traces spell the same model
    differently (``BERT`` in PAL's Philly traces, ``bert`` in Sia's) and no two known names differ only
    in case in a way that would change the answer.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.round_duration_s: float = float(data.get("round_duration_s", 360.0))
        self._iter: dict[str, float] = {m: float(t) for m, t in data["iteration_time_s"].items()}
        self._class: dict[str, str] = dict(data["perf_class"])
        self.default_class: str = str(data.get("default_perf_class", DEFAULT_CLASS))
        self._penalty: dict[str, dict[int, float]] = {
            m: {int(k): float(v) for k, v in table.items()} for m, table in data["locality_penalty"].items()
        }
        self._iter_ci = _casefold_index(self._iter)
        self._class_ci = _casefold_index(self._class)
        self._penalty_ci = _casefold_index(self._penalty)

    @classmethod
    def load(cls) -> PalConstants:
        """The packaged constants (read once per process; the object is immutable in use)."""
        return _load_packaged()

    @classmethod
    def from_data_dir(cls, data_dir: Path | str) -> PalConstants:
        """The constants transcribed from the data directory's measured file (read once per directory).

        Raises :class:`InputError` when the directory does not hold ``pal/pal_simulation_constants.json``.
        """
        return _load_measured(str(Path(data_dir).resolve()))

    # -- lookups ---------------------------------------------------------------------------------------
    def iteration_time_s(self, model: str, source: str) -> float:
        """Seconds per iteration of ``model`` on a median GPU, alone and packed on one node.

        ``source`` names the trace line the job came from, so an unknown model is reported where it was
        written rather than deep inside the simulation.
        """
        name = _resolve(model, self._iter, self._iter_ci)
        if name is None:
            known = ", ".join(sorted(self._iter))
            raise InputError(f"unknown model '{model}' has no PAL iteration time (known: {known})",
                             source=source, field="model")
        return self._iter[name]

    def perf_class(self, model: str) -> str:
        """Application class of ``model`` (``classA`` .. ``classD``); unknown models are ``classA``.

        PAL falls back to class A, the most variability-sensitive class, so that an unprofiled model is
        never assumed to be immune to slow GPUs.
        """
        name = _resolve(model, self._class, self._class_ci)
        return self._class[name] if name is not None else self.default_class

    def locality_penalty(self, model: str, num_gpus: int, override: float | None) -> float:
        """Multiplier on iteration time for a job whose ``num_gpus`` GPUs span more than one node.

        The caller applies it only to multi-node placements. ``override`` (an experiment knob, e.g. PAL's
        constant 1.7 for Synergy runs) replaces the table for every model; otherwise pairs the table does
        not list cost nothing (1.0), as in PAL.
        """
        if override is not None:
            return float(override)
        name = _resolve(model, self._penalty, self._penalty_ci)
        if name is None:
            return 1.0
        return self._penalty[name].get(int(num_gpus), 1.0)

    def models(self) -> set[str]:
        """Models with a known iteration time (those an iteration-count trace may name)."""
        return set(self._iter)

    def model_classes(self) -> dict[str, str]:
        """Every model the class map names, with its class (a copy)."""
        return dict(self._class)

    def locality_table(self) -> dict[str, dict[int, float]]:
        """The per-(model, GPU count) penalty table (a copy), for reports."""
        return {m: dict(t) for m, t in self._penalty.items()}


def _casefold_index(table: dict[str, Any]) -> dict[str, str]:
    """Lower-cased name -> the table's spelling.

    Names that collide case-insensitively with different values are left out, so a case-insensitive match
    never has to guess (``bert`` and ``BERT`` share a class and stay).
    """
    out: dict[str, str] = {}
    clashes: set[str] = set()
    for name in table:
        key = name.casefold()
        if key in out and table[out[key]] != table[name]:
            clashes.add(key)
        out[key] = name
    for key in clashes:
        del out[key]
    return out


def _resolve(model: str, table: dict[str, Any], folded: dict[str, str]) -> str | None:
    if model in table:
        return model
    return folded.get(str(model).casefold())


def transcribe(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The packaged form of ``pal_simulation_constants.json``: what :class:`PalConstants` reads.

    PAL keys its locality table ``"<model>|<GPU count>"``; the packaged form nests it per model. Keys that
    start with ``_`` are comments. The Sia/Pollux models join the class map (:data:`SIA_MODEL_CLASSES`).
    """
    classes = {m: c for m, c in raw["perf_class_by_model"].items() if not m.startswith("_")}
    for model, cls in SIA_MODEL_CLASSES.items():
        classes.setdefault(model, cls)
    penalty: dict[str, dict[str, float]] = {}
    for key, value in raw["locality_penalty_when_spread_across_nodes"].items():
        if key.startswith("_"):
            continue
        model, _, gpus = key.partition("|")
        penalty.setdefault(model, {})[str(int(gpus))] = float(value)
    return {
        "round_duration_s": raw["round_duration_s"],
        "iteration_time_s": dict(raw["per_iteration_time_s_by_model"]),
        "perf_class": classes,
        "default_perf_class": raw["perf_class_by_model"].get("_default", DEFAULT_CLASS),
        "locality_penalty": penalty,
    }


@cache
def _load_packaged() -> PalConstants:
    text = resources.files("dlsched.catalog").joinpath("params/pal_constants.json").read_text(encoding="utf-8")
    return PalConstants(json.loads(text))


@cache
def _load_measured(data_dir: str) -> PalConstants:
    path = Path(data_dir) / MEASURED_FILE
    if not path.is_file():
        from dlsched.datadir import fetch_hint

        raise InputError(f"PAL constants: {path} not found (set DLSCHED_DATA){fetch_hint(MEASURED_FILE)}")
    return PalConstants(transcribe(json.loads(path.read_text(encoding="utf-8"))))
