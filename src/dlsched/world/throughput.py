"""Throughput of the Sia/Pollux models: a fitted, Pollux-style step-time model per (model, GPU type).

The world needs the time of one optimizer step for any placement and batch size a scheduler may try,
including ones nobody measured, so it uses a smooth parametric model fitted to the Sia profiles
(``scripts/fit_throughput.py``; accuracy against every measured row in ``docs/fidelity.md``). For a job on
``K`` GPUs spread over ``N`` nodes with at most ``k`` GPUs on one node, a micro-batch of ``b`` samples per GPU
and ``s`` gradient-accumulation micro-steps:

* compute of one micro-batch: ``T_grad = C(b) * (1 + eps*ln(k)) * (1 + pi*[b % 4 != 0])`` with
  ``C(b) = (alpha_c**q_c + (beta_c*b**zeta_c)**q_c)**(1/q_c)``: Pollux's ``alpha_c + beta_c*b`` when
  ``q_c = zeta_c = 1``; ``q_c > 1`` makes it a smooth maximum (small batches that leave the GPU idle cost a
  fixed time, large ones scale with ``b``) and ``zeta_c != 1`` bends the per-sample cost; ``eps`` is the
  slowdown from GPUs sharing a host (CPU data loading, PCIe) and ``pi`` the penalty some models (YOLOv3,
  ImageNet on rtx) pay for local batches that are not a multiple of 4; each of these appears only where
  the data of that (model, type) showed it;
* gradient synchronisation: ``T_sync = 0`` for one GPU, ``alpha_r + beta_r*(K-2)`` inside one node,
  ``alpha_n + beta_n*(K-2) + delta_n*(N-2)`` across nodes, plus ``kappa*(k-1)**2`` for links shared by
  many GPUs of a node;
* one step: ``(s-1)*T_grad + (T_grad**gamma + T_sync**gamma)**(1/gamma)``: backward and all-reduce of the
  last micro-step overlap, ``gamma >= 1`` says how well (1: not at all, large: fully);
* pipeline-parallel models (``gpt_pmp``) add the pipeline bubble, ``(stages-1)*T_grad``; their ``T_grad``
  is forward plus backward of one micro-batch on one stage, and ``gamma`` is 1.

Statistical efficiency comes from :class:`~dlsched.world.efficiency.EfficiencyModel`; goodput, the
quantity adaptive jobs maximise, is throughput times efficiency.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from dlsched.core.errors import InputError
from dlsched.world.provenance import declared_spec, provenance_of

if TYPE_CHECKING:
    from dlsched.core.gpu import GpuType
    from dlsched.world.efficiency import EfficiencyModel

#: Parameter names of one (model, GPU type) entry (see the module docstring).
#: Gradient-synchronisation terms (what a server's interconnect decides).
SYNC_PARAMS = ("alpha_n", "beta_n", "alpha_r", "beta_r", "delta_n", "kappa")
#: Synchronisation terms inside one server (its GPU-to-GPU links), scaled by a derived type's ``sync_speed``.
NODE_SYNC_PARAMS = ("alpha_r", "beta_r")
PARAM_NAMES = ("alpha_c", "beta_c", "zeta_c", "q_c", "eps", "pi", "alpha_n", "beta_n", "alpha_r", "beta_r",
               "delta_n", "kappa", "gamma")


@dataclass(frozen=True, slots=True)
class BatchChoice:
    """How a job runs one optimizer step on an allocation, and how fast it progresses."""

    #: Global batch size (samples per optimizer step).
    batch_size: int
    #: Samples per GPU (per pipeline for pipeline-parallel models) in one micro-step.
    local_bsz: int
    #: Micro-steps per optimizer step (gradient accumulation; micro-batches for pipelines).
    accum_steps: int
    step_time_s: float
    sync_time_s: float
    #: Samples per second.
    throughput_sps: float
    #: Statistical efficiency at this batch size and progress (1 at the initial batch size).
    efficiency: float
    #: Progress per second: ``throughput_sps * efficiency``, in init-batch-equivalent samples per second.
    goodput: float


def step_time_arrays(p: dict[str, float], num_gpus: Any, num_nodes: Any, max_per_node: Any, local_bsz: Any,
                     accum_steps: Any = 1, stages: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Step and (non-overlapped) sync time of the fitted model, vectorised over every array argument.

    This single function is the model: the fitting script, the fidelity report and the runtime all call it,
    so what is validated is what runs.
    """
    k_all = np.asarray(num_gpus, dtype=float)
    n_nodes = np.asarray(num_nodes, dtype=float)
    k_node = np.asarray(max_per_node, dtype=float)
    b = np.asarray(local_bsz, dtype=float)
    s = np.asarray(accum_steps, dtype=float)
    misaligned = (np.ceil(b - 1e-9) % 4) != 0
    q = p.get("q_c", 1.0)
    zeta = p.get("zeta_c", 1.0)
    fixed_cost, per_sample = p["alpha_c"], p["beta_c"] * (b if zeta == 1.0 else b ** zeta)
    if q == 1.0:
        compute = fixed_cost + per_sample
    else:
        top_c = np.maximum(np.maximum(fixed_cost, per_sample), 1e-12)
        compute = top_c * ((fixed_cost / top_c) ** q + (per_sample / top_c) ** q) ** (1.0 / q)
    t_grad = compute * (1.0 + p["eps"] * np.log(np.maximum(k_node, 1.0))) * (1.0 + p["pi"] * misaligned)
    in_node = p["alpha_r"] + p["beta_r"] * (k_all - 2.0)
    across = p["alpha_n"] + p["beta_n"] * (k_all - 2.0) + p["delta_n"] * (n_nodes - 2.0)
    t_sync = np.where(n_nodes <= 1, in_node, across) + p["kappa"] * (k_node - 1.0) ** 2
    t_sync = np.where(k_all <= 1, 0.0, np.maximum(t_sync, 0.0))
    gamma = p["gamma"]
    top = np.maximum(np.maximum(t_grad, t_sync), 1e-12)
    overlap = top * ((t_grad / top) ** gamma + (t_sync / top) ** gamma) ** (1.0 / gamma)
    step = (s - 1.0 + (stages - 1)) * t_grad + overlap
    return step, overlap - t_grad


def _shape(node_counts: tuple[int, ...]) -> tuple[int, int, int]:
    """(GPUs, nodes, most GPUs on one node) of a placement given as GPUs per node."""
    used = [int(c) for c in node_counts if c > 0]
    return sum(used), len(used), max(used, default=0)


class ThroughputModel:
    """Fitted step-time model for every profiled (model, GPU type); see the module docstring."""

    def __init__(self, params: dict[str, Any]) -> None:
        #: The parameters as given (never changed: derived types are added to copies of the per-model maps).
        self._raw = params
        self._entries: dict[str, dict[str, dict[str, float]]] = {m: dict(v) for m, v in params["models"].items()}
        self._derived: dict[str, dict[str, Any]] = {}
        self._speed: dict[str, float] = {k: float(v) for k, v in params["relative_speed"].items()
                                         if not k.startswith("_")}
        self._restart: dict[str, float] = {k: float(v) for k, v in params["restart_delay_s"].items()
                                           if not k.startswith("_")}
        self._round_overhead: dict[str, float] = {k: float(v) for k, v in params.get("round_overhead_s", {}).items()}
        self._profile_s: dict[str, float] = {k: float(v) for k, v in params.get("profile_s", {}).items()}
        for name, spec in params.get("derived_types", {}).items():
            self._derive(name, spec, field=spec.get("field"))
        self._best_cache: dict[tuple, BatchChoice | None] = {}
        #: Efficiency models seen by best_batch, held so their ids (part of the cache key) stay unique.
        self._effs: dict[int, EfficiencyModel] = {}

    @classmethod
    def load(cls) -> ThroughputModel:
        """The packaged model (cached: every World shares one instance and its batch cache)."""
        return _load_packaged()

    def with_types(self, types: Iterable[GpuType]) -> ThroughputModel:
        """This model plus the GPU types a cluster file declared (those with ``like`` set); self if none.

        The declared types travel on the cluster (``Cluster.gpu_types``), so every world of that cluster sees
        them and no packaged file or shared instance changes: the result is a new model (cached per set of
        declarations, so the worlds of a sweep share one and its batch cache).
        """
        declared = tuple(sorted((t.name, t.like, float(t.speed), float(t.memory_gb)) for t in types
                                if t.like is not None))
        return _with_declared(self, declared) if declared else self

    def _derive(self, name: str, spec: dict[str, Any], field: str | None = None) -> None:
        """A GPU type nobody profiled, from a known one: compute ``speed`` times as fast, sync of another.

        Per model: ``alpha_c`` and ``beta_c`` (compute per micro-batch) divided by the model's entry in
        ``model_speed``, else by ``speed``; the sync terms of ``sync_from`` (its interconnect) where that model
        has them, the in-server ones (:data:`NODE_SYNC_PARAMS`) divided by ``sync_speed``; ``max_local_bsz``
        scaled by ``memory_ratio``; everything else as ``from``. The relative speed is ``from``'s times
        ``speed``. ``from`` may itself be derived, if listed before.
        """
        base, speed = spec["from"], float(spec["speed"])
        if base not in self._speed:
            known = ", ".join(sorted(self._speed))
            raise InputError(f"GPU type '{name}' is derived from '{base}', which has no speeds here "
                             f"(known: {known})", field=field)
        per_model = {m: float(v) for m, v in spec.get("model_speed", {}).items()}
        sync_from, mem = spec.get("sync_from", base), float(spec.get("memory_ratio", 1.0))
        sync_speed = float(spec.get("sync_speed", 1.0))
        for model, entries in self._entries.items():
            if base not in entries:
                continue
            e = dict(entries[base])
            s = per_model.get(model, speed)
            e["alpha_c"] /= s
            e["beta_c"] /= s
            if sync_from in entries:
                for key in SYNC_PARAMS:
                    e[key] = entries[sync_from][key]
            for key in NODE_SYNC_PARAMS:
                e[key] /= sync_speed
            e["max_local_bsz"] = max(1, int(e["max_local_bsz"] * mem))
            e["rows"] = 0  # derived, not fitted
            entries[name] = e
        self._speed[name] = self._speed[base] * speed
        self._derived[name] = spec

    # -- what is known ---------------------------------------------------------------------------------
    def models(self) -> set[str]:
        return set(self._entries)

    def known_types(self) -> set[str]:
        """Every GPU type with a relative speed (some, like rtx5000, have no per-model profile)."""
        return set(self._speed)

    def provenance(self, gpu_type: str) -> dict[str, dict[str, str]]:
        """Where a type's numbers come from: per key (``relative_speed``, each model, ``sync``, ``memory``) a
        ``kind`` (measured, derived, rule, modelled or declared) and ``how``. See docs/gpu-types.md."""
        if gpu_type not in self._speed:
            self.relative_speed(gpu_type)  # the clear error naming the known types
        return provenance_of(gpu_type, self._raw, self._derived.get(gpu_type),
                             {m for m, e in self._entries.items() if gpu_type in e})

    def supports(self, model: str, gpu_type: str) -> bool:
        return gpu_type in self._entries.get(model, {})

    def relative_speed(self, gpu_type: str) -> float:
        """Single-GPU speed relative to a V100 (geometric mean over the six Pollux models)."""
        try:
            return self._speed[gpu_type]
        except KeyError:
            known = ", ".join(sorted(self._speed))
            raise InputError(f"no relative speed for GPU type '{gpu_type}' (known: {known})") from None

    def restart_delay_s(self, model: str) -> float:
        """Checkpoint-restore delay of a model, paid on every (re)start or reallocation."""
        return self._restart.get(model, self._restart.get("default", 0.0))

    def round_overhead_s(self, model: str) -> float:
        """Time a model's job spends every round before its first step even when it keeps its GPUs (0 for
        the profiled models; the runtime's jobs reload their checkpoint each round, :mod:`dlsched.world.fitted`)."""
        return self._round_overhead.get(model, 0.0)

    def profile_s(self, model: str) -> float | None:
        """How long a profile of a model's job takes per GPU type, start-up included, when a profiles file
        measured it (a service's profiles, :mod:`dlsched.world.fitted`); None: the world's own profile."""
        return self._profile_s.get(model)

    def largest_round_overhead(self) -> tuple[str, float] | None:
        """The model with the largest per-round overhead and that overhead (None: no model has one)."""
        if not self._round_overhead:
            return None
        name = max(self._round_overhead, key=lambda m: (self._round_overhead[m], m))
        return name, self._round_overhead[name]

    def max_local_bsz(self, model: str, gpu_type: str) -> int:
        """Largest per-GPU micro-batch that fits in the GPU's memory (largest profiled)."""
        return int(self._entry(model, gpu_type)["max_local_bsz"])

    def stages(self, model: str, gpu_type: str) -> int:
        """Pipeline stages (1 for data-parallel models); GPU counts must be multiples of it."""
        return int(self._entry(model, gpu_type).get("stages", 1))

    def params(self, model: str, gpu_type: str) -> dict[str, float]:
        """The fitted parameters of one (model, type), for reports and estimators' priors."""
        return dict(self._entry(model, gpu_type))

    def _entry(self, model: str, gpu_type: str) -> dict[str, float]:
        try:
            return self._entries[model][gpu_type]
        except KeyError:
            raise InputError(f"model '{model}' has no throughput profile on GPU type '{gpu_type}'") from None

    # -- step time ------------------------------------------------------------------------------------
    def step_time(self, model: str, gpu_type: str, node_counts: tuple[int, ...], local_bsz: float,
                  accum_steps: int = 1) -> tuple[float, float]:
        """Step time and sync time (seconds) of one optimizer step.

        ``local_bsz`` is the micro-batch per GPU (per pipeline for pipeline models) and ``accum_steps`` the
        number of micro-steps per optimizer step.
        """
        p = self._entry(model, gpu_type)
        k, n, per = _shape(node_counts)
        if k == 0:
            return math.inf, 0.0
        step, sync = step_time_arrays(p, k, n, per, local_bsz, accum_steps, int(p.get("stages", 1)))
        return float(step), float(sync)

    def _replicas(self, model: str, gpu_type: str, k: int) -> int:
        """Data-parallel replicas: GPUs, or whole pipelines for pipeline-parallel models."""
        return k // self.stages(model, gpu_type)

    # -- batch sizes ----------------------------------------------------------------------------------
    def batch_choice(self, model: str, gpu_type: str, node_counts: tuple[int, ...], batch_size: int,
                     progress: float, eff: EfficiencyModel) -> BatchChoice | None:
        """Run a fixed global batch: split over replicas, accumulate when a share exceeds memory.

        None when the model has no profile on the type or the GPUs cannot hold one pipeline.
        """
        if not self.supports(model, gpu_type):
            return None
        k, n, per = _shape(node_counts)
        replicas = self._replicas(model, gpu_type, k)
        if replicas <= 0 or batch_size <= 0:
            return None
        e = float(eff.efficiency(model, batch_size, progress))
        out = self._evaluate(model, gpu_type, k, n, per, replicas, np.array([float(batch_size)]),
                             np.array([e]))
        return out

    def best_batch(self, model: str, gpu_type: str, node_counts: tuple[int, ...], progress: float,
                   eff: EfficiencyModel, max_batch: int) -> BatchChoice | None:
        """The goodput-maximising global batch between the initial batch size and ``max_batch``.

        Called for every adaptive job and candidate allocation, so it evaluates a grid of ~150 batch
        sizes in one numpy pass and caches by placement shape and efficiency bucket (efficiency is
        piecewise constant in progress, so the cache is exact).
        """
        if not self.supports(model, gpu_type):
            return None
        k, n, per = _shape(node_counts)
        replicas = self._replicas(model, gpu_type, k)
        if replicas <= 0:
            return None
        self._effs.setdefault(id(eff), eff)
        key = (model, gpu_type, k, n, per, eff.progress_bucket(model, progress), int(max_batch), id(eff))
        if key in self._best_cache:
            return self._best_cache[key]
        init = eff.init_batch_size(model)
        hi = max(1, int(max_batch))
        lo = min(max(init, replicas), hi)
        grid = self._batch_grid(lo, hi, replicas)
        effs = eff.efficiency_many(model, grid, progress)
        choice = self._evaluate(model, gpu_type, k, n, per, replicas, grid, effs)
        if len(self._best_cache) > 200_000:
            self._best_cache.clear()
        self._best_cache[key] = choice
        return choice

    @staticmethod
    def _batch_grid(lo: int, hi: int, replicas: int) -> np.ndarray:
        """Candidate global batches: a geometric grid plus every multiple of 4 samples per replica nearby."""
        if hi - lo <= 160:
            return np.arange(lo, hi + 1, dtype=float)
        geo = np.unique(np.round(np.geomspace(lo, hi, 120)))
        per_rep = np.maximum(4.0, np.round(geo / replicas / 4.0) * 4.0) * replicas
        grid = np.unique(np.concatenate([geo, per_rep[(per_rep >= lo) & (per_rep <= hi)]]))
        return grid

    def _evaluate(self, model: str, gpu_type: str, k: int, n: int, per: int, replicas: int,
                  batches: np.ndarray, effs: np.ndarray) -> BatchChoice | None:
        """Time the candidate global batches and return the one with the highest goodput."""
        p = self._entry(model, gpu_type)
        stages = int(p.get("stages", 1))
        max_local = max(1, int(p["max_local_bsz"]))
        share = np.maximum(1.0, np.ceil(batches / replicas - 1e-9))  # samples per replica per step
        if stages > 1:
            # A pipeline splits its share into micro-batches; smaller ones shrink the bubble, so try each size.
            sizes = np.arange(1, max_local + 1, dtype=float)
            micro = np.minimum(sizes[None, :], share[:, None])
            accum = np.ceil(share[:, None] / micro - 1e-9)
            step, sync = step_time_arrays(p, k, n, per, micro, accum, stages)
            pick = np.argmin(step, axis=1)
            rows = np.arange(len(batches))
            micro, accum, step, sync = micro[rows, pick], accum[rows, pick], step[rows, pick], sync[rows, pick]
        else:
            accum = np.ceil(share / max_local - 1e-9)
            micro = np.ceil(share / accum - 1e-9)
            step, sync = step_time_arrays(p, k, n, per, micro, accum, 1)
        throughput = batches / step
        goodput = throughput * effs
        i = int(np.argmax(goodput))
        if not np.isfinite(goodput[i]) or goodput[i] <= 0:
            return None
        return BatchChoice(batch_size=int(batches[i]), local_bsz=int(micro[i]), accum_steps=int(accum[i]),
                           step_time_s=float(step[i]), sync_time_s=float(sync[i]),
                           throughput_sps=float(throughput[i]), efficiency=float(effs[i]),
                           goodput=float(goodput[i]))


@lru_cache(maxsize=64)
def _with_declared(model: ThroughputModel, declared: tuple[tuple[str, str, float, float], ...]) -> ThroughputModel:
    """``model`` plus declared types (name, like, speed, memory in GB), built once per distinct set."""
    specs = dict(model._raw.get("derived_types", {}))
    for name, like, speed, memory_gb in declared:
        specs[name] = declared_spec(name, like, speed, memory_gb)
    return ThroughputModel(dict(model._raw, derived_types=specs))


@cache
def _load_packaged() -> ThroughputModel:
    text = resources.files("dlsched").joinpath("world/params/throughput.json").read_text(encoding="utf-8")
    params = json.loads(text)
    derived = resources.files("dlsched").joinpath("world/params/derived_types.json").read_text(encoding="utf-8")
    params["derived_types"] = json.loads(derived)["types"]
    return ThroughputModel(params)
