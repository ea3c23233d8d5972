"""Per-GPU performance variability (PAL, SC'24): the true slowdown of every simulated GPU, per class.

GPUs of one type differ in speed, and by how much depends on the application: compute-bound ResNet-like
jobs (class A) see the widest spread, BERT-like jobs (classes B and C) less, memory-bound PageRank-like jobs
(class D) almost none. PAL measures this by running one representative benchmark per class on every GPU of
a cluster. A GPU's *PM-score* for a class is the median over its runs of ``perf / median(perf of all runs in
the file)``; ``perf`` is time-like, so 1.0 is the median GPU and 1.1 is 10% slower. A synchronous job runs
at the pace of the slowest GPU it holds, which is what :meth:`GpuSpeeds.slowest` answers.

The measured files, their GPU keys and the class each benchmark profiles are read through
:mod:`dlsched.catalog` (one loader shared with the estimators); this module only decides how the simulated
cluster's true speeds are drawn from them.

How a simulated cluster gets its GPUs (:meth:`GpuSpeeds.for_cluster` with source ``median``, the default).
PAL draws the N GPUs of a simulated cluster from the profiling data without repetition. We draw GPU
*identities*, so a GPU keeps its scores in every class, from the family's ResNet (class A) file, which lists
the most GPUs. The BERT and PageRank files measured overlapping but different sets of GPUs; a drawn GPU that
one of them did not measure gets a score of that class drawn without repetition from the GPUs that file
measured and the cluster has not used. When N exceeds the GPUs available, the draw continues with a fresh
permutation ("without repetition in blocks": no GPU repeats within a block of the pool's size).
``testbed32`` is PAL's physical testbed, so its first 32 GPUs keep the file's GPU order (GPU i is testbed
GPU i, as in PAL's A1/A2 simulation) and only further blocks are shuffled.

Without the data directory the same draw runs on a *virtual* population that ``scripts/fit_variability.py``
fitted and the catalog ships (``dlsched/catalog/params/variability.json``): per (family, benchmark) 101
quantiles of the per-GPU scores (an empirical distribution), the GPU count, and the rank correlation between
benchmarks measured on the same GPUs. The measured cross-class rank correlations are weak (Spearman 0.03 to
0.15), so using one rank for all classes would overstate how often a GPU is slow in every class; the virtual
population instead pairs classes through a Gaussian copula with the measured correlation, and each class's
values are its quantile function at evenly spaced ranks, so the marginals match the measured ones.

With source ``runs`` each class's scores are single benchmark runs instead, drawn as PAL's simulator draws
them (stragglers included, up to 3.6x for ResNet-50 on Longhorn): a far more variable cluster, which
reproduces PAL's simulated results rather than the per-GPU medians its paper describes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from dlsched.catalog import (
    CLASSES,
    FAMILIES,
    PalConstants,
    draw_runs,
    draw_without_repetition,
    family,
    fitted_summary,
    has_measured_data,
    measured_family,
)
from dlsched.core.cluster import Cluster
from dlsched.core.errors import InputError
from dlsched.datadir import data_dir as default_data_dir

#: Where the per-GPU speeds of a simulated cluster come from (``WorldConfig.gpu_speeds``).
GPU_SPEED_SOURCES: tuple[str, ...] = ("medians", "single-runs")

#: Salt mixed into the seed so variability draws do not correlate with other uses of the same seed.
_SEED_SALT = 0x9A1_5EED


# -- drawing a cluster's GPUs ----------------------------------------------------------------------------
def _sample_medians(name: str, data_dir: Path, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Draw ``n`` GPU identities of a measured family, each scored by its per-GPU medians (module docstring)."""
    fam = FAMILIES[name]
    files = measured_family(name, data_dir)
    primary = files[fam.benchmarks[0].name]
    ids = primary.gpus[draw_without_repetition(rng, len(primary.gpus), n, first_in_order=fam.keeps_gpu_order)]
    out: dict[str, np.ndarray] = {}
    for data in files.values():
        vals = data.series().reindex(ids).to_numpy(dtype=float, copy=True)
        missing = np.isnan(vals)
        if missing.any():
            used = set(ids[~missing].tolist())
            unused = np.flatnonzero(~np.isin(data.gpus, list(used)))
            need = int(missing.sum())
            fill = rng.permutation(unused)[:need]
            if len(fill) < need:
                fill = np.concatenate([fill, draw_without_repetition(rng, len(data.gpus), need - len(fill))])
            vals[missing] = data.scores[fill]
        for cls in data.classes:
            out[cls] = vals
    return {c: out[c].copy() if c in out else np.ones(n) for c in CLASSES}


def _sample_fitted(name: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Draw ``n`` GPUs from a virtual population that reproduces the shipped quantiles and correlations."""
    stats = fitted_summary()
    fam = stats["families"][name]
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
    for j, source in enumerate(names):
        q = np.asarray(fam["sources"][source]["quantiles"], dtype=float)
        population[source] = np.interp(u[:, j], levels, q)
    idx = draw_without_repetition(rng, pop, n, first_in_order=FAMILIES[name].keeps_gpu_order)
    out: dict[str, np.ndarray] = {}
    for source in names:
        for cls in fam["sources"][source]["classes"]:
            out[cls] = population[source][idx]
    return {c: out[c].copy() if c in out else np.ones(n) for c in CLASSES}


def _data_root(data_dir: str | None) -> Path | None:
    """The data directory to draw from: ``data_dir`` if given (even when missing), else the configured one."""
    return default_data_dir() if data_dir is None else Path(data_dir)


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
        #: ``measured`` (per-GPU medians from the data files), ``runs`` (single runs from the data files),
        #: ``fitted`` (shipped quantiles) or ``none``.
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
    def for_cluster(cls, cluster: Cluster, *, seed: int, data_dir: str | None, enabled: bool,
                    source: str = "medians") -> GpuSpeeds:
        """Draw the GPUs of ``cluster`` from its variability family, deterministically for ``seed``.

        ``cluster.variability`` None or ``enabled`` False: every GPU is 1.0. Otherwise ``source`` (one of
        :data:`GPU_SPEED_SOURCES`) says how:

        * ``medians``: every simulated GPU is a profiled GPU scored by the median of its runs, drawn from the
          measured files when the data directory (``data_dir``, else ``dlsched.datadir.data_dir()``) holds
          them and from the shipped fitted distribution when it does not;
        * ``single-runs``: per class, single benchmark runs drawn without repetition, stragglers included, as PAL's
          simulator scores its GPUs (:func:`dlsched.catalog.draw_runs`). It needs the measured files, since
          the fitted summary describes per-GPU medians only. It is seeded with ``seed`` itself, as PAL
          experiments drew runs before this option existed, so their clusters stay the same.
        """
        if source not in GPU_SPEED_SOURCES:
            raise InputError(f"unknown source of GPU speeds '{source}' (known: {', '.join(GPU_SPEED_SOURCES)})",
                             field="gpu_speeds")
        n = cluster.num_gpus
        name = cluster.variability
        if name is None or not enabled:
            return cls.uniform(n)
        family(name)
        root = _data_root(data_dir)
        if source == "single-runs":
            if root is None or not has_measured_data(name, root):
                raise InputError(f"GPU speeds from single runs need the measured '{name}' files in the data "
                                 f"directory (set DLSCHED_DATA; `dlsched data fetch pal` brings them), or use "
                                 f"gpu_speeds=medians", field="gpu_speeds")
            runs = draw_runs(name, n, np.random.default_rng(seed), root)
            return cls(runs, n, family=name, origin="runs")
        rng = np.random.default_rng([_SEED_SALT, int(seed) % (1 << 63)])
        if root is not None and has_measured_data(name, root):
            return cls(_sample_medians(name, root, n, rng), n, family=name, origin="measured")
        if data_dir is not None and not Path(data_dir).is_dir():
            warnings.warn(f"data directory {data_dir} not found; GPU variability drawn from the shipped "
                          f"fitted distribution instead", stacklevel=2)
        return cls(_sample_fitted(name, n, rng), n, family=name, origin="fitted")

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
