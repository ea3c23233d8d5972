"""A Pollux-style throughput model that a scheduler learns from what one job reports.

The model is the one Pollux (OSDI'21) fits per job, and Sia (seed 003, section 3.3.2) fits per (job, GPU
type). For ``K`` GPUs over ``N`` nodes, a local (per-GPU, or per-pipeline) micro-batch of ``b`` samples and
``s`` gradient-accumulation micro-steps:

* compute of one micro-batch: ``T_grad = alpha_c + beta_c * b``;
* gradient synchronisation: ``T_sync = 0`` on one GPU, ``alpha_r + beta_r * (K - 2)`` inside one node,
  ``alpha_n + beta_n * (K - 2)`` across nodes (AdaptDL's names: ``_n`` is the inter-node network, ``_r`` the
  link between replicas of one node, so parameters fitted by AdaptDL mean the same here);
* one optimizer step: ``(s - 1 + P - 1) * T_grad + (T_grad**gamma + T_sync**gamma)**(1/gamma)``: the last
  micro-step's backward pass overlaps the all-reduce (``gamma = 1``: no overlap, large: full overlap), and a
  hybrid-parallel job with ``P`` pipeline stages pays a pipeline bubble of ``P - 1`` micro-batches.

Why this simple form, when the simulator's truth (``dlsched.world.throughput``) is richer: a scheduler only
sees a handful of configurations per job, and seven parameters is what a few observations can pin down. The
fit follows Pollux's recipe (``adaptdl.goodput.fit_perf_params``) so that a few observations give sane
parameters: a parameter is *pinned* until data that can identify it exists (no sync terms before any
multi-GPU observation, which is Sia's one-time "perfect scaling" assumption; no per-GPU sync slope before
``K > 2``; cross-node terms ``alpha_n, beta_n`` default to 10% above the in-node ``alpha_r, beta_r`` until a
multi-node observation), ``gamma`` is
regularised towards 1, and residuals are log-errors of step time and of per-micro-batch compute time with
one weight per distinct configuration (so a placement that ran for a hundred rounds does not drown the
profile of the others).

Everything that evaluates the model is vectorised over arrays of configurations.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares, nnls

#: Parameter order of :meth:`ThroughputParams.to_array` and the fitter's vector.
PARAM_NAMES = ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma")
GAMMA_MAX = 10.0
#: Weight of the regulariser pulling gamma towards 1 (Pollux uses 1e-3 on a mean squared log error).
GAMMA_REG = 1e-3
#: When cross-node behaviour is unobserved, assume it is this much slower than in-node (Pollux's prior).
CROSS_NODE_PRIOR = 1.1


@dataclass(frozen=True, slots=True)
class ThroughputParams:
    """Fitted parameters of one (job, GPU type) model; seconds, seconds per sample, and the overlap gamma."""

    alpha_c: float
    beta_c: float
    #: Sync across nodes (AdaptDL's inter-node network terms).
    alpha_n: float = 0.0
    beta_n: float = 0.0
    #: Sync between the replicas of one node (AdaptDL's intra-node terms).
    alpha_r: float = 0.0
    beta_r: float = 0.0
    gamma: float = 1.0

    def to_array(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in PARAM_NAMES], dtype=float)

    @classmethod
    def from_array(cls, x: np.ndarray) -> ThroughputParams:
        return cls(*(float(v) for v in x))

    @property
    def has_sync(self) -> bool:
        """Whether the model predicts any synchronisation cost (False: perfect scaling)."""
        return any(v > 0 for v in (self.alpha_n, self.beta_n, self.alpha_r, self.beta_r))


def compute_time(p: ThroughputParams, local_bsz: np.ndarray | float) -> np.ndarray:
    """``T_grad``: seconds for forward and backward of one micro-batch of ``local_bsz`` samples."""
    return p.alpha_c + p.beta_c * np.asarray(local_bsz, dtype=float)


def sync_time(p: ThroughputParams, num_nodes: np.ndarray | float, num_gpus: np.ndarray | float) -> np.ndarray:
    """``T_sync``: seconds of gradient all-reduce (0 on one GPU)."""
    n = np.asarray(num_nodes, dtype=float)
    k = np.asarray(num_gpus, dtype=float)
    in_node = p.alpha_r + p.beta_r * (k - 2.0)
    across = p.alpha_n + p.beta_n * (k - 2.0)
    return np.where(k <= 1.0, 0.0, np.maximum(np.where(n <= 1.0, in_node, across), 0.0))


def _overlap(t_grad: np.ndarray, t_sync: np.ndarray, gamma: float) -> np.ndarray:
    """``(T_grad**g + T_sync**g)**(1/g)`` computed without overflow for large ``g``."""
    if gamma == 1.0:
        return t_grad + t_sync
    top = np.maximum(np.maximum(t_grad, t_sync), 1e-12)
    return top * ((t_grad / top) ** gamma + (t_sync / top) ** gamma) ** (1.0 / gamma)


def step_time(p: ThroughputParams, num_nodes, num_gpus, local_bsz, accum_steps=1, stages: int = 1) -> np.ndarray:
    """Seconds per optimizer step, broadcast over every array argument."""
    t_grad = compute_time(p, local_bsz)
    t_sync = sync_time(p, num_nodes, num_gpus)
    s = np.asarray(accum_steps, dtype=float)
    return (s - 1.0 + (stages - 1)) * t_grad + _overlap(t_grad, t_sync, p.gamma)


@dataclass
class ObservationSet:
    """Step-time observations of one model, aggregated per distinct configuration.

    A configuration is ``(num_nodes, num_gpus, local_bsz, accum_steps)``. Each keeps the count and the mean
    log step time and mean log compute time per micro-batch; compute time is derived from the reported
    non-overlapped sync time as ``(step - sync) / (s + P - 1)`` (what the job's own timers would give).
    """

    stages: int = 1
    _rows: dict[tuple[int, int, int, int], list[float]] = field(default_factory=dict)
    _bsz: set[int] = field(default_factory=set)
    _in_node: int = 0
    _multi_node: int = 0
    _many: int = 0
    #: Distinct multi-GPU configurations observed (what eq. 3.1 ranks scaling sources by).
    multi_gpu: int = 0

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, num_nodes: int, num_gpus: int, local_bsz: int, accum_steps: int, step_time_s: float,
            sync_time_s: float) -> tuple[int, int, int, int]:
        """Record one observation and return its configuration key."""
        key = (int(num_nodes), int(num_gpus), int(local_bsz), max(1, int(accum_steps)))
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = [0.0, 0.0, 0.0, 0.0]  # count, sum log step, count grad, sum log grad
            self._bsz.add(key[2])
            self._in_node += key[0] == 1 and key[1] > 1
            self._multi_node += key[0] > 1
            self._many += key[1] > 2
            self.multi_gpu += key[1] > 1
        row[0] += 1.0
        row[1] += math.log(step_time_s)
        compute = (step_time_s - max(0.0, sync_time_s)) / (key[3] + self.stages - 1)
        if compute > 0 and math.isfinite(compute):
            row[2] += 1.0
            row[3] += math.log(compute)
        return key

    def mean_log_step(self, key: tuple[int, int, int, int]) -> float | None:
        """Mean log step time of one configuration (None if never observed)."""
        row = self._rows.get(key)
        return None if row is None else row[1] / row[0]

    def fingerprint(self) -> tuple:
        """Everything :func:`fit_params` reads, in its order: equal fingerprints give equal fits."""
        return (self.stages, tuple((k, tuple(r)) for k, r in self._rows.items()))

    def means(self) -> dict[tuple[int, int, int, int], float]:
        """Mean log step time per configuration (a snapshot, to tell later whether a mean moved)."""
        return {k: r[1] / r[0] for k, r in self._rows.items()}

    def arrays(self) -> dict[str, np.ndarray]:
        """Per configuration: nodes, gpus, local_bsz, accum, count, mean log step, mean log compute (nan if none)."""
        if not self._rows:
            empty = np.zeros(0)
            return {k: empty for k in ("nodes", "gpus", "bsz", "accum", "count", "log_step", "log_grad")}
        keys = np.array(list(self._rows.keys()), dtype=float)
        vals = np.array(list(self._rows.values()), dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            log_grad = np.where(vals[:, 2] > 0, vals[:, 3] / np.maximum(vals[:, 2], 1.0), np.nan)
        return {"nodes": keys[:, 0], "gpus": keys[:, 1], "bsz": keys[:, 2], "accum": keys[:, 3],
                "count": vals[:, 0], "log_step": vals[:, 1] / vals[:, 0], "log_grad": log_grad}

    def structure(self) -> tuple[bool, bool, bool, bool, bool]:
        """Which parameter groups the data can identify (the pinning pattern of :func:`fit_params`).

        (alpha_c: two or more local batch sizes; alpha_r: a multi-GPU single-node point; alpha_n: a
        multi-node point; beta_r/beta_n: a point with more than two GPUs; gamma: any multi-GPU point.)
        """
        return (len(self._bsz) > 1, self._in_node > 0, self._multi_node > 0, self._many > 0, self.multi_gpu > 0)

    @property
    def has_multi_gpu(self) -> bool:
        return self.multi_gpu > 0


def _initial_compute(bsz: np.ndarray, log_grad: np.ndarray, log_step: np.ndarray, accum: np.ndarray,
                     gpus: np.ndarray, stages: int, fit_alpha: bool) -> tuple[float, float]:
    """Non-negative relative least squares of ``T_grad`` on ``b``: a starting point for the fit."""
    t = np.where(np.isfinite(log_grad), np.exp(log_grad), np.nan)
    single = (gpus <= 1) & ~np.isfinite(t)
    t = np.where(single, np.exp(log_step) / (accum + stages - 1), t)
    ok = np.isfinite(t) & (t > 0)
    if not np.any(ok):
        ok = np.ones_like(bsz, dtype=bool)
        t = np.exp(log_step) / (accum + stages - 1)
    b, t = bsz[ok], t[ok]
    if fit_alpha:
        a = np.stack([1.0 / t, b / t], axis=1)  # relative errors: (alpha + beta*b)/t - 1
        coef, _ = nnls(a, np.ones_like(t))
        alpha, beta = float(coef[0]), float(coef[1])
    else:
        alpha, beta = 0.0, float(np.exp(np.mean(np.log(t / np.maximum(b, 1e-12)))))
    if alpha + beta * float(np.median(b)) <= 0:
        alpha, beta = 0.0, float(np.median(t / np.maximum(b, 1e-12)))
    return alpha, max(beta, 1e-12)


def fit_params(obs: ObservationSet, start: ThroughputParams | None = None) -> ThroughputParams:
    """Fit the parameters to the observations (bounded, non-negative least squares in log space).

    Parameters without identifying data are pinned (see the module docstring). ``start`` warm-starts the
    free parameters, e.g. the previous fit when one more configuration arrives.
    """
    d = obs.arrays()
    if len(d["count"]) == 0:
        raise ValueError("no observations to fit")
    fit_alpha_c, fit_alpha_r, fit_alpha_n, fit_beta_k, fit_gamma = obs.structure()
    stages = obs.stages
    alpha_c0, beta_c0 = _initial_compute(d["bsz"], d["log_grad"], d["log_step"], d["accum"], d["gpus"], stages,
                                         fit_alpha_c)
    if not fit_gamma:
        # single-GPU data only: the model is linear in (alpha_c, beta_c) and the relative non-negative
        # least squares above is already the fit (sync pinned to 0: perfect scaling until observed)
        return ThroughputParams(alpha_c0, beta_c0)
    x0 = np.array([alpha_c0, beta_c0, 0.0, 0.0, 0.0, 0.0, 1.0])
    # rough sync guesses from the observed step time minus predicted compute
    p_c = ThroughputParams(alpha_c0, beta_c0)
    multi = d["gpus"] > 1
    if np.any(multi):
        extra = np.exp(d["log_step"]) - np.asarray(step_time(p_c, 1, 1, d["bsz"], d["accum"], stages))
        extra = np.maximum(extra, 0.0)
        in_node = multi & (d["nodes"] <= 1)
        across = multi & (d["nodes"] > 1)
        if np.any(in_node):
            x0[4] = float(np.mean(extra[in_node]))
        if np.any(across):
            x0[2] = float(np.mean(extra[across]))
    if start is not None:
        prev = start.to_array()
        x0 = np.where(prev > 0, prev, x0)
        x0[6] = max(1.0, prev[6])
    free = np.array([fit_alpha_c, True, fit_alpha_n, fit_alpha_n and fit_beta_k, fit_alpha_r,
                     fit_alpha_r and fit_beta_k, fit_gamma])
    x0 = np.where(free, x0, np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]))
    lower = np.zeros(7)
    lower[6] = 1.0
    upper = np.full(7, np.inf)
    upper[6] = GAMMA_MAX
    idx = np.nonzero(free)[0]
    x_free0 = np.clip(x0[idx], lower[idx], upper[idx])
    # keep the start strictly inside the bounds (trf requires it) and non-degenerate
    scale = np.maximum(np.abs(x_free0), 1e-6)
    x_free0 = np.clip(x_free0, lower[idx] + 1e-9 * scale, np.where(np.isfinite(upper[idx]), upper[idx] - 1e-9,
                                                                       np.inf))

    w = 1.0 / math.sqrt(len(d["count"]))
    has_grad = np.isfinite(d["log_grad"])
    wg = 1.0 / math.sqrt(max(1, int(has_grad.sum())))
    nodes, gpus, bsz, accum = d["nodes"], d["gpus"], d["bsz"], d["accum"]
    log_step, log_grad = d["log_step"], d["log_grad"][has_grad]
    bsz_g = bsz[has_grad]
    gamma_reg = math.sqrt(GAMMA_REG)

    def residuals(xf: np.ndarray) -> np.ndarray:
        x = x0.copy()
        x[idx] = xf
        p = ThroughputParams.from_array(x)
        pred = np.maximum(step_time(p, nodes, gpus, bsz, accum, stages), 1e-12)
        r_step = w * (np.log(pred) - log_step)
        r_grad = wg * (np.log(np.maximum(compute_time(p, bsz_g), 1e-12)) - log_grad)
        return np.concatenate([r_step, r_grad, [gamma_reg * (x[6] - 1.0)]])

    x = x0.copy()
    if len(idx):
        try:
            # a warm start is already close: a few iterations at a modest tolerance recover the optimum to
            # well under the observations' own noise, and this fit runs for many jobs every round
            res = least_squares(residuals, x_free0, bounds=(lower[idx], upper[idx]), x_scale="jac",
                                method="trf", max_nfev=40 if start is not None else 200,
                                ftol=1e-6, xtol=1e-6, gtol=1e-6)
            x[idx] = res.x
        except (ValueError, np.linalg.LinAlgError):  # pragma: no cover - degenerate data; keep the start
            x[idx] = x_free0
    if not fit_alpha_n:
        # Pollux's prior: without cross-node data, cross-node sync is a little slower than in-node sync.
        x[2] = max(x[2], CROSS_NODE_PRIOR * x[4])
        x[3] = max(x[3], CROSS_NODE_PRIOR * x[5])
    return ThroughputParams.from_array(x)


class FitMemo:
    """Remembers :func:`fit_params` results, which depend on nothing but the observations and the start.

    Jobs of one model are profiled on the same configurations and report the same step times there, so at
    cluster scale most fits repeat one already done for another job (99% of them in the first simulated
    hour of a 25,600-GPU run). The key is the observation set's full contents in insertion order (the
    order the fitter sees) and the start's exact parameters, so a remembered fit is the fit, bit for bit.
    Bounded: the least recently used entries are dropped past ``size``.
    """

    def __init__(self, size: int = 4096) -> None:
        if size < 1:
            raise ValueError(f"FitMemo size must be at least 1, got {size}")
        self.size = size
        self._fits: OrderedDict[tuple, ThroughputParams] = OrderedDict()
        #: Fits answered from memory, and fits computed.
        self.hits = 0
        self.misses = 0

    def fit(self, obs: ObservationSet, start: ThroughputParams | None = None) -> ThroughputParams:
        key = (obs.fingerprint(), None if start is None else tuple(start.to_array().tolist()))
        got = self._fits.get(key)
        if got is not None:
            self.hits += 1
            self._fits.move_to_end(key)
            return got
        self.misses += 1
        got = self._fits[key] = fit_params(obs, start)
        if len(self._fits) > self.size:
            self._fits.popitem(last=False)
        return got


def prediction_error(p: ThroughputParams, num_nodes: int, num_gpus: int, local_bsz: int, accum_steps: int,
                     step_time_s: float, stages: int = 1) -> float:
    """Absolute log error of the model on one observation (used to decide whether a refit is worthwhile)."""
    pred = float(step_time(p, num_nodes, num_gpus, local_bsz, accum_steps, stages))
    if pred <= 0 or step_time_s <= 0:
        return math.inf
    return abs(math.log(pred / step_time_s))
