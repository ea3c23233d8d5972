"""Every constant of the Hops world, in one place, with where each comes from.

Hops (SoCC'24) publishes no per-model measurements and ``../shared/data`` holds none for its GPUs (GTX 1080Ti,
Titan Xp, RTX 3090), so the world takes what *is* measured and says how every number reaches a Hops job.
Each number has a provenance (:data:`dlsched.world.provenance.KINDS`): ``measured``, ``derived`` (scaled from
a measurement by a published figure) or ``rule`` (a stated assumption).

* **Compute and synchronisation (measured, then carried by rules).** Each Table 2 model has a *family*: a
  model of the Sia SOSP'23 artifact profiles whose step time the world's fitted step-time model
  (:mod:`dlsched.world.throughput`, fitted to the measured rows) gives on the ``rtx`` type, an RTX 2080 Ti,
  the measured type closest to the Hops GPUs. ResNet-18 on CIFAR-10 is the ``cifar10`` family itself and
  ResNet-50 on ImageNet the ``imagenet`` family (measured). Every other model's GPU work is its family's at
  the same per-GPU batch times ``its forward GFLOPs / the family's``, and its synchronisation is the
  family's times ``its parameters / the family's`` (gradient bytes) (rule). No step is shorter than
  :data:`MIN_STEP_S`, the launch-bound step measured on an H200 (``../shared/data/h200``: ResNet-18 CIFAR at
  batch 64, 8.1 ms); a tiny network on a slower GPU is not faster than that (measured, then a rule).
* **GPU types (derived, rule).** Relative to the RTX 2080 Ti, Lambda's FP32 training benchmarks put the
  1080Ti at 1 / 1.35 and the Titan Xp at 1 / 1.22 (derived); the RTX 3090 at 2.0 x the 1080Ti, about 1.48 x
  the 2080 Ti, is an assumption (rule). Synchronisation is the measured ``rtx`` cluster's on every type (its
  PCIe servers and network; rule). Memory bandwidths are NVIDIA's specifications (derived), used for the
  weight-update component a profiler reports.
* **Hosts (derived, rule).** Section 4.2's server models, two CPUs each (Intel's specifications: Xeon Gold
  5118 12 cores 2.3 GHz, 5218 16 x 2.3, 5320 26 x 2.2) and their memory (192 or 384 GB). The CPUs one GPU's
  data loader gets are the server's cores x base clock shared by its GPUs.
* **Data loading (rule).** A cache hit costs the CPU work of decoding and augmenting a batch (core-GHz-ms
  per sample: ImageNet-style JPEG 8, Food-101 6, audio 4, CIFAR 0.15, tokenised text 0.05); a miss adds
  reading the batch's bytes from the server's storage (:data:`READ_GBPS` shared by its GPUs). The chance of a
  hit is the share of the dataset the server's page cache holds (:data:`CACHE_SHARE` of its memory, for the
  datasets of about two jobs at once), capped at :data:`P_HIT_MAX` (no epoch is all hits), with a per-job
  spread (:data:`P_HIT_JOB_SD`). Each component is lognormal: loader times are right-skewed, with a long tail
  of slow reads (medians as above; spreads :data:`SIGMA_HIT`, :data:`SIGMA_MISS`).
* **Noise (rule).** Per iteration: the compute varies by :data:`SIGMA_COMPUTE` and the all-reduce by
  :data:`SIGMA_SYNC` (network and PCIe contention), both lognormal with mean 1.
* **Patterns.** torchvision training loops prefetch the next batch during the step (equation 1's pattern
  1); the Hugging Face Trainer models load in the step (pattern 2), as the paper explains.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HopsGpu:
    """A GPU type as the Hops world plays it."""

    #: Training speed relative to the measured RTX 2080 Ti (``rtx``): compute time divides by it.
    speed: float
    #: Memory bandwidth (GB/s), NVIDIA's specification.
    mem_gbps: float
    provenance: str


@dataclass(frozen=True, slots=True)
class HopsHost:
    """A server model: its CPUs decide how fast a batch decodes, its memory how much of a dataset stays cached."""

    #: Cores x base clock (GHz) of the server's CPUs together.
    core_ghz: float
    memory_gb: float
    description: str


@dataclass(frozen=True, slots=True)
class HopsDataset:
    """A dataset as its loader sees it."""

    #: Size on disk (GB): what the page cache must hold for every read to hit.
    size_gb: float
    #: Bytes of one sample as stored (MB): what a miss reads.
    sample_mb: float
    #: CPU cost of decoding and augmenting one sample, core-GHz-milliseconds.
    load_core_ghz_ms: float


@dataclass(frozen=True, slots=True)
class HopsModel:
    """One model of Hops Table 2 with its published size and cost."""

    params_m: float
    #: Forward FLOPs of one sample (GFLOPs) at the input size the dataset uses.
    gflops: float
    dataset: str
    #: Equation 1's overlap pattern: 1 prefetches data during the step, 2 loads it in the step.
    pattern: int
    #: Per-GPU batch size of Table 2.
    batch_size: int
    #: The measured model (of the fitted step-time model) this one is carried from.
    family: str


#: The measured type the Hops GPUs are carried from: the RTX 2080 Ti of the Sia artifact profiles.
MEASURED_TYPE = "rtx"

#: Relative to the RTX 2080 Ti (Lambda's FP32 training benchmarks: 2080 Ti = 1.35 x 1080Ti = 1.22 x Titan Xp).
GPUS: dict[str, HopsGpu] = {
    "1080ti": HopsGpu(1.0 / 1.35, 484.0, "derived: Lambda FP32 benchmark, 2080 Ti = 1.35 x 1080Ti"),
    "titanxp": HopsGpu(1.0 / 1.22, 547.6, "derived: Lambda FP32 benchmark, 2080 Ti = 1.22 x Titan Xp"),
    "rtx3090": HopsGpu(2.0 / 1.35, 936.2, "rule: assumed 2.0 x the 1080Ti (no stored FP32 measurement)"),
}

#: Host models of the Hops clusters (section 4.2); CPUs per Intel's specifications.
HOSTS: dict[str, HopsHost] = {
    "sugon-w780g": HopsHost(2 * 12 * 2.3, 192.0, "Sugon W780-G, 2x Xeon Gold 5118, 192 GB"),
    "tigerway-yk8100-8g": HopsHost(2 * 16 * 2.3, 384.0, "TIGERWAY YK8100-8G, 2x Xeon Gold 5218, 384 GB"),
    "tigerway-yk8100-10g": HopsHost(2 * 26 * 2.2, 384.0, "TIGERWAY YK8100-10G, 2x Xeon Gold 5320, 384 GB"),
}
#: The host a node without one is taken to have (the most common in the Hops clusters).
NOMINAL_HOST = "sugon-w780g"

#: Datasets of Table 2 (sizes of the public releases; per-sample CPU costs as in the module docstring).
DATASETS: dict[str, HopsDataset] = {
    "imagenet": HopsDataset(140.0, 0.11, 8.0),
    "cifar10": HopsDataset(0.17, 0.003, 0.15),
    "food101": HopsDataset(5.0, 0.05, 6.0),
    "text": HopsDataset(2.0, 0.002, 0.05),
    "librispeech": HopsDataset(60.0, 0.2, 4.0),
}

#: Measured families: forward GFLOPs of one sample and parameters (M) of the model the Sia artifact profiled
#: (ResNet-18 on 32x32 CIFAR-10; ResNet-50 at 224x224; BERT-base at 384 tokens).
FAMILIES: dict[str, tuple[float, float]] = {"cifar10": (0.56, 11.2), "imagenet": (4.1, 25.6), "bert": (71.0, 110.0)}

#: Table 2's models (params and forward GFLOPs from the models' papers and torchvision / Hugging Face model
#: cards; the CIFAR variants at 32x32; DistilBERT at 256 tokens, MacBERT at 512, GPT-2 medium at 1024).
MODELS: dict[str, HopsModel] = {
    "resnet50": HopsModel(25.6, 4.1, "imagenet", 1, 128, "imagenet"),
    "resnet18-cifar10": HopsModel(11.2, 0.56, "cifar10", 1, 256, "cifar10"),
    "vgg11": HopsModel(132.9, 7.6, "imagenet", 1, 32, "imagenet"),
    "vgg13-cifar10": HopsModel(9.4, 0.23, "cifar10", 1, 128, "cifar10"),
    "convnext_base": HopsModel(88.6, 15.4, "imagenet", 1, 32, "imagenet"),
    "convnext_base-cifar10": HopsModel(87.6, 0.31, "cifar10", 1, 64, "cifar10"),
    "densenet161": HopsModel(28.7, 7.7, "imagenet", 1, 32, "imagenet"),
    "densenet161-cifar10": HopsModel(26.5, 0.16, "cifar10", 1, 64, "cifar10"),
    "mobilenet_v2": HopsModel(3.5, 0.3, "imagenet", 1, 64, "imagenet"),
    "mobilenet_v2-cifar10": HopsModel(2.2, 0.01, "cifar10", 1, 64, "cifar10"),
    "regnet": HopsModel(11.2, 1.6, "imagenet", 1, 32, "imagenet"),
    "regnet-cifar10": HopsModel(10.3, 0.03, "cifar10", 1, 32, "cifar10"),
    "distilbert": HopsModel(66.0, 33.8, "text", 2, 128, "bert"),
    "vit": HopsModel(86.6, 17.6, "food101", 2, 48, "bert"),
    "macbert": HopsModel(102.0, 104.4, "text", 2, 8, "bert"),
    "wav2vec": HopsModel(95.0, 70.0, "librispeech", 2, 16, "bert"),
    "gpt2-medium": HopsModel(355.0, 727.0, "text", 2, 8, "bert"),
}
#: The shortest GPU work of one step: ``step_time_s["cifar10/64"]`` of ``../shared/data/h200/gpu_profile.json``.
MIN_STEP_S = 0.00814
#: Reference GPU type of Hops traces (``duration_s`` is the run time there on the requested count).
REFERENCE_GPU = "1080ti"

#: Storage read bandwidth of one server (GB/s: a SATA SSD array or a 10 Gb/s file share), shared by its GPUs.
READ_GBPS = 1.0
#: Share of a server's memory its page cache gives one job's dataset (about two jobs' datasets at once).
CACHE_SHARE = 0.3
#: No dataset is all hits (a cold first epoch, evictions by other jobs); spread of a job's hit chance.
P_HIT_MAX = 0.98
P_HIT_JOB_SD = 0.05
#: Lognormal spreads (sigma of the log) of a hit's and a miss's loading time.
SIGMA_HIT = 0.1
SIGMA_MISS = 0.3
#: Lognormal spreads of an iteration's compute and all-reduce (mean 1).
SIGMA_COMPUTE = 0.03
SIGMA_SYNC = 0.2
#: Weight update (a profiler's ``T_u``): 12 bytes per parameter (weights, gradients, momentum) at memory
#: bandwidth, at most this share of the step's compute.
UPDATE_BYTES_PER_PARAM = 12.0
UPDATE_MAX_SHARE = 0.2
#: Iterations a job's profiler plugin times per report; at most this many data-loading times go with it.
ITERATIONS_PER_REPORT = 64
LOADS_PER_REPORT = 8
#: Draws of the fixed sample bank over which the world's expected iteration time is taken.
TRUTH_DRAWS = 2048


def provenance(model: str, gpu_type: str) -> dict[str, str]:
    """Where a Hops job's numbers on a GPU type come from: compute, synchronisation, GPU speed, data loading."""
    m, g = MODELS[model], GPUS[gpu_type]
    measured = model in ("resnet18-cifar10", "resnet50")
    compute = (f"measured: the fitted {m.family} profile on {MEASURED_TYPE}" if measured else
               f"rule: the fitted {m.family} profile on {MEASURED_TYPE} x GFLOPs ratio "
               f"{m.gflops:g}/{FAMILIES[m.family][0]:g}")
    sync = (f"measured: {m.family} on {MEASURED_TYPE}" if measured else
            f"rule: {m.family} on {MEASURED_TYPE} x parameters ratio {m.params_m:g}/{FAMILIES[m.family][1]:g}")
    return {"compute": compute, "sync": sync, "gpu_speed": g.provenance,
            "data_loading": "rule: CPU cost per sample, storage bandwidth and page-cache share (hops_params)"}
