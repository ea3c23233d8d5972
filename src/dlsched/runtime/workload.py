"""What ``dlsched run`` executes: a cluster of Ray nodes and a trace of real training jobs.

``ray-local-4`` is the built-in cluster: four nodes of two GPUs of three types (t4, t4, rtx, a100), small
enough for a laptop. Any cluster preset or file (``dlsched clusters``) may be named instead.

A runtime trace is a YAML file ``jobs: [...]`` of :class:`RuntimeJob` rows, or the built-in
``runtime-demo``: four real jobs (the three shipped models, one stopping at a target loss) arriving over
the first minute, which finish in a few minutes on two CPU cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dlsched.clusters import ClusterFile, NodeGroup, cluster_file
from dlsched.core import Adaptivity, Cluster, InputError, JobSpec

#: The built-in emulated cluster: (GPU type, nodes, GPUs per node).
RAY_LOCAL_4 = ClusterFile(
    name="ray-local-4", description="4 emulated nodes of 2 GPUs (t4, t4, rtx, a100) for the Ray runtime",
    nodes=[NodeGroup(gpu_type="t4", count=2, gpus_per_node=2), NodeGroup(gpu_type="rtx", count=1, gpus_per_node=2),
           NodeGroup(gpu_type="a100", count=1, gpus_per_node=2)])
BUILTIN_CLUSTERS = {"ray-local-4": RAY_LOCAL_4}


class RuntimeJob(BaseModel):
    """One real job of a runtime trace."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    job_id: str = Field(min_length=1)
    submit_s: float = Field(0.0, ge=0.0, le=7 * 86400.0)
    model: Literal["resnet", "transformer", "mlp"]
    gpus: int = Field(1, ge=1, le=64)
    max_gpus: int | None = Field(None, ge=1, le=64)
    adaptivity: Adaptivity = Adaptivity.ADAPTIVE
    samples: int = Field(1024, ge=16, le=10_000_000)
    init_batch: int = Field(32, ge=1, le=65536)
    max_batch: int = Field(256, ge=1, le=65536)
    lr: float = Field(0.05, gt=0.0, le=10.0)
    #: Learning rates per GPU count the user gives (Hops section 2.2); a count without one takes the rate of
    #: the nearest given count below it scaled by ``lr_scaling``. None: ``lr``, adapted by AdaScale.
    learning_rates: dict[int, float] | None = None
    lr_scaling: Literal["linear", "sqrt"] = "linear"
    epochs: float | None = Field(None, gt=0.0, le=10_000.0)
    target_loss: float | None = Field(None, gt=0.0, le=100.0)
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _consistent(self) -> RuntimeJob:
        if self.epochs is None and self.target_loss is None:
            raise ValueError("give epochs or target_loss: when the job is done")
        if self.max_batch < self.init_batch:
            raise ValueError(f"max_batch {self.max_batch} is below init_batch {self.init_batch}")
        if self.max_gpus is not None and self.max_gpus < self.gpus:
            raise ValueError(f"max_gpus {self.max_gpus} is below gpus {self.gpus}")
        for k, lr in (self.learning_rates or {}).items():
            if not 1 <= k <= (self.max_gpus or max(self.gpus, 4)):
                raise ValueError(f"learning_rates: {k} GPUs is outside the job's counts "
                                 f"1..{self.max_gpus or max(self.gpus, 4)}")
            if not 0.0 < lr <= 10.0:
                raise ValueError(f"learning_rates: the rate for {k} GPUs must be in (0, 10], got {lr}")
        return self

    def job_spec(self) -> JobSpec:
        """The request the scheduler sees (as for a simulated job; its speed it learns from reports)."""
        return JobSpec(job_id=self.job_id, submit_time_s=self.submit_s, model=self.model, num_gpus=self.gpus,
                       batch_size=self.init_batch, max_gpus=self.max_gpus or max(self.gpus, 4),
                       adaptivity=self.adaptivity, origin=f"job {self.job_id}",
                       learning_rates=tuple(sorted((self.learning_rates or {}).items())),
                       lr_scaling=self.lr_scaling)


class RuntimeTrace(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: list[RuntimeJob] = Field(min_length=1)


RUNTIME_DEMO = RuntimeTrace.model_validate({"jobs": [
    {"job_id": "mlp-0", "submit_s": 0, "model": "mlp", "gpus": 2, "samples": 32768, "epochs": 12,
     "init_batch": 64, "max_batch": 512},
    {"job_id": "resnet-1", "submit_s": 0, "model": "resnet", "gpus": 2, "samples": 8192, "epochs": 20},
    {"job_id": "transformer-2", "submit_s": 20, "model": "transformer", "gpus": 1, "samples": 8192, "epochs": 20},
    {"job_id": "mlp-3", "submit_s": 40, "model": "mlp", "gpus": 1, "samples": 32768, "target_loss": 0.35,
     "epochs": 50, "init_batch": 64, "max_batch": 512, "seed": 3},
]})
BUILTIN_TRACES = {"runtime-demo": RUNTIME_DEMO}


def load_cluster(name: str) -> Cluster:
    """A built-in runtime cluster, a cluster preset or a cluster file."""
    if name in BUILTIN_CLUSTERS:
        return BUILTIN_CLUSTERS[name].build()
    return cluster_file(name).build()


def load_trace(name: str) -> RuntimeTrace:
    """The built-in ``runtime-demo`` or a runtime trace YAML; problems name the file, job and field."""
    if name in BUILTIN_TRACES:
        return BUILTIN_TRACES[name]
    path = Path(name).expanduser()
    if not path.is_file():
        raise InputError(f"no runtime trace '{name}' (built in: {', '.join(BUILTIN_TRACES)}; or a YAML file "
                         f"with jobs: [...])", field="trace")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not YAML: {getattr(exc, 'problem', exc)}", source=str(path),
                         line=None if mark is None else mark.line + 1) from None
    try:
        trace = RuntimeTrace.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if "input" in err and err["type"] != "value_error" and not isinstance(err["input"], (dict, list)):
            message += f", got {err['input']!r}"
        raise InputError(message, source=str(path), field=loc or None) from None
    ids = [j.job_id for j in trace.jobs]
    if len(set(ids)) != len(ids):
        raise InputError("job ids repeat", source=str(path), field="job_id")
    return trace
