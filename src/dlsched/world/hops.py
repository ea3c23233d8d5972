"""The truth for the Hops workload: Table 2's models on 1080Ti, Titan Xp and RTX 3090 servers.

The world plays each iteration from measured step times where they exist and stated rules where they do
not (constants and their sources: :mod:`dlsched.world.hops_params`), and as a random draw
(:mod:`dlsched.world.hops_draws`):

* **GPU work and synchronisation** come from the fitted step-time model of the Sia artifact's measured
  profiles (``world.throughput``) for the model's measured family on the RTX 2080 Ti, carried to the Hops
  GPU types by their relative speeds; per iteration both vary (lognormal noise of mean 1);
* **data loading** is, on each server, a cache hit or a miss: the chance of a hit is the job's on that host
  (its page cache against the dataset, with a per-job spread), a hit costs the batch's decoding on the CPUs
  one GPU gets, a miss adds reading the batch from storage; both are lognormal. Hosts differ in CPUs and
  memory, so servers of one GPU type differ for the jobs whose loading is not hidden by GPU work;
* **equation 1's two patterns**: torchvision loops prefetch the next batch during the step (an iteration is
  the longer of loading and GPU work), Hugging Face's Trainer does not (their sum); every worker waits for
  the slowest server.

A job progresses at its configuration's *expected* iteration time; what it reports (its profiler plugin,
section 3.2) is a few iterations actually drawn with its own seeded generator: their mean step and sync
times, its servers, the components its profiler measures, and the data-loading times it saw. No part of the
estimator is used here: it learns the world only from those reports.

Jobs are given by their run time on the requested GPUs of the reference type (``duration_s``, as the Hops
trace generator writes it); the world turns it into a sample count at its expected speed there.

Restarts cost what they cost every other world's jobs: the model's checkpoint-restore delay of the world's
table (``ThroughputModel.restart_delay_s``: the Sia simulator's 30 s default for a model it does not list),
through the calibration profile and scaled by ``restart_delay_scale`` (0 switches it off).
"""

from __future__ import annotations

import math
import zlib
from collections import Counter

import numpy as np

from dlsched.core import InputError, JobSpec, Placement
from dlsched.world.base import JobPhysics, Rate, World, register_physics
from dlsched.world.calibration import calibration
from dlsched.world.config import WorldConfig
from dlsched.world.hops_draws import IterationShape, ServerLoad, draw_iterations, expected_iteration
from dlsched.world.hops_params import (
    CACHE_SHARE,
    DATASETS,
    FAMILIES,
    GPUS,
    HOSTS,
    ITERATIONS_PER_REPORT,
    LOADS_PER_REPORT,
    MEASURED_TYPE,
    MIN_STEP_S,
    MODELS,
    NOMINAL_HOST,
    P_HIT_JOB_SD,
    P_HIT_MAX,
    READ_GBPS,
    REFERENCE_GPU,
    UPDATE_BYTES_PER_PARAM,
    UPDATE_MAX_SHARE,
    HopsGpu,
    HopsHost,
    HopsModel,
)
from dlsched.world.throughput import ThroughputModel

__all__ = ["GPUS", "HOSTS", "MODELS", "NOMINAL_HOST", "REFERENCE_GPU", "HopsGpu", "HopsHost", "HopsJobPhysics",
           "HopsModel", "HopsPhysics", "hops_job_physics", "is_hops_job", "restart_delay_s"]


def is_hops_job(spec: JobSpec) -> bool:
    """Jobs this world plays: a Table 2 model given by its run time on a Hops GPU type."""
    return spec.model in MODELS and spec.duration_s is not None and spec.reference_gpu in GPUS


def hit_chance(job_id: str, model: str, host: str) -> float:
    """The chance a data load of the job hits the page cache on a server of ``host``: the share of its dataset
    the host's cache holds (capped), spread per job (seeded by job and host, so a run is reproducible)."""
    data = DATASETS[MODELS[model].dataset]
    base = min(P_HIT_MAX, CACHE_SHARE * HOSTS[host].memory_gb / data.size_gb)
    jitter = np.random.default_rng(zlib.crc32(f"{job_id}|{host}".encode())).standard_normal()
    return float(min(P_HIT_MAX, max(0.0, base + P_HIT_JOB_SD * jitter)))


def restart_delay_s(model: str, config: WorldConfig) -> float:
    """Seconds a Hops job of ``model`` pays on every (re)start: the checkpoint-restore delay every world
    charges (:meth:`ThroughputModel.restart_delay_s`, the table's default for a model it does not list),
    through the calibration profile, times ``restart_delay_scale``."""
    fitted = ThroughputModel.load().restart_delay_s(model)
    return calibration(config.calibration).restart_delay_s(model, fitted) * config.restart_delay_scale


class HopsPhysics:
    """Iteration times of one Hops job (work in samples); see the module docstring.

    Held by :class:`HopsJobPhysics`; needs only the step-time model and the GPUs per server of each type.
    """

    def __init__(self, spec: JobSpec, throughput: ThroughputModel, gpus_per_node: dict[str, int]) -> None:
        self.model = MODELS[spec.model]
        self.spec = spec
        #: Per-GPU batch (fixed per-GPU batch mode: the global batch grows with the GPU count).
        self.batch = int(spec.batch_size or self.model.batch_size)
        self._tm = throughput
        self._gpus_per_node = gpus_per_node
        gflops, params = FAMILIES[self.model.family]
        #: This model's compute and gradient bytes against its measured family's.
        self._compute_ratio = self.model.gflops / gflops
        self._sync_ratio = self.model.params_m / params
        self._p_hit: dict[str, float] = {}
        self._work: dict[tuple[str, tuple[int, ...]], tuple[float, float]] = {}
        self._expected: dict[tuple[str, tuple[tuple[str, int], ...]], tuple[float, IterationShape]] = {}

    # -- the parts ------------------------------------------------------------------------------------------
    def p_hit(self, host: str) -> float:
        host = host or NOMINAL_HOST
        got = self._p_hit.get(host)
        if got is None:
            got = self._p_hit[host] = hit_chance(self.spec.job_id, self.spec.model, host)
        return got

    def gpu_work(self, gpu_type: str, counts: tuple[int, ...]) -> tuple[float, float]:
        """Mean GPU work and non-overlapped all-reduce of one iteration on ``counts`` GPUs per server."""
        key = (gpu_type, tuple(sorted(counts, reverse=True)))
        got = self._work.get(key)
        if got is None:
            step, sync = self._tm.step_time(self.model.family, MEASURED_TYPE, key[1], self.batch)
            speed = GPUS[gpu_type].speed
            compute = max((step - sync) * self._compute_ratio / speed, MIN_STEP_S)
            got = self._work[key] = (compute, sync * self._sync_ratio)
        return got

    def server_load(self, gpu_type: str, host: str) -> ServerLoad:
        """One server's data loading: a hit decodes the batch on the CPUs one GPU gets; a miss also reads it
        from the server's storage, shared by its GPUs."""
        h = HOSTS[host or NOMINAL_HOST]
        per_node = max(1, self._gpus_per_node.get(gpu_type, 8))
        data = DATASETS[self.model.dataset]
        hit = data.load_core_ghz_ms * 1e-3 * self.batch / (h.core_ghz / per_node)
        miss = hit + self.batch * data.sample_mb * 1e-3 / (READ_GBPS / per_node)
        return ServerLoad(hit, miss, self.p_hit(host))

    def shape(self, gpu_type: str, servers: tuple[tuple[str, int], ...]) -> IterationShape:
        """The iteration on ``servers``, each ``(host, GPUs)``."""
        compute, sync = self.gpu_work(gpu_type, tuple(k for _, k in servers))
        if sum(k for _, k in servers) <= 1:
            sync = 0.0
        return IterationShape(compute, sync, self.model.pattern,
                              tuple(self.server_load(gpu_type, h) for h, _ in servers))

    def components(self, gpu_type: str, servers: tuple[tuple[str, int], ...]) -> tuple[tuple[str, float], ...]:
        """What a profiler measures of one iteration (means): ``T_f``, ``T_b``, ``T_u``, ``T_c`` and ``params``."""
        shape = self.shape(gpu_type, servers)
        params = self.model.params_m * 1e6
        t_u = min(UPDATE_BYTES_PER_PARAM * params / (GPUS[gpu_type].mem_gbps * 1e9),
                  UPDATE_MAX_SHARE * shape.compute_s)
        rest = shape.compute_s - t_u
        return (("T_f", rest / 3.0), ("T_b", 2.0 * rest / 3.0), ("T_u", t_u), ("T_c", shape.sync_s),
                ("params", params))

    # -- the expected speed -----------------------------------------------------------------------------------
    def expected(self, gpu_type: str, servers: tuple[tuple[str, int], ...]) -> tuple[float, IterationShape]:
        """Expected iteration time on ``servers`` and the shape it was taken over (remembered)."""
        key = (gpu_type, servers)
        got = self._expected.get(key)
        if got is None:
            shape = self.shape(gpu_type, servers)
            got = self._expected[key] = (expected_iteration(shape), shape)
        return got

    def step_times(self, gpu_type: str, node_counts: tuple[int, ...],
                   hosts: tuple[str, ...] = ()) -> tuple[float, float]:
        """Expected iteration time and mean all-reduce wait on ``node_counts`` GPUs per server (``hosts``: each
        server's host, default nominal); ``(0, 0)`` where the job cannot run."""
        servers = tuple((hosts[i] if i < len(hosts) else "", c) for i, c in enumerate(node_counts) if c > 0)
        if gpu_type not in GPUS or not servers:
            return 0.0, 0.0
        step, shape = self.expected(gpu_type, servers)
        return step, shape.sync_s

    def samples_per_s(self, gpu_type: str, node_counts: tuple[int, ...], hosts: tuple[str, ...] = ()) -> float:
        step, _ = self.step_times(gpu_type, node_counts, hosts)
        k = sum(c for c in node_counts if c > 0)
        return k * self.batch / step if step > 0 else 0.0

    def total_samples(self) -> float:
        """The job's work: its run time on the request (packed on the reference type, nominal host)."""
        assert self.spec.duration_s is not None
        per_node = self._gpus_per_node.get(REFERENCE_GPU, 8)
        return float(self.spec.duration_s) * self.samples_per_s(REFERENCE_GPU, _packed(self.spec.num_gpus, per_node))


def _packed(k: int, per_node: int) -> tuple[int, ...]:
    full, rest = divmod(int(k), max(1, per_node))
    return tuple([per_node] * full + ([rest] if rest else []))


def _servers(world: World, nodes: np.ndarray) -> tuple[tuple[str, int], ...]:
    """``(host, GPUs)`` per server of a placement (``nodes``: each GPU's node id), node ids ascending."""
    counts = Counter(int(n) for n in nodes)
    return tuple((world.cluster.nodes[n].host, counts[n]) for n in sorted(counts))


def _rate(phys: HopsPhysics, step: float, sync: float, k: int) -> Rate:
    if step <= 0 or not math.isfinite(step):
        return Rate(0.0)
    sps = k * phys.batch / step
    return Rate(work_per_s=sps, batch_size=phys.batch * k, local_bsz=phys.batch, step_time_s=step,
                sync_time_s=sync, throughput_sps=sps)


class HopsJobPhysics(JobPhysics):
    """A job of the Hops workload: work in samples, iterations drawn per server (see the module docstring)."""

    def __init__(self, spec: JobSpec, world: World) -> None:
        super().__init__(spec, world)
        per_node = {t: max(world.cluster.nodes[n].num_gpus for n in ids)
                    for t, ids in world.cluster.nodes_of_type.items()}
        self.hops = HopsPhysics(spec, world.throughput, per_node)
        self.total_work = self.hops.total_samples()
        self.restart_delay_s = restart_delay_s(spec.model, world.config)
        self.perf_class = world.speeds.class_of(spec.model)
        #: What the job's profiler draws its reported iterations with (seeded by the job: runs reproduce).
        self.rng = np.random.default_rng(zlib.crc32(f"hops-report|{spec.job_id}".encode()))

    def base_rate(self, progress, gpu_type, node_counts, batch_size):
        step, sync = self.hops.step_times(gpu_type, node_counts)
        return _rate(self.hops, step, sync, sum(node_counts))

    def rate_on(self, progress: float, gpu_type: str, node_counts: tuple[int, ...], nodes: np.ndarray,
                batch_size: int | None) -> Rate:
        """The rate on exact servers (their hosts decide data loading; the slowest gates the job)."""
        servers = _servers(self.world, nodes)
        if gpu_type not in GPUS or not servers:
            return Rate(0.0)
        step, shape = self.hops.expected(gpu_type, servers)
        return _rate(self.hops, step, shape.sync_s, len(nodes))

    def observation_details(self, placement: Placement, rate: Rate | None = None) -> dict[str, tuple | float]:
        """What the job's profiler plugin reports (section 3.2): its servers, the components it measured, the
        data-loading times of the iterations it timed and, given the rate it ran at, their mean step time
        (the rate's, times the drawn iterations' mean over the expectation) and mean all-reduce time."""
        cluster = self.world.cluster
        gpu_type = cluster.gpu_type_of[placement.gpus[0]]
        if gpu_type not in GPUS:
            return {}
        by_node = {n: len(g) for n, g in placement.by_node(cluster).items()}
        servers = tuple(sorted(by_node.items()))
        hosted = tuple((cluster.nodes[n].host, k) for n, k in servers)
        expected, shape = self.hops.expected(gpu_type, hosted)
        drawn = draw_iterations(shape, self.rng, ITERATIONS_PER_REPORT)
        out: dict[str, tuple | float] = {
            "servers": servers, "components": self.hops.components(gpu_type, hosted),
            "data_load_s": tuple(float(x) for x in drawn.load_s.ravel()[:LOADS_PER_REPORT])}
        if rate is not None and rate.step_time_s > 0 and expected > 0:
            out["step_time_s"] = rate.step_time_s * float(drawn.step_s.mean()) / expected
            out["sync_time_s"] = float(drawn.sync_s.mean())
        return out

    def profiled_step(self, rate: Rate) -> tuple[int, float, float]:
        """A Hops job times its iterations at its per-GPU batch."""
        return self.hops.batch, rate.step_time_s, rate.sync_time_s

    def estimated_duration_s(self) -> float | None:
        return self.spec.duration_s

    def batch_limits(self) -> tuple[int, int] | None:
        """A fixed per-GPU batch: the global batch runs from one GPU's to the largest requirement's."""
        return self.hops.batch, self.hops.batch * max(self.spec.requirement_set())

    def isolated_runtime_s(self, gpu_type, num_gpus):
        per_node = max((n.num_gpus for n in self.world.cluster.nodes if n.gpu_type == gpu_type), default=1)
        counts = [k for k in sorted(set(self.spec.gpu_counts or (self.spec.num_gpus,))) if k <= max(1, num_gpus)]
        best = max((self.hops.samples_per_s(gpu_type, _packed(k, per_node)) for k in counts), default=0.0)
        if not counts:
            k = self.spec.lower_gpus
            best = self.hops.samples_per_s(gpu_type, _packed(k, per_node)) * num_gpus / k
        return math.inf if best <= 0 else self.total_work / best


def hops_job_physics(spec: JobSpec, world: World) -> HopsJobPhysics | None:
    """The physics of a Hops job (None for any other job), refusing a cluster with no GPU type it runs on."""
    if not is_hops_job(spec):
        return None
    usable = [t for t in world.cluster.type_names if t in GPUS and spec.allows_gpu_type(t)]
    if not usable:
        where = spec.origin or f"job {spec.job_id}"
        raise InputError(f"model '{spec.model}' of the Hops workload runs on {', '.join(GPUS)} "
                         f"only, and the cluster has none it accepts", source=where, field="model")
    return HopsJobPhysics(spec, world)


register_physics(hops_job_physics)
