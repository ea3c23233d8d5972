"""Per-GPU performance variability (PAL, SC'24): the true slowdown of every simulated GPU, per class.

GPUs of one type differ in speed, and by how much depends on the application: compute-bound ResNet-like
jobs (class A) see the widest spread, BERT-like jobs (classes B and C) less, memory-bound PageRank-like jobs
(class D) almost none. PAL measures this by running one representative benchmark per class on every GPU of
a cluster. A GPU's *PM-score* for a class is the median over its runs of ``perf / median(perf of all runs in
the file)``; ``perf`` is time-like, so 1.0 is the median GPU and 1.1 is 10% slower. A synchronous job runs
at the pace of the slowest GPU it holds, which is what :meth:`GpuSpeeds.slowest` answers.

Measured families (files under ``<data>/pal/aggregated_data``):

* ``longhorn`` (TACC Longhorn, V100): ``sim/{resnet,bert,pagerank}-longhorn-agg.csv``;
* ``frontera`` (TACC Frontera, Quadro RTX 5000): ``frontera/frontera-{resnet,bert,pagerank}-agg.csv``;
* ``ls6`` (TACC Lonestar6, A100): ``ls6/resnet-ls6-agg.csv``, class A only; other classes are flat (1.0);
* ``testbed32``: ``32gpu-variability.csv``, PAL's 32-GPU Frontera testbed with precomputed scores.

Class A comes from the ResNet file, classes B and C from the BERT file (so they are equal, as in PAL's
testbed file), class D from the PageRank file.

How a simulated cluster gets its GPUs (:meth:`GpuSpeeds.for_cluster`). PAL draws the N GPUs of a simulated
cluster from the profiling data without repetition. We draw GPU *identities*, so a GPU keeps its scores in
every class, from the family's ResNet (class A) file, which lists the most GPUs. The BERT and PageRank
files measured overlapping but different sets of GPUs; a drawn GPU that one of them did not measure gets a
score of that class drawn without repetition from the GPUs that file measured and the cluster has not used.
When N exceeds the GPUs available, the draw continues with a fresh permutation ("without repetition in
blocks": no GPU repeats within a block of the pool's size). ``testbed32`` is PAL's physical testbed, so its
first 32 GPUs keep the file's GPU order (GPU i is testbed GPU i, as in PAL's A1/A2 simulation) and only
further blocks are shuffled.

Without the data directory the same draw runs on a *virtual* population that ``scripts/fit_variability.py``
fitted and ships in ``params/variability.json``: per (family, benchmark) 101 quantiles of the per-GPU
scores (an empirical distribution), the GPU count, and the rank correlation between benchmarks measured on
the same GPUs. The measured cross-class rank correlations are weak (Spearman 0.03 to 0.15), so using one
rank for all classes would overstate how often a GPU is slow in every class; the virtual population instead
pairs classes through a Gaussian copula with the measured correlation, and each class's values are its
quantile function at evenly spaced ranks, so the marginals match the measured ones.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlsched.core.cluster import Cluster
from dlsched.core.errors import InputError
from dlsched.world.rigid import PalConstants

#: The application classes of PAL, most variability-sensitive first.
CLASSES: tuple[str, ...] = ("classA", "classB", "classC", "classD")

#: Salt mixed into the seed so variability draws do not correlate with other uses of the same seed.
_SEED_SALT = 0x9A1_5EED


@dataclass(frozen=True)
class _Source:
    """One benchmark file of a family: which classes it profiles and how to name a GPU in it."""

    name: str
    path: str
    classes: tuple[str, ...]
    #: Column holding the GPU identity, or ``cab-node-dev`` to build Longhorn's ``cabinet-node-device``.
    key: str = "uuid"


_FAMILIES: dict[str, tuple[_Source, ...]] = {
    "longhorn": (
        _Source("resnet", "sim/resnet-longhorn-agg.csv", ("classA",)),
        _Source("bert", "sim/bert-longhorn-agg.csv", ("classB", "classC")),
        # The PageRank file names GPUs by NVIDIA UUID; the other two by cabinet-node-device.
        _Source("pagerank", "sim/pagerank-longhorn-agg.csv", ("classD",), key="cab-node-dev"),
    ),
    "frontera": (
        _Source("resnet", "frontera/frontera-resnet-agg.csv", ("classA",)),
        _Source("bert", "frontera/frontera-bert-agg.csv", ("classB", "classC")),
        _Source("pagerank", "frontera/frontera-pagerank-agg.csv", ("classD",)),
    ),
    "ls6": (_Source("resnet", "ls6/resnet-ls6-agg.csv", ("classA",)),),
}
_TESTBED = "testbed32"
_TESTBED_FILE = "32gpu-variability.csv"
#: Testbed columns as benchmarks: its class B and C columns are identical (both from BERT).
_TESTBED_SOURCES: dict[str, tuple[str, ...]] = {
    "resnet": ("classA",), "bert": ("classB", "classC"), "pagerank": ("classD",),
}
_TESTBED_COLUMN = {"resnet": "PerfVar_classA", "bert": "PerfVar_classB", "pagerank": "PerfVar_classD"}

FAMILIES: tuple[str, ...] = (*_FAMILIES, _TESTBED)


# -- measured data ---------------------------------------------------------------------------------------
def _pal_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "pal" / "aggregated_data"


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise InputError(f"unknown variability profile '{family}' (known: {', '.join(FAMILIES)})",
                         field="variability")


def has_measured_data(family: str, data_dir: Path | None) -> bool:
    """Whether ``data_dir`` holds every file the family's measured profile needs."""
    if data_dir is None:
        return False
    root = _pal_dir(data_dir)
    if family == _TESTBED:
        return (root / _TESTBED_FILE).is_file()
    return all((root / s.path).is_file() for s in _FAMILIES[family])


@lru_cache(maxsize=32)
def _source_scores(path: str, key: str) -> pd.Series:
    """Per-GPU PM-scores of one benchmark file, indexed by GPU identity (sorted)."""
    frame = pd.read_csv(path, dtype={"node": str} if key == "cab-node-dev" else None)
    if key == "cab-node-dev":
        ident = (frame["cabinet"].astype(str) + "-" + frame["node"].astype(int).astype(str) + "-"
                 + frame["device"].astype(int).astype(str))
    else:
        ident = frame[key].astype(str)
    perf = frame["perf"].astype(float)
    ratio = perf / perf.median()
    scores = ratio.groupby(ident.to_numpy()).median().sort_index()
    scores.index.name = "gpu"
    return scores


def _family_sources(family: str, data_dir: Path) -> dict[str, pd.Series]:
    """Benchmark name -> per-GPU scores indexed by GPU identity, for a measured (non-testbed) family."""
    root = _pal_dir(data_dir)
    return {s.name: _source_scores(str(root / s.path), s.key) for s in _FAMILIES[family]}


def testbed_pm_scores(data_dir: Path) -> dict[str, np.ndarray]:
    """PAL's 32-GPU Frontera testbed: ``PerfVar_<class>`` per class, in GPU_ID order (precomputed scores)."""
    frame = _testbed_frame(str(_pal_dir(data_dir) / _TESTBED_FILE))
    return {c: frame[f"PerfVar_{c}"].to_numpy(dtype=float).copy() for c in CLASSES}


@lru_cache(maxsize=4)
def _testbed_frame(path: str) -> pd.DataFrame:
    return pd.read_csv(path).sort_values("GPU_ID").reset_index(drop=True)


def measured_pm_scores(family: str, data_dir: Path) -> dict[str, np.ndarray]:
    """Per class, the per-GPU PM-scores of a family as measured (one value per profiled GPU).

    The classes of one family were profiled on different (overlapping) sets of GPUs, so the arrays have
    different lengths, each ordered by GPU identity. A class the family lacks (``ls6`` has only ResNet) is
    flat: ones, as many as the family's class A GPUs. ``testbed32`` returns :func:`testbed_pm_scores`.
    """
    _check_family(family)
    if family == _TESTBED:
        return testbed_pm_scores(data_dir)
    sources = _family_sources(family, data_dir)
    out: dict[str, np.ndarray] = {}
    for spec in _FAMILIES[family]:
        for cls in spec.classes:
            out[cls] = sources[spec.name].to_numpy(dtype=float).copy()
    flat = len(out["classA"])
    return {c: out.get(c, np.ones(flat)) for c in CLASSES}


# -- drawing a cluster's GPUs ----------------------------------------------------------------------------
def _draw_blocks(rng: np.random.Generator, pool: int, n: int, *, first_in_order: bool = False) -> np.ndarray:
    """``n`` indices into a pool of ``pool`` items, without repetition within each block of ``pool``."""
    if pool <= 0:
        raise ValueError("cannot draw GPUs from an empty profile")
    parts: list[np.ndarray] = []
    left = n
    while left > 0:
        block = np.arange(pool) if first_in_order and not parts else rng.permutation(pool)
        parts.append(block[:left])
        left -= len(parts[-1])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _sample_measured(family: str, data_dir: Path, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Draw ``n`` GPU identities of a measured family; see the module docstring."""
    if family == _TESTBED:
        table = testbed_pm_scores(data_dir)
        idx = _draw_blocks(rng, len(table["classA"]), n, first_in_order=True)
        return {c: v[idx] for c, v in table.items()}
    sources = _family_sources(family, data_dir)
    specs = _FAMILIES[family]
    primary = sources[specs[0].name]
    ids = primary.index.to_numpy()[_draw_blocks(rng, len(primary), n)]
    out: dict[str, np.ndarray] = {}
    for spec in specs:
        scores = sources[spec.name]
        vals = scores.reindex(ids).to_numpy(dtype=float, copy=True)
        missing = np.isnan(vals)
        if missing.any():
            used = set(ids[~missing].tolist())
            pool_ids = scores.index.to_numpy()
            unused = np.flatnonzero(~np.isin(pool_ids, list(used)))
            need = int(missing.sum())
            fill = rng.permutation(unused)[:need]
            if len(fill) < need:
                fill = np.concatenate([fill, _draw_blocks(rng, len(pool_ids), need - len(fill))])
            vals[missing] = scores.to_numpy(dtype=float)[fill]
        for cls in spec.classes:
            out[cls] = vals
    return {c: out[c].copy() if c in out else np.ones(n) for c in CLASSES}


@cache
def shipped_stats() -> dict[str, Any]:
    """The fitted summary in ``params/variability.json`` (quantiles, GPU counts, correlations)."""
    text = resources.files("dlsched.world").joinpath("params/variability.json").read_text(encoding="utf-8")
    return json.loads(text)


def _sample_fitted(family: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Draw ``n`` GPUs from a virtual population that reproduces the shipped quantiles and correlations."""
    stats = shipped_stats()
    fam = stats["families"][family]
    levels = np.asarray(stats["quantile_levels"], dtype=float)
    names = list(fam["sources"])
    pop = int(fam["num_gpus"])
    corr = np.asarray(fam["copula_correlation"], dtype=float)
    # Eigen-factorisation tolerates a singular (but PSD) matrix, unlike Cholesky.
    w, v = np.linalg.eigh(corr)
    factor = v * np.sqrt(np.clip(w, 0.0, None))
    z = rng.standard_normal((pop, len(names))) @ factor.T
    ranks = np.argsort(np.argsort(z, axis=0, kind="stable"), axis=0, kind="stable")
    # Inverse of numpy's default (linear) quantile: rank r of pop maps to level r / (pop - 1).
    u = ranks / max(pop - 1, 1)
    population: dict[str, np.ndarray] = {}
    for j, name in enumerate(names):
        q = np.asarray(fam["sources"][name]["quantiles"], dtype=float)
        population[name] = np.interp(u[:, j], levels, q)
    idx = _draw_blocks(rng, pop, n, first_in_order=(family == _TESTBED))
    out: dict[str, np.ndarray] = {}
    for name in names:
        for cls in fam["sources"][name]["classes"]:
            out[cls] = population[name][idx]
    return {c: out[c].copy() if c in out else np.ones(n) for c in CLASSES}


# -- the world's view --------------------------------------------------------------------------------------
class GpuSpeeds:
    """The TRUE per-GPU slowdown by class for one simulated cluster (1.0 = median GPU, larger = slower).

    Only the world reads it; schedulers see :meth:`measured_profile`, which is what offline profiling
    reports. Scores are kept as Python lists as well, because :meth:`slowest` runs for every running job in
    every round on gangs of a few GPUs, where list indexing beats numpy fancy indexing.
    """

    def __init__(self, scores: dict[str, np.ndarray] | None, num_gpus: int, *, family: str | None = None,
                 origin: str = "none") -> None:
        self.num_gpus = int(num_gpus)
        #: Profile family the GPUs were drawn from, or None without variability.
        self.family = family
        #: ``measured`` (drawn from the data files), ``fitted`` (shipped quantiles) or ``none``.
        self.origin = origin
        self._pal = PalConstants.load()
        self._scores: dict[str, np.ndarray] | None = None
        self._lists: dict[str, list[float]] = {}
        if scores is not None:
            self._scores = {}
            for cls in CLASSES:
                arr = np.asarray(scores.get(cls, np.ones(self.num_gpus)), dtype=float)
                if arr.shape != (self.num_gpus,):
                    raise ValueError(f"{cls}: expected {self.num_gpus} scores, got shape {arr.shape}")
                arr = arr.copy()
                arr.setflags(write=False)
                self._scores[cls] = arr
                self._lists[cls] = arr.tolist()

    @classmethod
    def uniform(cls, num_gpus: int) -> GpuSpeeds:
        """Every GPU at 1.0 in every class (no variability)."""
        return cls(None, num_gpus)

    @classmethod
    def for_cluster(cls, cluster: Cluster, *, seed: int, data_dir: str | None, enabled: bool) -> GpuSpeeds:
        """Draw the GPUs of ``cluster`` from its variability family, deterministically for ``seed``.

        ``cluster.variability`` None or ``enabled`` False: every GPU is 1.0. Otherwise the GPUs are drawn
        from the measured files when the data directory (``data_dir``, else ``dlsched.datadir.data_dir()``)
        holds them, and from the shipped fitted distribution when it does not.
        """
        n = cluster.num_gpus
        family = cluster.variability
        if family is None or not enabled:
            return cls.uniform(n)
        _check_family(family)
        if data_dir is not None:
            root: Path | None = Path(data_dir)
            if not root.is_dir():
                warnings.warn(f"data directory {data_dir} not found; GPU variability drawn from the shipped "
                              f"fitted distribution instead", stacklevel=2)
        else:
            from dlsched.datadir import data_dir as default_data_dir

            root = default_data_dir()
        rng = np.random.default_rng([_SEED_SALT, int(seed) % (1 << 63)])
        if has_measured_data(family, root):
            assert root is not None
            return cls(_sample_measured(family, root, n, rng), n, family=family, origin="measured")
        return cls(_sample_fitted(family, n, rng), n, family=family, origin="fitted")

    # -- queries ---------------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Whether any GPU may differ from 1.0."""
        return self._scores is not None

    def class_of(self, model: str) -> str:
        """Application class of a model (PAL's class map plus the Sia models; unknown -> classA)."""
        return self._pal.perf_class(model)

    def model_classes(self) -> dict[str, str]:
        """Model -> class, as the profiling service labels jobs for the scheduler."""
        return self._pal.model_classes()

    def classes(self) -> tuple[str, ...]:
        return CLASSES

    def slowest(self, perf_class: str, gpus: tuple[int, ...]) -> float:
        """Slowdown of a synchronous job of ``perf_class`` on ``gpus``: the largest score among them."""
        if self._scores is None or not gpus:
            return 1.0
        lst = self._lists.get(perf_class)
        if lst is None:
            lst = self._lists["classA"]
        if len(gpus) == 1:
            return lst[gpus[0]]
        return max(map(lst.__getitem__, gpus))

    def scores(self, perf_class: str) -> np.ndarray:
        """True per-GPU slowdowns of a class (read-only array; ones without variability)."""
        if self._scores is None:
            return np.ones(self.num_gpus)
        return self._scores.get(perf_class, self._scores["classA"])

    def measured_profile(self) -> dict[str, np.ndarray] | None:
        """What offline profiling tells the scheduler: per class, every GPU's score; None if no variability.

        PAL's profiles are static, measured once on every GPU, so they equal the truth; copies keep a
        scheduler from editing the world.
        """
        if self._scores is None:
            return None
        return {c: a.copy() for c, a in self._scores.items()}

    def __repr__(self) -> str:
        return f"GpuSpeeds(num_gpus={self.num_gpus}, family={self.family!r}, origin={self.origin!r})"
