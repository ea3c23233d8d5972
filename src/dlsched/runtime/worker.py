"""The processes that do the work on Ray: one actor per GPU a job holds, and profiling tasks.

Each dlsched node is a Ray custom resource (``dlsched_node_<name>``, as many units as the node has GPUs;
``dlsched_gpu_<type>`` names its type), so a bundle asking for one unit of a node's resource can only be
placed on the Ray node that carries it. A job's placement becomes a placement group of one such bundle per
GPU, and its workers are actors pinned to the bundles. Where the Ray nodes have real GPUs, each bundle asks
for one ``GPU`` as well and the worker trains on it; otherwise the GPU type is emulated (see
:mod:`dlsched.runtime.training`).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any

from dlsched.core import Cluster

NODE_PREFIX = "dlsched_node_"
TYPE_PREFIX = "dlsched_gpu_"


def node_resource(cluster: Cluster, node_id: int) -> str:
    node = cluster.nodes[node_id]
    return NODE_PREFIX + (node.name or str(node.node_id))


def node_resources(cluster: Cluster) -> list[dict[str, float]]:
    """The custom resources each dlsched node's Ray node carries (``ray start --resources=...``)."""
    return [{node_resource(cluster, n.node_id): float(n.num_gpus), TYPE_PREFIX + n.gpu_type: float(n.num_gpus)}
            for n in cluster.nodes]


class TrainWorker:
    """One rank of a job (a Ray actor, pinned to one GPU of one node by its placement group bundle)."""

    def pid(self) -> int:
        return os.getpid()

    def rendezvous(self) -> str:
        """``ip:port`` free on this worker's machine, where rank 0 hosts the process group."""
        import ray

        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"{ray.util.get_node_ip_address()}:{port}"

    def train(self, spec: dict[str, Any], plan: dict[str, Any], ckpt_dir: str) -> dict[str, Any]:
        from dlsched.runtime.training import TrainSpec, WorkerPlan, train_round

        if plan.get("mps_percent") is not None:
            os.environ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(plan["mps_percent"])
        plan = {**plan, "shares": tuple(plan["shares"])}
        return dataclasses.asdict(train_round(TrainSpec(**spec), WorkerPlan(**plan), ckpt_dir))


def profile_steps(spec: dict[str, Any], local_bszs: list[int], steps: int, slowdown: float) -> list[tuple[int, float]]:
    """Sia-style profiling on one GPU: the mean step time at each local batch size (forward, backward and
    update of a scratch copy of the model; the job's checkpoint is not touched)."""
    import torch

    from dlsched.runtime.models import make_data, make_model, model_kind
    from dlsched.runtime.training import TrainSpec

    torch.set_num_threads(1)
    job = TrainSpec(**spec)
    kind = model_kind(job.model)
    data = make_data(job.model, job.samples, job.seed)
    model = make_model(job.model, job.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=job.lr)
    out = []
    for bsz in local_bszs:
        times = []
        for i in range(steps + 1):  # the first step warms up and is not counted
            idx = torch.arange(i * bsz, (i + 1) * bsz) % job.samples
            t0 = time.monotonic()
            optimizer.zero_grad(set_to_none=True)
            kind.loss_sum(model(data.inputs[idx]), data.targets[idx]).backward()
            optimizer.step()
            measured = time.monotonic() - t0
            if slowdown > 1.0:
                time.sleep(measured * (slowdown - 1.0))
            if i:
                times.append(measured * max(1.0, slowdown))
        out.append((bsz, sum(times) / len(times)))
    return out
