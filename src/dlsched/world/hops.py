"""The truth for the Hops workload: Table 2's models on 1080Ti, Titan Xp and RTX 3090 servers.

Hops (SoCC'24) publishes no per-model measurements, so the world builds each iteration from the parts the
paper's section 3.5 names, with every constant taken from a published figure (sources in ``docs/hops.md``):

* compute ``T_f + T_b``: three times the forward FLOPs of one sample (forward + backward) times the
  per-GPU batch, over the GPU's effective FP32 rate; ``T_f`` is a third of it;
* weight update ``T_u``: reading and writing weights, gradients and momentum (12 bytes per parameter) at
  the GPU's memory bandwidth;
* communication ``T_c`` (equation 2): 4-byte gradients over the intra-node link times ``(N-1)/N`` on one
  server, over the network when the job spans servers; ``T~_c = 0.2 T_c`` is the part not hidden by
  backward propagation;
* data loading ``T_d``: the CPU cost of one sample (decode and augmentation, in core-GHz-milliseconds) times
  the per-GPU batch, over the host CPU capacity each GPU of the server gets (cores x base clock of the
  server's two CPUs, shared by its GPUs). This is where servers of one GPU type differ (Sugon vs
  TIGERWAY); the slowest server of a distributed job gates it, as every worker waits for the slowest;
* equation 1's two patterns: torchvision training loops overlap data loading with the GPU work (pattern
  1), Hugging Face's Trainer does not (pattern 2).

Jobs are given by their run time on the requested GPUs of the reference type (``duration_s``, as the
Hops trace generator writes it); the world turns it into a sample count and plays every other shape from
the iteration time, so a job with a fixed per-GPU batch finishes sooner on more GPUs as long as
communication does not eat the gain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlsched.core import InputError, JobSpec, Placement
from dlsched.world.base import JobPhysics, Rate, World, register_physics


@dataclass(frozen=True, slots=True)
class HopsGpu:
    """A GPU type as the Hops world plays it."""

    #: Effective FP32 training rate (TFLOP/s): peak FP32 x utilisation, scaled by measured relative speed.
    tflops: float
    #: Memory bandwidth (GB/s), from the vendor's specification.
    mem_gbps: float


@dataclass(frozen=True, slots=True)
class HopsHost:
    """A server model: its CPUs decide how fast data loads."""

    #: Cores x base clock (GHz) of the server's CPUs together.
    core_ghz: float
    description: str


@dataclass(frozen=True, slots=True)
class HopsModel:
    """One model of Hops Table 2 with its published size and cost."""

    params_m: float
    #: Forward FLOPs of one sample (GFLOPs) at the input size the dataset uses.
    gflops: float
    #: CPU cost of loading and augmenting one sample, core-GHz-milliseconds.
    load_core_ghz_ms: float
    #: Equation 1's overlap pattern: 1 overlaps data loading with the GPU work, 2 does not.
    pattern: int
    #: Per-GPU batch size of Table 2.
    batch_size: int


#: 1080Ti effective FP32 rate: 11.34 TFLOP/s peak at 40% utilisation. Titan Xp and RTX 3090 from measured
#: speeds relative to it (docs/hops.md): Titan Xp 1.35/1.22 = 1.107x, RTX 3090 2.0x.
_BASE_TFLOPS = 11.34 * 0.40
GPUS: dict[str, HopsGpu] = {
    "1080ti": HopsGpu(tflops=_BASE_TFLOPS, mem_gbps=484.0),
    "titanxp": HopsGpu(tflops=_BASE_TFLOPS * 1.35 / 1.22, mem_gbps=547.6),
    "rtx3090": HopsGpu(tflops=_BASE_TFLOPS * 2.0, mem_gbps=936.2),
}

#: Host models of the Hops clusters (section 4.2), two CPUs each: Xeon Gold 5118 (12 cores, 2.3 GHz),
#: 5218 (16 cores, 2.3 GHz), 5320 (26 cores, 2.2 GHz), per Intel's specifications.
HOSTS: dict[str, HopsHost] = {
    "sugon-w780g": HopsHost(2 * 12 * 2.3, "Sugon W780-G, 2x Xeon Gold 5118, 192 GB"),
    "tigerway-yk8100-8g": HopsHost(2 * 16 * 2.3, "TIGERWAY YK8100-8G, 2x Xeon Gold 5218, 384 GB"),
    "tigerway-yk8100-10g": HopsHost(2 * 26 * 2.2, "TIGERWAY YK8100-10G, 2x Xeon Gold 5320, 384 GB"),
}
#: The host a node without one is taken to have (the most common in the Hops clusters).
NOMINAL_HOST = "sugon-w780g"

#: Intra-node link (PCIe 3.0 x16, all-reduce traffic both ways) and network (100 Gb/s InfiniBand without
#: GPUDirect RDMA on GeForce cards: staged through host memory), effective GB/s.
B_LINK_GBPS = 6.0
B_NET_GBPS = 2.5
#: Share of communication not overlapped with backward propagation (Hops section 3.5).
NON_OVERLAP = 0.2

#: Table 2's models (params and forward GFLOPs from the models' papers and torchvision / Hugging Face
#: model cards; the CIFAR variants at 32x32, text at the sequence length noted in docs/hops.md).
MODELS: dict[str, HopsModel] = {
    "resnet50": HopsModel(25.6, 4.1, 8.0, 1, 128),
    "resnet18-cifar10": HopsModel(11.2, 0.56, 0.15, 1, 256),
    "vgg11": HopsModel(132.9, 7.6, 8.0, 1, 32),
    "vgg13-cifar10": HopsModel(9.4, 0.23, 0.15, 1, 128),
    "convnext_base": HopsModel(88.6, 15.4, 8.0, 1, 32),
    "convnext_base-cifar10": HopsModel(87.6, 0.31, 0.15, 1, 64),
    "densenet161": HopsModel(28.7, 7.7, 8.0, 1, 32),
    "densenet161-cifar10": HopsModel(26.5, 0.16, 0.15, 1, 64),
    "mobilenet_v2": HopsModel(3.5, 0.3, 8.0, 1, 64),
    "mobilenet_v2-cifar10": HopsModel(2.2, 0.01, 0.15, 1, 64),
    "regnet": HopsModel(11.2, 1.6, 8.0, 1, 32),
    "regnet-cifar10": HopsModel(10.3, 0.03, 0.15, 1, 32),
    "distilbert": HopsModel(66.0, 33.8, 0.05, 2, 128),
    "vit": HopsModel(86.6, 17.6, 6.0, 2, 48),
    "macbert": HopsModel(102.0, 104.4, 0.05, 2, 8),
    "wav2vec": HopsModel(95.0, 70.0, 4.0, 2, 16),
    "gpt2-medium": HopsModel(355.0, 727.0, 0.05, 2, 8),
}
#: Reference GPU type of Hops traces (``duration_s`` is the run time there on the requested count).
REFERENCE_GPU = "1080ti"


def host_core_ghz_per_gpu(host: str, gpus_on_node: int) -> float:
    """CPU capacity one GPU's data loader gets on a server of ``gpus_on_node`` GPUs."""
    return HOSTS[host or NOMINAL_HOST].core_ghz / max(1, gpus_on_node)


def iteration_parts(model: HopsModel, gpu: HopsGpu, num_gpus: int, num_nodes: int, core_ghz_per_gpu: float,
                    batch_size: int) -> dict[str, float]:
    """The time components of one iteration (seconds): ``T_d, T_f, T_b, T_u, T_c``."""
    compute = 3.0 * model.gflops * 1e9 * batch_size / (gpu.tflops * 1e12)
    grad_gb = 4.0 * model.params_m * 1e-3
    if num_gpus <= 1:
        t_c = 0.0
    elif num_nodes <= 1:
        t_c = grad_gb / B_LINK_GBPS * (num_gpus - 1) / num_gpus
    else:
        t_c = grad_gb / B_NET_GBPS
    return {"T_d": model.load_core_ghz_ms * 1e-3 * batch_size / core_ghz_per_gpu,
            "T_f": compute / 3.0, "T_b": compute * 2.0 / 3.0,
            "T_u": 3.0 * grad_gb / gpu.mem_gbps, "T_c": t_c}


def iteration_time(parts: dict[str, float], pattern: int, t_w: float = 0.0) -> float:
    """Equation 1: one iteration from its components, for overlap pattern 1 or 2."""
    comm = max(parts["T_b"] + NON_OVERLAP * parts["T_c"], parts["T_c"])
    if pattern == 1:
        return max(parts["T_d"], comm + parts["T_u"]) + parts["T_f"] + t_w
    return parts["T_d"] + comm + parts["T_u"] + parts["T_f"] + t_w


def is_hops_job(spec: JobSpec) -> bool:
    """Jobs this world plays: a Table 2 model given by its run time on a Hops GPU type."""
    return spec.model in MODELS and spec.duration_s is not None and spec.reference_gpu in GPUS


class HopsPhysics:
    """Iteration-time physics of one Hops job (work in samples); see the module docstring.

    Held by :class:`HopsJobPhysics`, the :class:`~dlsched.world.base.JobPhysics` the world plays; the
    formulas need no world, so they stand alone.
    """

    def __init__(self, spec: JobSpec, cluster_nodes_per_type: dict[str, int]) -> None:
        self.model = MODELS[spec.model]
        self.spec = spec
        #: Per-GPU batch (fixed per-GPU batch mode: the global batch grows with the GPU count).
        self.batch = int(spec.batch_size or self.model.batch_size)
        self._gpus_per_node = cluster_nodes_per_type

    def samples_per_s(self, gpu_type: str, node_counts: tuple[int, ...], hosts: tuple[str, ...] = ()) -> float:
        """Samples per second on ``node_counts`` GPUs per server; ``hosts`` names each server's host
        (default nominal), and the slowest server gates the job."""
        step, _ = self.step_times(gpu_type, node_counts, hosts)
        k = sum(c for c in node_counts if c > 0)
        return k * self.batch / step if step > 0 else 0.0

    def step_times(self, gpu_type: str, node_counts: tuple[int, ...],
                   hosts: tuple[str, ...] = ()) -> tuple[float, float]:
        """One iteration's time and the part of it spent waiting on gradient synchronisation beyond compute
        (what a job's own timers measure as sync time), both gated by the slowest server; ``(0, 0)`` where
        the job cannot run."""
        gpu = GPUS.get(gpu_type)
        used = [c for c in node_counts if c > 0]
        if gpu is None or not used:
            return 0.0, 0.0
        k, n = sum(used), len(used)
        per_node = self._gpus_per_node.get(gpu_type, max(used))
        slowest, slowest_alone = 0.0, 0.0
        for i in range(n):
            host = hosts[i] if i < len(hosts) else ""
            parts = iteration_parts(self.model, gpu, k, n, host_core_ghz_per_gpu(host, per_node), self.batch)
            slowest = max(slowest, iteration_time(parts, self.model.pattern))
            slowest_alone = max(slowest_alone, iteration_time({**parts, "T_c": 0.0}, self.model.pattern))
        return slowest, max(0.0, slowest - slowest_alone)

    def total_samples(self) -> float:
        """The job's work: its run time on the request (packed on the reference type, nominal host)."""
        assert self.spec.duration_s is not None
        per_node = self._gpus_per_node.get(REFERENCE_GPU, 8)
        rate = self.samples_per_s(REFERENCE_GPU, _packed(self.spec.num_gpus, per_node))
        return float(self.spec.duration_s) * rate


def _packed(k: int, per_node: int) -> tuple[int, ...]:
    full, rest = divmod(int(k), max(1, per_node))
    return tuple([per_node] * full + ([rest] if rest else []))


def hops_rate(phys: HopsPhysics, world: World, gpu_type: str, node_counts: tuple[int, ...],
              nodes: np.ndarray | None = None) -> Rate:
    """The :class:`~dlsched.world.base.Rate` of a Hops job; ``nodes`` (node ids in ``node_counts`` order)
    lets the hosts of the exact servers gate it."""
    hosts: tuple[str, ...] = ()
    if nodes is not None:
        hosts = tuple(world.cluster.nodes[int(n)].host for n in nodes)
    step, sync = phys.step_times(gpu_type, node_counts, hosts)
    if step <= 0 or not math.isfinite(step):
        return Rate(0.0)
    k = sum(node_counts)
    sps = k * phys.batch / step
    return Rate(work_per_s=sps, batch_size=phys.batch * k, local_bsz=phys.batch, step_time_s=step,
                sync_time_s=sync, throughput_sps=sps)


def observation_details(phys: HopsPhysics, world: World, gpu_type: str,
                        by_node: dict[int, int]) -> dict[str, tuple]:
    """What a Hops job's profiler plugin reports beside its iteration time (section 3.2): the servers it ran
    on, its time components and the data-loading time of each server (the slowest gates the job)."""
    gpu = GPUS.get(gpu_type)
    if gpu is None or not by_node:
        return {}
    servers = tuple(sorted(by_node.items()))
    k, n = sum(by_node.values()), len(by_node)
    per_node = phys._gpus_per_node.get(gpu_type, max(by_node.values()))
    loads = []
    parts: dict[str, float] = {}
    for node, _ in servers:
        host = world.cluster.nodes[node].host
        parts = iteration_parts(phys.model, gpu, k, n, host_core_ghz_per_gpu(host, per_node), phys.batch)
        loads.append(parts["T_d"])
    comps = tuple((name, parts[name]) for name in ("T_f", "T_b", "T_u", "T_c")) + (
        ("params", phys.model.params_m * 1e6),)
    return {"servers": servers, "components": comps, "data_load_s": tuple(loads)}


class HopsJobPhysics(JobPhysics):
    """A job of the Hops workload: work in samples, iteration time from its components, the hosts of the
    exact servers gating it."""

    def __init__(self, spec: JobSpec, world: World) -> None:
        super().__init__(spec, world)
        per_node = {t: max(world.cluster.nodes[n].num_gpus for n in ids)
                    for t, ids in world.cluster.nodes_of_type.items()}
        self.hops = HopsPhysics(spec, per_node)
        self.total_work = self.hops.total_samples()
        self.restart_delay_s = world.config.default_restart_delay_s
        self.perf_class = world.speeds.class_of(spec.model)

    def base_rate(self, progress, gpu_type, node_counts, batch_size):
        return hops_rate(self.hops, self.world, gpu_type, node_counts)

    def rate_on(self, progress: float, gpu_type: str, node_counts: tuple[int, ...], nodes: np.ndarray,
                batch_size: int | None) -> Rate:
        """The rate on exact servers (their hosts gate the job)."""
        return hops_rate(self.hops, self.world, gpu_type, node_counts, np.unique(nodes))

    def observation_details(self, placement: Placement) -> dict[str, tuple]:
        """The job's servers, time components and data-loading times (:func:`observation_details`)."""
        cluster = self.world.cluster
        by_node = {n: len(g) for n, g in placement.by_node(cluster).items()}
        return observation_details(self.hops, self.world, cluster.gpu_type_of[placement.gpus[0]], by_node)

    def profiled_step(self, rate: Rate) -> tuple[int, float, float]:
        """A Hops job times its iterations at its per-GPU batch."""
        return self.hops.batch, rate.step_time_s, 0.0

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
