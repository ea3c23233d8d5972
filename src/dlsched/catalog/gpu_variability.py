"""PAL's per-GPU variability measurements: which files, how each names a GPU, and one loader for them.

GPUs of one type differ in speed, and PAL measured by how much by running one benchmark per application
class (:data:`~dlsched.catalog.classes.BENCHMARK_CLASSES`) on every GPU of three TACC clusters. The files
live under ``<data>/pal/aggregated_data`` (see the data directory's ``pal/README.md``):

* ``longhorn`` (V100): ``sim/{resnet,bert,pagerank}-longhorn-agg.csv``;
* ``frontera`` (Quadro RTX 5000): ``frontera/frontera-{resnet,bert,pagerank}-agg.csv``;
* ``ls6`` (A100): ``ls6/resnet-ls6-agg.csv``, class A only (the other classes are flat, 1.0);
* ``testbed32``: ``32gpu-variability.csv``, PAL's 32-GPU Frontera testbed with precomputed scores.

One row of a run file is one benchmark run on one GPU, ``perf`` time-like. A GPU's *PM-score* is PAL's
normalisation (:func:`pm_scores_from_runs`): the median over its runs of ``perf / median(perf of all runs
in the file)``, so 1.0 is the median GPU and 1.1 is 10% slower.

A GPU keeps one identity across the files of a family, so that the simulator can give a drawn GPU its own
score in every class. Longhorn's ResNet and BERT files name GPUs ``cabinet-node-device`` in their ``uuid``
column; its PageRank file names them by NVIDIA UUID, so there the identity is built from the ``cabinet``,
``node`` and ``device`` columns (:data:`CABINET_NODE_DEVICE`; the two namings correspond one to one).

Every file is read once per process and data directory; the loaded arrays are read-only, so the simulator's
truth and a profiler's view can share them without copying.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from dlsched.catalog.classes import BENCHMARK_CLASSES, CLASSES
from dlsched.core.errors import InputError

#: Where the measured files live inside the data directory.
AGGREGATED_DIR = Path("pal") / "aggregated_data"
#: ``gpu_key`` that builds ``cabinet-node-device`` from three columns instead of reading one column.
CABINET_NODE_DEVICE = "cab-node-dev"


@dataclass(frozen=True)
class Benchmark:
    """One measured file of a family: the benchmark it ran and how it names a GPU."""

    #: Benchmark name, a key of :data:`~dlsched.catalog.classes.BENCHMARK_CLASSES`.
    name: str
    #: Path relative to ``<data>/pal/aggregated_data``.
    file: str
    #: Column holding the GPU identity, or :data:`CABINET_NODE_DEVICE`.
    gpu_key: str = "uuid"
    #: Column of precomputed per-GPU scores (the testbed file); None when the file holds runs (``perf``).
    score_column: str | None = None

    @property
    def classes(self) -> tuple[str, ...]:
        """The classes this benchmark profiles."""
        return BENCHMARK_CLASSES[self.name]


@dataclass(frozen=True)
class VariabilityFamily:
    """A measured cluster: its GPU type and one file per benchmark (the first lists the most GPUs)."""

    name: str
    #: Name of the GPU type measured, a key of :data:`dlsched.core.KNOWN_GPU_TYPES`.
    gpu_type: str
    benchmarks: tuple[Benchmark, ...]
    #: A physical testbed: GPU i of a simulated cluster is the file's GPU i (PAL's A1/A2 simulations), so
    #: draws keep the file's GPU order for the first block.
    keeps_gpu_order: bool = False

    @property
    def has_runs(self) -> bool:
        """Whether the files hold single runs (False: precomputed per-GPU scores only)."""
        return all(b.score_column is None for b in self.benchmarks)

    def profiled_classes(self) -> tuple[str, ...]:
        """Classes some file profiles; the others are flat (every GPU 1.0)."""
        return tuple(c for c in CLASSES if any(c in b.classes for b in self.benchmarks))


def _testbed_column(benchmark: str) -> Benchmark:
    first = BENCHMARK_CLASSES[benchmark][0]
    return Benchmark(benchmark, "32gpu-variability.csv", gpu_key="GPU_UUID", score_column=f"PerfVar_{first}")


#: The testbed family: PAL's 32-GPU Frontera cluster, scores precomputed per GPU.
TESTBED = "testbed32"

#: Every measured family by name.
FAMILIES: Mapping[str, VariabilityFamily] = MappingProxyType({
    "longhorn": VariabilityFamily("longhorn", "v100", (
        Benchmark("resnet", "sim/resnet-longhorn-agg.csv"),
        Benchmark("bert", "sim/bert-longhorn-agg.csv"),
        Benchmark("pagerank", "sim/pagerank-longhorn-agg.csv", gpu_key=CABINET_NODE_DEVICE),
    )),
    "frontera": VariabilityFamily("frontera", "rtx5000", (
        Benchmark("resnet", "frontera/frontera-resnet-agg.csv"),
        Benchmark("bert", "frontera/frontera-bert-agg.csv"),
        Benchmark("pagerank", "frontera/frontera-pagerank-agg.csv"),
    )),
    "ls6": VariabilityFamily("ls6", "a100", (Benchmark("resnet", "ls6/resnet-ls6-agg.csv"),)),
    TESTBED: VariabilityFamily(TESTBED, "rtx5000", tuple(_testbed_column(b) for b in BENCHMARK_CLASSES),
                               keeps_gpu_order=True),
})
#: Family names, in the order reports list them.
FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)


def family(name: str, *, field: str = "variability") -> VariabilityFamily:
    """The family called ``name``; an :class:`InputError` on ``field`` lists the known ones otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise InputError(f"unknown variability profile '{name}' (known: {', '.join(FAMILY_NAMES)})",
                         field=field) from None


def has_measured_data(name: str, data_dir: Path | str | None) -> bool:
    """Whether ``data_dir`` holds every file the family ``name`` needs."""
    if data_dir is None:
        return False
    root = Path(data_dir) / AGGREGATED_DIR
    return all((root / b.file).is_file() for b in family(name).benchmarks)


# -- the loader ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class MeasuredBenchmark:
    """One benchmark file as measured: every GPU's PM-score and every normalised run (read-only arrays)."""

    family: str
    benchmark: Benchmark
    #: GPU identities: sorted for run files, in ``GPU_ID`` order for the testbed file.
    gpus: np.ndarray
    #: PM-score of each GPU in :attr:`gpus` (1.0 = median GPU; larger is slower).
    scores: np.ndarray
    #: Every run divided by the file's median run, in file order; None for precomputed scores.
    runs: np.ndarray | None = field(repr=False)

    @property
    def classes(self) -> tuple[str, ...]:
        return self.benchmark.classes

    def series(self) -> pd.Series:
        """The scores as a new Series indexed by GPU identity (``gpu``), for joins across files."""
        return pd.Series(self.scores, index=pd.Index(self.gpus, name="gpu"), name=self.benchmark.name)


def pm_scores_from_runs(perf: Sequence[float] | np.ndarray, gpu: Sequence[str] | np.ndarray) -> pd.Series:
    """Per-GPU PM-scores from benchmark runs: median over a GPU's runs of ``perf / median(all perf)``.

    ``perf`` is time-like (lower is faster), one value per run; ``gpu`` names the GPU of each run. This is
    PAL's normalisation: every run is divided by the median run of the file, and a GPU's score is the median
    of its runs (robust to the occasional straggler run, which reaches 3.6x on Longhorn). The result is
    indexed by GPU name, sorted.
    """
    p = pd.Series(np.asarray(perf, dtype=float))
    if len(p) == 0:
        raise InputError("a variability profile needs at least one run")
    if not np.isfinite(p).all() or (p <= 0).any():
        raise InputError("profile 'perf' values must be positive, finite times")
    ratio = p / float(p.median())
    scores = ratio.groupby(np.asarray(gpu).astype(str)).median().sort_index()
    scores.index.name = "gpu"
    return scores


def measured_benchmark(family_name: str, benchmark: str, data_dir: Path | str) -> MeasuredBenchmark:
    """The measured file of one benchmark of a family (read once per process and data directory).

    Raises :class:`InputError` for an unknown family or benchmark, or when the file is missing.
    """
    fam = family(family_name, field="profile")
    if benchmark not in {b.name for b in fam.benchmarks}:
        known = ", ".join(b.name for b in fam.benchmarks)
        raise InputError(f"family '{family_name}' has no benchmark '{benchmark}' (known: {known})",
                         field="benchmark")
    return _load(family_name, benchmark, str(Path(data_dir).resolve()))


def measured_family(family_name: str, data_dir: Path | str) -> dict[str, MeasuredBenchmark]:
    """Benchmark name -> its measured file, for every benchmark of the family (in the family's order)."""
    fam = family(family_name, field="profile")
    return {b.name: measured_benchmark(family_name, b.name, data_dir) for b in fam.benchmarks}


def measured_pm_scores(family_name: str, data_dir: Path | str) -> dict[str, np.ndarray]:
    """Per class, the PM-score of every GPU the class's benchmark measured (fresh, writable copies).

    The benchmarks of one family measured overlapping but different sets of GPUs, so the arrays may differ
    in length. A class the family does not profile (``ls6`` has only ResNet-50) is flat: ones, as many as
    the family's first benchmark has GPUs.
    """
    files = measured_family(family_name, data_dir)
    out: dict[str, np.ndarray] = {}
    for data in files.values():
        for cls in data.classes:
            out[cls] = data.scores.copy()
    flat = len(next(iter(files.values())).scores)
    return {c: out[c] if c in out else np.ones(flat) for c in CLASSES}


@lru_cache(maxsize=64)
def _load(family_name: str, benchmark: str, data_dir: str) -> MeasuredBenchmark:
    bench = next(b for b in FAMILIES[family_name].benchmarks if b.name == benchmark)
    path = Path(data_dir) / AGGREGATED_DIR / bench.file
    if not path.is_file():
        from dlsched.datadir import fetch_hint

        raise InputError(f"variability profile '{family_name}': {path} not found (set DLSCHED_DATA)"
                         f"{fetch_hint(AGGREGATED_DIR / bench.file)}")
    frame = pd.read_csv(path)
    if bench.score_column is not None:
        ordered = frame.sort_values("GPU_ID", kind="stable") if "GPU_ID" in frame.columns else frame
        scores = pd.to_numeric(ordered[bench.score_column], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(scores).all() or (scores <= 0).any():
            raise InputError(f"column {bench.score_column!r} must hold positive numbers", source=str(path),
                             field=bench.score_column)
        gpus = ordered[bench.gpu_key].astype(str).to_numpy()
        runs = None
    else:
        series = pm_scores_from_runs(frame["perf"].to_numpy(dtype=float), _gpu_identity(frame, bench.gpu_key))
        gpus, scores = series.index.to_numpy(dtype=str), series.to_numpy(dtype=float)
        perf = frame["perf"].to_numpy(dtype=float)
        runs = perf / float(np.median(perf))
    for arr in (gpus, scores, runs):
        if arr is not None:
            arr.setflags(write=False)
    return MeasuredBenchmark(family_name, bench, gpus, scores, runs)


def _gpu_identity(frame: pd.DataFrame, key: str) -> np.ndarray:
    if key == CABINET_NODE_DEVICE:
        ident = (frame["cabinet"].astype(str) + "-" + frame["node"].astype(int).astype(str) + "-"
                 + frame["device"].astype(int).astype(str))
    else:
        ident = frame[key].astype(str)
    return ident.to_numpy()


# -- the fitted summary shipped in the package ---------------------------------------------------------------
@cache
def fitted_summary() -> dict[str, Any]:
    """The summary ``scripts/fit_variability.py`` fitted from the measured files (``params/variability.json``).

    Per family and benchmark: 101 quantiles of the per-GPU scores, GPU and run counts, and the rank
    correlation between benchmarks on their common GPUs. The simulator draws from it when the data directory
    is absent; it holds statistics only, never measured rows. Read once per process; do not modify.
    """
    text = resources.files("dlsched.catalog").joinpath("params/variability.json").read_text(encoding="utf-8")
    return json.loads(text)
