"""Hops's throughput estimator (section 3.5) over its multi-layer store (section 3.3).

The throughput of a location-specific configuration ``{s_1: d_1, ..., s_t: d_t}`` is the per-GPU
throughput of its slowest server times its GPUs (section 3.5). The per-GPU throughput of one server is read
top-down from :class:`~dlsched.estimators.throughput_store.ThroughputStore`:

1. the **server entity layer**: what the job reached on that very server (aggregated: with that many GPUs
   on it; distributed: with that many servers);
2. the **type layer**: what it reached on any server of the type, same key;
3. the **formula** over the profiled components:

   * equation 1, ``T_iter = max(T_d, max(T_b + T~_c, T_c) + T_u) + T_f + T_w`` for pattern 1 and
     ``T_d + max(T_b + T~_c, T_c) + T_f + T_w`` for pattern 2, as the paper writes them (pattern 2 has no
     ``T_u``); ``T~_c = 0.2 T_c``; the pattern is the one whose value is closer to the profiled iteration
     time;
   * equation 2, ``T_c = params / B_link * (N - 1) / N`` on one server and ``params / B_net`` across servers
     (4-byte gradients; ``B_link``, ``B_net`` are the cluster's offline-measured bandwidths, tunables);
   * equation 3's data loading as a two-component normal mixture (cache hit / miss) fitted by EM to every
     data-loading time the job reported on the type, and equation 4's expectation
     ``p_cache E(T_iter | hit) + p_load E(T_iter | miss)``;
   * equation 5: throughput per GPU = per-GPU batch over ``E(T_iter)`` (``T_w`` is taken as 0: the slowest
     server already gates the configuration).

A job not profiled on a type has no estimate there (0): the profiling queue profiles it first. A job that
reports no components (one of another workload, run under the ``hops`` preset) gets, below the two
measured layers, the mean per-GPU throughput it reported on the type over any shape (linear scaling).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dlsched.core import ClusterView, JobView, ThroughputObservation
from dlsched.estimators.base import GoodputEstimate
from dlsched.estimators.throughput_store import AGGREGATED, DISTRIBUTED, Components, ThroughputStore

#: Share of communication not hidden behind backward propagation (the paper sets it empirically).
NON_OVERLAP = 0.2
#: Where a per-server answer came from, top-down.
LAYERS = ("server", "type", "formula")
#: How the formula's answer is corrected by the job's own records (``HopsThroughput.correction``).
CORRECTIONS = ("ratio", "off")


def shape_class(num_gpus: int, num_nodes: int) -> str:
    """One GPU, several GPUs on one server, or several servers: equation 2's communication term differs in
    each, and so does how far the formula falls from what a job reaches."""
    if num_nodes > 1:
        return "spread"
    return "server" if num_gpus > 1 else "one"


def comm_time(params: float, num_gpus: int, num_nodes: int, b_link_gbps: float, b_net_gbps: float) -> float:
    """Equation 2: ring all-reduce inside a server, network bandwidth across servers (4-byte gradients)."""
    if num_gpus <= 1:
        return 0.0
    gigabytes = 4.0 * params * 1e-9
    if num_nodes <= 1:
        return gigabytes / b_link_gbps * (num_gpus - 1) / num_gpus
    return gigabytes / b_net_gbps


def iteration_time(t_d: float, t_f: float, t_b: float, t_u: float, t_c: float, pattern: int,
                   t_w: float = 0.0) -> float:
    """Equation 1 for overlap pattern 1 (data loading overlapped) or 2 (not overlapped)."""
    comm = max(t_b + NON_OVERLAP * t_c, t_c)
    if pattern == 1:
        return max(t_d, comm + t_u) + t_f + t_w
    return t_d + comm + t_f + t_w


@dataclass(frozen=True, slots=True)
class DataLoadMixture:
    """Equation 3: data loading hits the cache with ``p_cache`` (mean ``mu_cache``), else loads (``mu_load``)."""

    p_cache: float
    mu_cache: float
    sigma_cache: float
    mu_load: float
    sigma_load: float


def fit_mixture(samples: list[float] | np.ndarray, iterations: int = 100) -> DataLoadMixture | None:
    """Fit equation 3's two normals to data-loading times by EM (None without samples).

    Samples that do not spread (all within 1e-9 relative) give one component with ``p_cache = 1``. The
    component with the smaller mean is the cache hit.
    """
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        return None
    lo, hi = float(x.min()), float(x.max())
    if x.size < 2 or hi - lo <= 1e-9 * max(abs(hi), 1e-12):
        m = float(x.mean())
        return DataLoadMixture(1.0, m, float(x.std()), m, float(x.std()))
    floor = 1e-3 * (hi - lo)
    mid = 0.5 * (lo + hi)
    low, high = x[x <= mid], x[x > mid]
    p = low.size / x.size
    mu = np.array([low.mean(), high.mean()])
    sd = np.maximum(np.array([low.std(), high.std()]), floor)
    xs = x[None, :]
    for _ in range(iterations):
        # both components at once (rows: hit, miss); the same arithmetic as one component at a time
        sd_col = sd[:, None]
        dens = np.exp(-0.5 * ((xs - mu[:, None]) / sd_col) ** 2) / sd_col
        dens[0] *= p
        dens[1] *= 1.0 - p
        resp = dens / np.maximum(dens[0] + dens[1], 1e-300)
        weight = resp.sum(axis=1)
        if weight.min() <= 0:
            break
        new_mu = (resp @ x) / weight
        sd = np.maximum(np.sqrt((resp * (xs - new_mu[:, None]) ** 2).sum(axis=1) / weight), floor)
        p_new = float(weight[0] / x.size)
        # np.allclose(new_mu, mu, rtol=1e-9, atol=0) without its per-call overhead
        converged = bool(np.all(np.abs(new_mu - mu) <= 1e-9 * np.abs(mu))) and abs(p_new - p) < 1e-12
        mu, p = new_mu, p_new
        if converged:
            break
    order = np.argsort(mu)
    ps = np.array([p, 1.0 - p])[order]
    return DataLoadMixture(float(ps[0]), float(mu[order[0]]), float(sd[order[0]]), float(mu[order[1]]),
                           float(sd[order[1]]))


def expected_iteration(mix: DataLoadMixture, t_f: float, t_b: float, t_u: float, t_c: float,
                       pattern: int) -> float:
    """Equation 4: the iteration time's expectation over a cache hit and a miss."""
    hit = iteration_time(mix.mu_cache, t_f, t_b, t_u, t_c, pattern)
    miss = iteration_time(mix.mu_load, t_f, t_b, t_u, t_c, pattern)
    return mix.p_cache * hit + (1.0 - mix.p_cache) * miss


def detect_pattern(components: Mapping[str, float], obs: ThroughputObservation) -> int:
    """The overlap pattern whose equation 1 is closer to the profiled iteration time (ties: pattern 1), with the
    mean of the data-loading times the profile timed as ``T_d``."""
    t_d = float(np.mean(obs.data_load_s)) if obs.data_load_s else 0.0
    parts = (components["T_f"], components["T_b"], components["T_u"], components.get("T_c", 0.0))
    one = iteration_time(t_d, *parts, pattern=1)
    two = iteration_time(t_d, *parts, pattern=2)
    return 1 if abs(one - obs.step_time_s) <= abs(two - obs.step_time_s) else 2


@dataclass(frozen=True, slots=True)
class ThroughputTable:
    """Per-shape answers aligned with the queried shapes (fixed per-GPU batch: goodput = throughput)."""

    goodput: np.ndarray
    batch_size: np.ndarray
    throughput_sps: np.ndarray
    efficiency: np.ndarray


#: One job's cached answers: the store version they hold at, formula answers, biases, per-GPU answers.
_JobAnswers = tuple[int, dict[tuple[str, int, int], float], dict[tuple[str, str], float],
                    dict[tuple[str, int, int], float]]


@dataclass
class HopsThroughput:
    """The section 3.5 estimator over a :class:`ThroughputStore`; see the module docstring."""

    store: ThroughputStore
    #: The cluster's offline-measured intra-server and network bandwidths (GB/s of gradients), eq. 2.
    b_link_gbps: float = 6.0
    b_net_gbps: float = 2.5
    #: Read the server entity layer (off: the type layer answers for every server, for ablations).
    server_layer: bool = True
    #: Refit a job's data-loading mixture once its samples grew by this fraction since the last fit (0: at
    #: every new sample). A fit is up to 100 EM steps over every sample the job reported, and a long job
    #: reports thousands; 10% more samples move the fitted means by far less than the reports' own noise.
    refit_growth: float = 0.1
    #: ``ratio``: the formula's answer for a configuration no record covers is scaled by how far the job's own
    #: records of the same :func:`shape_class` fell from the formula (geometric mean of measured over formula,
    #: on the type, else on every type; 1 without records): the store "corrects potential biases in the
    #: throughput formula" (section 3.3) for the configurations it has not seen yet. ``off``: the formula as
    #: written; records replace it only where they exist.
    correction: str = "ratio"
    mode: str = "learned"
    _mixtures: dict[tuple[str, str], tuple[int, DataLoadMixture | None]] = field(default_factory=dict, repr=False)
    #: Per job: the store's :meth:`~ThroughputStore.job_version` they hold at, its formula answers per (type,
    #: GPUs, servers), its :meth:`bias` per (type, shape class) and its per-GPU answers on no server in
    #: particular per (type, GPUs, servers). A job's answers rest on its own records alone, so they are
    #: recomputed only when it reports (a waiting job's stay from round to round).
    _formulas: dict[str, _JobAnswers] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got '{self.correction}'")

    # -- the GoodputEstimator protocol -----------------------------------------------------------------
    def update(self, view: ClusterView) -> None:
        """Record every observation the jobs report (each view hands a job's new ones over once)."""
        for job in view.jobs:
            for obs in job.throughput_obs:
                self.store.record(job.job_id, obs, detect_pattern, commit=False)
        self.store.commit()

    def estimate(self, job: JobView, gpu_type: str, num_nodes: int, num_gpus: int) -> GoodputEstimate | None:
        tput = float(self.goodput_many(job, gpu_type, np.array([[num_nodes, num_gpus]]))[0])
        if tput <= 0:
            return None
        batch = self._batch(job, gpu_type) * num_gpus
        return GoodputEstimate(goodput=tput, batch_size=batch, throughput_sps=tput, efficiency=1.0)

    def goodput_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> np.ndarray:
        """Samples/s for each ``(num_nodes, num_gpus)`` shape on no server in particular (type layer, else
        the formula), GPUs spread evenly."""
        out = np.zeros(len(shapes))
        answers = self._job_cache(job.job_id)[3]
        for i, (nodes, gpus) in enumerate(np.asarray(shapes, dtype=int).tolist()):
            if nodes <= 0 or gpus <= 0:
                continue
            k = (gpu_type, gpus, nodes)
            per_gpu = answers.get(k)
            if per_gpu is None:
                per_gpu = answers[k] = self.per_gpu(job.job_id, gpu_type, None, gpus, nodes)[0]
            out[i] = per_gpu * gpus
        return out

    def evaluate_many(self, job: JobView, gpu_type: str, shapes: np.ndarray) -> ThroughputTable:
        tput = self.goodput_many(job, gpu_type, shapes)
        batch = np.asarray(shapes, dtype=int)[:, 1] * self._batch(job, gpu_type) if len(shapes) else np.zeros(0)
        return ThroughputTable(goodput=tput, batch_size=batch, throughput_sps=tput, efficiency=np.ones(len(tput)))

    def unusable_types(self, job: JobView) -> tuple[str, ...]:
        return ()

    def restart_delay_s(self, job: JobView) -> float | None:
        """What the runtime measured of the job's start-up, if anything (the store holds no restart cost)."""
        return job.measured_startup_s

    # -- location-specific configurations ---------------------------------------------------------------
    def config_throughput(self, job_id: str, gpu_type: str, servers: tuple[tuple[int, int], ...]) -> float:
        """Samples/s of a configuration ``((node, GPUs), ...)``: its slowest server's per-GPU throughput times
        its GPUs (0 when the job has no estimate on the type). The same answer as :meth:`explain`, without
        naming the layers: a round asks this for every configuration of every job in the window."""
        total, nodes = sum(k for _, k in servers), len(servers)
        kind, key = (AGGREGATED, total) if nodes <= 1 else (DISTRIBUTED, nodes)
        below = self.store.type_throughput(job_id, gpu_type, kind, key)
        if below is None:
            below = self._formula(job_id, gpu_type, total, nodes)
        if not self.server_layer:
            return float(below * total) if servers else 0.0
        slowest = np.inf
        for server, _ in servers:
            got = self.store.entity(job_id, server, kind, key)
            value = below if got is None else got
            if value < slowest:
                slowest = value
        return float(slowest * total) if servers else 0.0

    def explain(self, job_id: str, gpu_type: str,
                servers: tuple[tuple[int, int], ...]) -> tuple[float, tuple[str, ...]]:
        """The configuration's throughput and the layer that answered for each server."""
        total = sum(k for _, k in servers)
        nodes = len(servers)
        slowest, layers = np.inf, []
        for server, _ in servers:
            per_gpu, layer = self.per_gpu(job_id, gpu_type, server, total, nodes)
            slowest = min(slowest, per_gpu)
            layers.append(layer)
        if not servers or not np.isfinite(slowest):
            return 0.0, tuple(layers)
        return float(slowest * total), tuple(layers)

    def per_gpu(self, job_id: str, gpu_type: str, server: int | None, num_gpus: int,
                num_nodes: int) -> tuple[float, str]:
        """Per-GPU samples/s of the job on one server (``None``: any of the type) and the answering layer."""
        kind, key = (AGGREGATED, num_gpus) if num_nodes <= 1 else (DISTRIBUTED, num_nodes)
        if server is not None and self.server_layer:
            got = self.store.entity(job_id, server, kind, key)
            if got is not None:
                return got, "server"
        got = self.store.type_throughput(job_id, gpu_type, kind, key)
        if got is not None:
            return got, "type"
        return self._formula(job_id, gpu_type, num_gpus, num_nodes), "formula"

    def _formula(self, job_id: str, gpu_type: str, num_gpus: int, num_nodes: int) -> float:
        """:meth:`formula` times the job's :meth:`bias` (under ``correction=ratio``), remembered until the
        next observation."""
        formulas = self._job_cache(job_id)[1]
        k = (gpu_type, num_gpus, num_nodes)
        got = formulas.get(k)
        if got is None:
            got = self.formula(job_id, gpu_type, num_gpus, num_nodes)
            if self.correction == "ratio" and got > 0 and self.store.components(job_id, gpu_type) is not None:
                got *= self.bias(job_id, gpu_type, shape_class(num_gpus, num_nodes))
            formulas[k] = got
        return got

    def _job_cache(self, job_id: str) -> _JobAnswers:
        """The job's cached answers, emptied when the job reported since they were computed."""
        version = self.store.job_version(job_id)
        cached = self._formulas.get(job_id)
        if cached is None or cached[0] != version:
            cached = self._formulas[job_id] = (version, {}, {}, {})
        return cached

    def bias(self, job_id: str, gpu_type: str, shape: str) -> float:
        """Measured over formula for the job's type-layer records of :func:`shape_class` ``shape``: their
        geometric mean on ``gpu_type``, else on every type the job was profiled on; 1 without records."""
        cache = self._job_cache(job_id)[2]
        got = cache.get((gpu_type, shape))
        if got is not None:
            return got
        here: list[float] = []
        anywhere: list[float] = []
        for t, kind, key, measured in self.store.type_records(job_id):
            gpus, nodes = (key, 1) if kind == AGGREGATED else (key, key)  # spread: per-GPU, whatever the GPUs
            if shape_class(gpus, nodes) != shape or self.store.components(job_id, t) is None:
                continue
            predicted = self.formula(job_id, t, gpus, nodes)
            if predicted <= 0 or measured <= 0:
                continue
            anywhere.append(math.log(measured / predicted))
            if t == gpu_type:
                here.append(anywhere[-1])
        logs = here or anywhere
        got = cache[(gpu_type, shape)] = math.exp(sum(logs) / len(logs)) if logs else 1.0
        return got

    def formula(self, job_id: str, gpu_type: str, num_gpus: int, num_nodes: int) -> float:
        """Equations 1-5 from the component layer (0 if the job was not profiled on the type)."""
        comps = self.store.components(job_id, gpu_type)
        if comps is None:
            # a job that reports no components (not of the Hops workload): its per-GPU throughput on the type
            # is what it reported there on any shape (linear scaling); 0 if it reported nothing
            return self.store.type_any_shape(job_id, gpu_type) or 0.0
        mix = self.mixture(job_id, gpu_type)
        if mix is None:
            mix = DataLoadMixture(1.0, 0.0, 0.0, 0.0, 0.0)
        t_c = comm_time(comps.params, num_gpus, num_nodes, self.b_link_gbps, self.b_net_gbps)
        t_iter = expected_iteration(mix, comps.t_f, comps.t_b, comps.t_u, t_c, comps.pattern)
        return comps.batch / t_iter if t_iter > 0 else 0.0

    def mixture(self, job_id: str, gpu_type: str) -> DataLoadMixture | None:
        """Equation 3's mixture fitted to the job's data-loading times on the type (refitted as they grow by
        ``refit_growth``)."""
        samples = self.store.data_loads(job_id, gpu_type)
        cached = self._mixtures.get((job_id, gpu_type))
        if cached is not None and cached[0] <= len(samples) < max(cached[0] * (1.0 + self.refit_growth),
                                                                   cached[0] + 1):
            return cached[1]
        mix = fit_mixture(samples)
        self._mixtures[(job_id, gpu_type)] = (len(samples), mix)
        return mix

    def components(self, job_id: str, gpu_type: str) -> Components | None:
        return self.store.components(job_id, gpu_type)

    def _batch(self, job: JobView, gpu_type: str) -> int:
        comps = self.store.components(job.job_id, gpu_type)
        return comps.batch if comps is not None else int(job.spec.batch_size or 1)
