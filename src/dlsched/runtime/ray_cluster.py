"""The Ray the executor runs on: a local Ray kept as its own process, and the nodes a joined Ray offers.

A local Ray is started with ``ray start --head`` in a session of its own, so it outlives the service that
started it (a ``kill -9`` of the service leaves Ray and the training running); its address goes to
``STATE/ray.json`` and a restarted service reconnects to it. Every port it listens on is picked free, and
its files go to a short temporary folder of its own, so several such Rays share a machine. It is stopped
only on request, by killing the processes of its session (never ``ray stop``, which would stop every Ray
on the machine).

On a joined Ray, nodes are read from Ray itself: a node with CUDA GPUs by its device name, a CPU node by a
``dlsched_gpus_<type>: N`` resource that offers N emulated GPUs of that type.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlsched.core import Cluster, InputError
from dlsched.core.gpu import KNOWN_GPU_TYPES
from dlsched.runtime.emulation import relative_speeds
from dlsched.runtime.worker_host import free_port

log = logging.getLogger(__name__)

#: A CPU node offering emulated GPUs carries ``dlsched_gpus_<type>: N``.
EMULATED_PREFIX = "dlsched_gpus_"
#: A node may name itself with ``dlsched_node_<name>: 1`` (the runtime driver's convention).
NAME_PREFIX = "dlsched_node_"
HEAD_RESOURCE = "node:__internal_head__"


def namespace_for(state_dir: Path) -> str:
    """The Ray namespace of one service's actors: one per state folder, so services never meet."""
    return "dlsched-" + hashlib.sha1(str(Path(state_dir).resolve()).encode()).hexdigest()[:12]


def reference_speed(types: Iterable[str]) -> float:
    """The measured speed of the fastest of ``types``: the speed an emulated step runs at unstretched."""
    speeds = relative_speeds()
    return max((speeds[t] for t in types if t in speeds), default=1.0)


def slowdown(gpu: str, reference: float) -> float:
    """How much an emulated ``gpu`` stretches a step against the reference speed (a type without a measured
    speed, or one faster than the reference, runs unstretched)."""
    speed = relative_speeds().get(gpu)
    return 1.0 if speed is None else max(1.0, reference / speed)


def type_slowdowns(types: Iterable[str]) -> dict[str, float]:
    """:func:`slowdown` of each of ``types``, relative to the fastest of them."""
    types = list(types)
    reference = reference_speed(types)
    return {t: slowdown(t, reference) for t in types}


# -- the local Ray -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LocalRay:
    """A Ray head this package started (``STATE/ray.json``)."""

    address: str
    temp_dir: str
    #: The session id of its processes (the pid of the ``ray start`` that began it).
    session: int

    def to_json(self) -> str:
        return json.dumps({"address": self.address, "temp_dir": self.temp_dir, "session": self.session})


def session_pids(info: LocalRay) -> list[int]:
    """Live (non-zombie) processes of a local Ray, found from /proc: those of its session that are Ray's
    (their command line names its folder, or Ray renamed them ``ray::...``), so that a session number reused
    after a reboot never picks an unrelated process."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z" or int(fields[3]) != info.session:
            continue
        if info.temp_dir in cmdline or cmdline.startswith("ray::"):
            out.append(int(entry))
    return out


def gcs_listening(address: str) -> bool:
    """Whether something accepts connections at a Ray address (``host:port``), asked in about a second."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return False
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except OSError:
        return False


def is_alive(ray_info: LocalRay) -> bool:
    """Whether the Ray of ``ray.json`` still runs: its session has processes and its GCS answers."""
    return bool(session_pids(ray_info)) and gcs_listening(ray_info.address)


def read_ray_json(state_dir: Path) -> LocalRay | None:
    path = Path(state_dir) / "ray.json"
    try:
        raw = json.loads(path.read_text())
        return LocalRay(str(raw["address"]), str(raw["temp_dir"]), int(raw["session"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def start_ray_node(args: list[str], *, num_cpus: int | None = None, timeout_s: float = 120.0) -> LocalRay:
    """Run ``ray start`` with ``args`` (``--head ...`` or ``--address ...``) in a session of its own, in a new
    short temporary folder (Ray's socket paths must stay short), every port it opens picked free."""
    temp_dir = tempfile.mkdtemp(prefix="dlsched-ray-")
    ray_bin = Path(sys.executable).with_name("ray")
    cmd = [str(ray_bin) if ray_bin.exists() else "ray", "start", *args,
           "--temp-dir", temp_dir, "--disable-usage-stats",
           "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
           "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port()),
           "--num-cpus", str(num_cpus or os.cpu_count() or 1), "--num-gpus", "0",
           "--object-store-memory", str(100 * 1024 * 1024)]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_session(LocalRay("", temp_dir, proc.pid))
        raise RuntimeError(f"ray start did not finish within {timeout_s:g} s") from None
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        stop_session(LocalRay("", temp_dir, proc.pid))
        tail = "\n".join(text.strip().splitlines()[-5:])
        raise RuntimeError(f"ray start failed (exit {proc.returncode}):\n{tail}")
    found = re.search(r"ray start --address='([^']+)'", text)
    if found is not None:
        address = found.group(1)
    elif "--address" in args:
        address = args[args.index("--address") + 1]
    else:
        port = args[args.index("--port") + 1]
        address = f"{socket.gethostbyname(socket.gethostname())}:{port}"
    return LocalRay(address, temp_dir, proc.pid)


def start_local_ray(state_dir: Path, *, num_cpus: int | None = None, timeout_s: float = 120.0) -> LocalRay:
    """Start a Ray head in a session of its own and record it in ``STATE/ray.json``."""
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    info = start_ray_node(["--head", "--port", str(free_port()), "--include-dashboard=false",
                           "--dashboard-port", str(free_port())], num_cpus=num_cpus, timeout_s=timeout_s)
    tmp = state_dir / "ray.json.tmp"
    tmp.write_text(info.to_json())
    tmp.replace(state_dir / "ray.json")
    return info


def stop_session(info: LocalRay, *, grace_s: float = 5.0) -> None:
    """Stop every process of a local Ray: SIGTERM, then SIGKILL what is left after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        pids = session_pids(info)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and session_pids(info):
            time.sleep(0.1)


def stop_local_ray(state_dir: Path, info: LocalRay, *, grace_s: float = 5.0) -> None:
    """Stop a local Ray, remove its temporary folder and forget it (``ray.json``)."""
    stop_session(info, grace_s=grace_s)
    if Path(info.temp_dir).name.startswith("dlsched-ray-"):
        shutil.rmtree(info.temp_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        (Path(state_dir) / "ray.json").unlink()


# -- the nodes of a joined Ray -------------------------------------------------------------------------
#: Patterns of CUDA device names (lowercase) and the catalog type they mean; the first match wins, so
#: more specific patterns come first.
_DEVICE_TYPES: tuple[tuple[str, str], ...] = (
    (r"a100.*pcie", "a100-pcie"), (r"a100", "a100"), (r"\ba40\b", "a40"), (r"\ba10g?\b", "a10-pcie"),
    (r"v100", "v100"), (r"\bt4\b", "t4"), (r"\brtx[\s-]?6000\b", "quad"), (r"\brtx[\s-]?5000\b", "rtx5000"),
    (r"3090", "rtx3090"), (r"2080\s*ti", "rtx"), (r"1080\s*ti", "1080ti"), (r"titan\s*xp", "titanxp"),
)


def gpu_type_of_device(device: str) -> str | None:
    """The catalog type of a CUDA device name (``Tesla T4``, ``NVIDIA A100-SXM4-40GB``, Ray's
    ``accelerator_type`` names); None when dlsched knows no such type."""
    name = device.lower()
    for pattern, gpu in _DEVICE_TYPES:
        if re.search(pattern, name):
            return gpu
    return None


def probe_device_name(ray: Any, node_id: str, timeout_s: float = 60.0) -> str:
    """The first CUDA device's name on a Ray node, asked of ``nvidia-smi`` there (torch as a fallback)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def device_name() -> str:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
        import torch

        return str(torch.cuda.get_device_name(0))

    task = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(device_name)
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return str(ray.get(task.options(scheduling_strategy=strategy).remote(), timeout=timeout_s))


def node_name(node: dict[str, Any]) -> str:
    """A joined node's dlsched name: its ``dlsched_node_<name>`` resource, else host and node id."""
    for key in node.get("Resources", {}):
        if key.startswith(NAME_PREFIX):
            return str(key[len(NAME_PREFIX):])
    host = str(node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "node")
    return f"{host}-{str(node['NodeID'])[:8]}"


def detect_type(ray: Any, node: dict[str, Any], cache: dict[str, tuple[str, int, bool]]
                ) -> tuple[str, int, bool] | None:
    """(GPU type, GPU count, real GPUs?) of a joined node; None for a node that offers no GPUs."""
    node_id = str(node["NodeID"])
    if node_id in cache:
        return cache[node_id]
    resources: dict[str, float] = node.get("Resources", {})
    name = node_name(node)
    found: tuple[str, int, bool] | None = None
    if resources.get("GPU", 0) >= 1:
        accelerators = [k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")]
        gpu = next((t for t in map(gpu_type_of_device, accelerators) if t is not None), None)
        device = accelerators[0] if accelerators else ""
        if gpu is None:
            device = probe_device_name(ray, node_id)
            gpu = gpu_type_of_device(device)
        if gpu is None:
            raise InputError(f"Ray node {name} has GPUs of an unknown type '{device}' (known: "
                             f"{', '.join(sorted(KNOWN_GPU_TYPES))})", field="address")
        found = (gpu, int(resources["GPU"]), True)
    else:
        offered = [(k[len(EMULATED_PREFIX):], v) for k, v in resources.items() if k.startswith(EMULATED_PREFIX)]
        if len(offered) > 1:
            raise InputError(f"Ray node {name} offers several emulated GPU types "
                             f"({', '.join(t for t, _ in offered)}); a node has one", field="address")
        if offered:
            gpu, count = offered[0]
            if gpu not in KNOWN_GPU_TYPES:
                raise InputError(f"Ray node {name} offers emulated GPUs of unknown type '{gpu}' (known: "
                                 f"{', '.join(sorted(KNOWN_GPU_TYPES))})", field="address")
            found = (gpu, int(count), False)
    if found is not None:
        cache[node_id] = found
    return found


def check_declared(name: str, gpu: str, cluster: Cluster) -> None:
    """A joined node's type must be one the cluster file declares."""
    declared = cluster.type_names
    if gpu not in declared:
        raise InputError(f"Ray node {name} has GPU type {gpu}, which cluster {cluster.name} "
                         f"does not declare (it declares: {', '.join(declared)})", field="cluster")
