"""A multi-node Ray cluster on this machine for tests: a head and nodes started with ``ray start``, each in a
process session of its own, so one node can be killed alone and all of them stopped without touching any
other Ray on the machine."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

from dlsched.runtime import ray_cluster
from dlsched.runtime.worker_host import free_port

#: Node death is noticed within about a second, not Ray's default of half a minute.
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 300,
                      "health_check_timeout_ms": 300, "health_check_failure_threshold": 3}


class RayNodes:
    """A Ray head and worker nodes on this machine, each a ``ray start`` in a session of its own, so each can
    be killed alone and all are stopped without touching any other Ray on the machine."""

    def __init__(self, resources: dict[str, float] | None = None) -> None:
        # every `ray start` below inherits RAY_AUTH_MODE=disabled from tests/conftest.py, as do the drivers
        # (a head would otherwise turn tokens on by itself when ~/.ray holds one, a node joining it would not)
        self.head = ray_cluster.start_ray_node(
            ["--head", "--port", str(free_port()), "--include-dashboard=false", "--dashboard-port",
             str(free_port()), "--system-config", json.dumps(FAST_HEALTH_CHECKS),
             *(["--resources", json.dumps(resources)] if resources else [])], num_cpus=1)
        self.nodes = [self.head]
        self.address = self.head.address

    def add(self, resources: dict[str, float]) -> ray_cluster.LocalRay:
        node = ray_cluster.start_ray_node(["--address", self.address, "--resources", json.dumps(resources)],
                                          num_cpus=1)
        self.nodes.append(node)
        return node

    def kill_raylet(self, node: ray_cluster.LocalRay) -> None:
        """The node dies: its raylet is SIGKILLed (its workers notice and exit)."""
        for pid in ray_cluster.session_pids(node):
            if "/raylet/raylet" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                os.kill(pid, signal.SIGKILL)

    def shutdown(self) -> None:
        for node in reversed(self.nodes):
            ray_cluster.stop_session(node, grace_s=2.0)
            shutil.rmtree(node.temp_dir, ignore_errors=True)
