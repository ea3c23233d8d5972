"""An executor that starts no processes: for measuring the service itself (its load benchmark).

A launched job "runs" until ``DLSCHED_DRY_RUN_S`` seconds (its environment's value) have passed, then its
ranks read EXITED with code 0; without that variable it runs until stopped. Stopping ends it at once with
code 0 (a training library checkpoints and exits 0 on SIGTERM). Each launch still appends the incarnation's
header to the ranks' logs, so the service's log pages have something to show. Nothing survives the
process: after a restart :meth:`DryRunExecutor.attach` finds nothing, as it would after a lost Ray.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dlsched.core import Cluster, InputError, Node
from dlsched.runtime.executor_api import LaunchSpec, NodeInfo, RankState, RankStatus, log_path
from dlsched.runtime.ray_cluster import type_slowdowns
from dlsched.runtime.worker_host import header_line


@dataclass
class _DryJob:
    incarnation: int
    nodes: list[str]
    ends_at: float
    stopped: bool = False


class DryRunExecutor:
    """The executor's API with no processes (see the module docstring)."""

    def __init__(self, nodes: Cluster | Sequence[Node], *, write_logs: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        cluster = nodes if isinstance(nodes, Cluster) else Cluster("dry-run", tuple(nodes))
        slowdown = type_slowdowns(cluster.type_names)
        self._nodes = [NodeInfo(n.name or str(n.node_id), n.gpu_type, n.num_gpus, "dry-run", False,
                                slowdown[n.gpu_type]) for n in cluster.nodes]
        self._jobs: dict[str, _DryJob] = {}
        self._write_logs, self._clock = write_logs, clock

    def nodes(self) -> list[NodeInfo]:
        return list(self._nodes)

    def launch(self, spec: LaunchSpec) -> None:
        raw = spec.env.get("DLSCHED_DRY_RUN_S")
        duration = math.inf
        if raw is not None:
            try:
                duration = float(raw)
            except ValueError:
                duration = math.nan
            if not duration >= 0:
                raise InputError(f"must be a number of seconds >= 0, got {raw!r}", field="DLSCHED_DRY_RUN_S")
        names = [node for node, _ in spec.ranks]
        known = {n.name for n in self._nodes}
        unknown = sorted(set(names) - known)
        if unknown:
            raise InputError(f"no node named {', '.join(unknown)}", field="ranks")
        self._jobs[spec.job_id] = _DryJob(spec.incarnation, names, self._clock() + duration)
        if self._write_logs:
            for rank, node in enumerate(names):
                path = log_path(spec.job_dir, rank)
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a") as out:
                    out.write(header_line(spec.job_id, spec.incarnation, rank, len(names), node) + "\n")
                    out.write(f"dry run: no process; exits after {duration:g} s\n")

    def poll(self, job_id: str) -> list[RankStatus]:
        job = self._jobs.get(job_id)
        if job is None:
            return []
        done = job.stopped or self._clock() >= job.ends_at
        state, code = (RankState.EXITED, 0) if done else (RankState.RUNNING, None)
        return [RankStatus(r, state, code, n) for r, n in enumerate(job.nodes)]

    def stop(self, job_ids: list[str], *, grace_s: float = 30.0) -> None:
        for job_id in job_ids:
            if job_id in self._jobs:
                self._jobs[job_id].stopped = True

    def attach(self, job_id: str, incarnation: int, world_size: int) -> bool:
        job = self._jobs.get(job_id)
        return job is not None and job.incarnation == incarnation and len(job.nodes) == world_size

    def forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)

    def hosted(self) -> dict[str, set[int]]:
        return {j: {job.incarnation} for j, job in self._jobs.items() if not job.stopped}

    def close(self, *, stop_ray: bool) -> None:
        self._jobs.clear()

