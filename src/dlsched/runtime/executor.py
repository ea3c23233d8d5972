"""The executor: starts, watches and stops a job's worker processes on Ray nodes; follows node membership.

Why it is built this way. The service must survive ``kill -9`` at any moment without its jobs noticing, so
nothing a worker needs may live in the service's process: each rank is hosted by a *detached*, *named*
Ray actor (``<job>/<incarnation>/<rank>`` in a namespace of the service's state folder), which Ray keeps
alive after the driver that created it is gone, and which a restarted service finds again by name
(:meth:`RayExecutor.attach`). Without ``--address`` the service starts Ray as a *separate process* in a
session of its own and records its address in ``STATE/ray.json``, so killing the service leaves Ray, the
actors and the training running, and the next start reconnects instead of starting over. The actor runs
the user's command as a child process rather than training itself, so the user's script owns its
process (its own PyTorch, its own DDP) and talks to the service only through the worker protocol of
``docs/service.md``. Finally the child is tied to its host with ``PR_SET_PDEATHSIG`` (SIGKILL) and a
watchdog on its process group, so a killed actor or node never leaves an orphan training that would keep
GPUs busy and write checkpoints behind the scheduler's back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlsched.core import Cluster, InputError, Node
from dlsched.runtime import ray_cluster
from dlsched.runtime.executor_api import (
    LaunchSpec,
    NodeInfo,
    RankState,
    RankStatus,
    actor_name,
    log_path,
    parse_actor_name,
)
from dlsched.runtime.worker_host import WorkerHost, header_line

__all__ = ["LaunchSpec", "NodeInfo", "RankState", "RankStatus", "RayExecutor", "rank_env"]

log = logging.getLogger(__name__)


@dataclass
class _Job:
    """What the executor knows of one job's current incarnation."""

    incarnation: int
    nodes: list[str]
    actors: list[Any]
    ray_nodes: list[str]
    #: Ranks found lost (sticky: a lost rank never comes back).
    lost: set[int] = field(default_factory=set)
    #: Exit codes of the ranks seen exited (sticky: a host or node dying afterwards changes nothing).
    exited: dict[int, int | None] = field(default_factory=dict)
    #: Why the executor ended a rank, when it did (``memory``).
    reasons: dict[int, str] = field(default_factory=dict)
    #: The last statuses, kept after :meth:`RayExecutor.stop` killed the actors.
    final: list[RankStatus] | None = None


def _as_cluster(nodes: Cluster | Sequence[Node]) -> Cluster:
    return nodes if isinstance(nodes, Cluster) else Cluster("local", tuple(nodes))


class RayExecutor:
    """Runs jobs' ranks on a Ray cluster (see the module docstring for why it is shaped so)."""

    #: Longest wait for one round of replies from the host actors (poll never blocks for long).
    poll_timeout_s = 5.0
    #: Longest wait for a launch's actors to come up.
    start_timeout_s = 60.0

    def __init__(self, ray: Any, state_dir: Path, *, local: ray_cluster.LocalRay | None,
                 local_nodes: list[Node] | None, cluster: Cluster | None, reference_speed: float) -> None:
        self.ray = ray
        self.state_dir = Path(state_dir)
        self.namespace = ray_cluster.namespace_for(self.state_dir)
        self.local_ray = local
        self._local_nodes = local_nodes
        self._cluster = cluster
        #: Emulated types are slowed relative to this speed (the fastest type known when it started).
        self._reference = reference_speed
        self._types: dict[str, tuple[str, int, bool]] = {}
        self._skipped: set[str] = set()
        self._jobs: dict[str, _Job] = {}
        self._host = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(WorkerHost)

    # -- construction --------------------------------------------------------------------------------
    @staticmethod
    def _connect(address: str, namespace: str) -> Any:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        if "RAY_AUTH_MODE" not in os.environ:
            _same_auth_as_ray_start()
        ray.init(address=address, namespace=namespace, log_to_driver=False, logging_level=logging.WARNING)
        return ray

    @classmethod
    def local(cls, state_dir: Path, nodes: Cluster | Sequence[Node]) -> RayExecutor:
        """A Ray of its own on this machine, hosting every (emulated) node of ``nodes``: reconnects to the
        one ``STATE/ray.json`` names while it lives, else starts a new one in a separate session."""
        state_dir = Path(state_dir)
        cluster = _as_cluster(nodes)
        _local_auth_mode()
        info = ray_cluster.read_ray_json(state_dir)
        if info is not None and not ray_cluster.is_alive(info):
            log.warning("the Ray recorded in %s is gone; starting a new one", state_dir / "ray.json")
            ray_cluster.stop_local_ray(state_dir, info, grace_s=1.0)
            info = None
        if info is None:
            info = ray_cluster.start_local_ray(state_dir)
        ray = cls._connect(info.address, ray_cluster.namespace_for(state_dir))
        return cls(ray, state_dir, local=info, local_nodes=list(cluster.nodes), cluster=cluster,
                   reference_speed=ray_cluster.reference_speed(cluster.type_names))

    @classmethod
    def join(cls, address: str, state_dir: Path, cluster: Cluster | None) -> RayExecutor:
        """An existing Ray cluster, whose nodes and GPUs come from Ray itself; with ``cluster``, every node's
        type must be one it declares."""
        if not ray_cluster.gcs_listening(address):
            raise InputError(f"no Ray cluster answers at '{address}' (expected host:port of a Ray head, as "
                             f"'ray start --head' prints it)", field="address")
        ray = cls._connect(address, ray_cluster.namespace_for(Path(state_dir)))
        try:
            types: dict[str, tuple[str, int, bool]] = {}
            present = []
            for raw in ray.nodes():
                found = ray_cluster.detect_type(ray, raw, types) if raw["Alive"] else None
                if found is None:
                    continue
                if cluster is not None:
                    ray_cluster.check_declared(ray_cluster.node_name(raw), found[0], cluster)
                present.append(found)
            declared = list(cluster.type_names) if cluster is not None else []
            reference = ray_cluster.reference_speed(declared + [t[0] for t in present if not t[2]])
            executor = cls(ray, Path(state_dir), local=None, local_nodes=None, cluster=cluster,
                           reference_speed=reference)
            executor._types = types
        except BaseException:
            ray.shutdown()
            raise
        return executor

    # -- membership ----------------------------------------------------------------------------------
    def _alive_ray_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.ray.nodes() if n["Alive"]]

    def nodes(self) -> list[NodeInfo]:
        """The nodes alive now: a dead Ray node disappears, a joining one appears."""
        alive = self._alive_ray_nodes()
        if self._local_nodes is not None:
            head = next((n for n in alive if ray_cluster.HEAD_RESOURCE in n.get("Resources", {})), None)
            if head is None:
                return []
            return [NodeInfo(n.name or str(n.node_id), n.gpu_type, n.num_gpus, str(head["NodeID"]), False,
                             ray_cluster.slowdown(n.gpu_type, self._reference)) for n in self._local_nodes]
        out = []
        for raw in alive:
            try:
                found = ray_cluster.detect_type(self.ray, raw, self._types)
            except Exception as exc:  # a node that joined later with a bad type: skipped, said once
                self._skip(str(raw["NodeID"]), str(exc))
                continue
            if found is None:
                continue
            gpu, count, real = found
            node = NodeInfo(ray_cluster.node_name(raw), gpu, count, str(raw["NodeID"]), real,
                            1.0 if real else ray_cluster.slowdown(gpu, self._reference))
            if self._cluster is not None and gpu not in self._cluster.type_names:
                self._skip(node.ray_node_id, f"Ray node {node.name} has GPU type {gpu}, which cluster "
                                             f"{self._cluster.name} does not declare")
                continue
            out.append(node)
        return sorted(out, key=lambda n: n.name)

    def _skip(self, ray_node_id: str, why: str) -> None:
        if ray_node_id not in self._skipped:
            self._skipped.add(ray_node_id)
            log.warning("ignoring a Ray node: %s", why)

    # -- launching -----------------------------------------------------------------------------------
    def launch(self, spec: LaunchSpec) -> None:
        """Start one detached, named host actor per rank and the command under each. Returns once the
        actors have started their processes; a rank whose node is gone or whose actor does not come up
        reads as LOST (the job's other ranks are then killed too: a gang runs whole or not at all)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._kill_named(spec.job_id)
        self._jobs.pop(spec.job_id, None)
        nodes = {n.name: n for n in self.nodes()}
        names = [node for node, _ in spec.ranks]
        job = _Job(spec.incarnation, names, [], [nodes[n].ray_node_id if n in nodes else "" for n in names])
        self._jobs[spec.job_id] = job
        missing = sorted({n for n in names if n not in nodes})
        if missing or not spec.ranks:
            log.warning("job %s: cannot launch on nodes %s (not alive)", spec.job_id, ", ".join(missing))
            self._lose_all(spec.job_id, job)
            return
        for rank, node in enumerate(names):
            strategy = NodeAffinitySchedulingStrategy(nodes[node].ray_node_id, soft=False)
            reserve: dict[str, Any] = {"num_cpus": spec.cpus_per_rank}
            if spec.memory_bytes_per_rank is not None:
                reserve["memory"] = spec.memory_bytes_per_rank
            job.actors.append(self._host.options(
                name=actor_name(spec.job_id, spec.incarnation, rank), namespace=self.namespace,
                lifetime="detached", scheduling_strategy=strategy, **reserve).remote(
                    spec.job_id, spec.incarnation, rank, node, spec.memory_bytes_per_rank))
        try:
            master_addr, master_port = self.ray.get(job.actors[0].address.remote(), timeout=self.start_timeout_s)
            refs = []
            for rank, (node, gpus) in enumerate(spec.ranks):
                env = rank_env(spec, rank, nodes[node], gpus, master_addr, master_port)
                header = header_line(spec.job_id, spec.incarnation, rank, spec.world_size, node)
                refs.append(job.actors[rank].start.remote(spec.command, spec.working_dir, env,
                                                          str(log_path(spec.job_dir, rank)), header,
                                                          spec.run_as, spec.max_log_bytes))
            self.ray.get(refs, timeout=self.start_timeout_s)
        except (self.ray.exceptions.RayError, TimeoutError) as exc:
            log.warning("job %s incarnation %d did not start: %s", spec.job_id, spec.incarnation, exc)
            self._lose_all(spec.job_id, job)

    def _lose_all(self, job_id: str, job: _Job) -> None:
        for actor in job.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)
        job.actors = []
        job.final = [RankStatus(r, RankState.LOST, None, n) for r, n in enumerate(job.nodes)]

    # -- watching ------------------------------------------------------------------------------------
    def _statuses(self, job: _Job, timeout_s: float) -> list[RankStatus]:
        if job.final is not None:
            return job.final
        pending = [r for r in range(len(job.actors)) if r not in job.exited and r not in job.lost]
        refs = {r: job.actors[r].status.remote() for r in pending}
        done = set()
        if refs:
            done = set(self.ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)[0])
        alive: set[str] | None = None
        out = []
        for rank, node in enumerate(job.nodes):
            ref = refs.get(rank)
            if rank in job.exited:
                out.append(RankStatus(rank, RankState.EXITED, job.exited[rank], node, job.reasons.get(rank)))
                continue
            if rank in job.lost:
                out.append(RankStatus(rank, RankState.LOST, None, node))
                continue
            if ref in done:
                try:
                    raw = self.ray.get(ref, timeout=0)
                except self.ray.exceptions.RayError:
                    job.lost.add(rank)
                    out.append(RankStatus(rank, RankState.LOST, None, node))
                    continue
                if raw["running"]:
                    out.append(RankStatus(rank, RankState.RUNNING, None, node))
                else:
                    job.exited[rank] = raw["exit_code"]
                    if raw.get("reason"):
                        job.reasons[rank] = str(raw["reason"])
                    out.append(RankStatus(rank, RankState.EXITED, raw["exit_code"], node, job.reasons.get(rank)))
                continue
            # no answer in time: lost when its Ray node is gone, else still running as far as anyone knows
            if alive is None:
                alive = {str(n["NodeID"]) for n in self._alive_ray_nodes()}
            if job.ray_nodes[rank] not in alive:
                job.lost.add(rank)
                out.append(RankStatus(rank, RankState.LOST, None, node))
            else:
                out.append(RankStatus(rank, RankState.RUNNING, None, node))
        return out

    def poll(self, job_id: str) -> list[RankStatus]:
        """Each rank's state now ([] for a job with no known workers); waits at most ``poll_timeout_s``."""
        job = self._jobs.get(job_id)
        return [] if job is None else self._statuses(job, self.poll_timeout_s)

    # -- stopping ------------------------------------------------------------------------------------
    def stop(self, job_ids: list[str], *, grace_s: float = 30.0) -> None:
        """SIGTERM every rank of every job (the training library checkpoints and exits), wait up to
        ``grace_s`` for all, SIGKILL the rest, then kill the host actors. The jobs are stopped together;
        their last statuses stay readable with :meth:`poll` until the next launch or :meth:`forget`."""
        jobs = {j: self._jobs[j] for j in job_ids if j in self._jobs and self._jobs[j].final is None}
        self._signal(jobs.values(), signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        states = {j: self._statuses(job, self.poll_timeout_s) for j, job in jobs.items()}
        while time.monotonic() < deadline and any(_running(s) for s in states.values()):
            time.sleep(0.2)
            states = {j: self._statuses(job, min(self.poll_timeout_s, max(0.1, deadline - time.monotonic())))
                      if _running(states[j]) else states[j] for j, job in jobs.items()}
        late = {j: job for j, job in jobs.items() if _running(states[j])}
        if late:
            self._signal(late.values(), signal.SIGKILL)
            until = time.monotonic() + 5.0
            while time.monotonic() < until and any(_running(states[j]) for j in late):
                time.sleep(0.1)
                states.update({j: self._statuses(job, 1.0) for j, job in late.items()})
        for j, job in jobs.items():
            for actor in job.actors:
                with contextlib.suppress(Exception):
                    self.ray.kill(actor, no_restart=True)
            job.actors, job.final = [], states[j]

    def _signal(self, jobs: Any, signum: int) -> None:
        refs = [a.signal.remote(int(signum)) for job in jobs for a in job.actors]
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=self.poll_timeout_s)

    # -- after a restart -----------------------------------------------------------------------------
    def attach(self, job_id: str, incarnation: int, world_size: int) -> bool:
        """Find an incarnation's host actors by name after a service restart. True when every rank's actor
        answers (its process may have exited meanwhile: :meth:`poll` tells); on False nothing of the job
        is left running. Actors of the job's other incarnations are killed either way."""
        actors = []
        for rank in range(world_size):
            try:
                actors.append(self.ray.get_actor(actor_name(job_id, incarnation, rank), namespace=self.namespace))
            except ValueError:
                break
        infos: list[dict[str, Any]] = []
        if len(actors) == world_size and world_size > 0:
            try:
                infos = self.ray.get([a.status.remote() for a in actors], timeout=self.poll_timeout_s * 2)
            except (self.ray.exceptions.RayError, TimeoutError):
                infos = []
        self._kill_named(job_id, keep=incarnation if infos else None)
        if not infos:
            for actor in actors:
                with contextlib.suppress(Exception):
                    self.ray.kill(actor, no_restart=True)
            self._jobs.pop(job_id, None)
            return False
        names = [str(i["node"]) for i in infos]
        by_name = {n.name: n.ray_node_id for n in self.nodes()}
        self._jobs[job_id] = _Job(incarnation, names, actors, [by_name.get(n, "") for n in names])
        return True

    def hosted(self) -> dict[str, set[int]]:
        """Every job with host actors in this service's namespace, and their incarnations: what a restarted
        service compares with its database to find workers it no longer knows."""
        out: dict[str, set[int]] = {}
        for name in self.ray.util.list_named_actors():
            parsed = parse_actor_name(name)
            if parsed is not None:
                out.setdefault(parsed[0], set()).add(parsed[1])
        return out

    def _kill_named(self, job_id: str, *, keep: int | None = None) -> None:
        for name in self.ray.util.list_named_actors():
            parsed = parse_actor_name(name)
            if parsed is None or parsed[0] != job_id or parsed[1] == keep:
                continue
            with contextlib.suppress(Exception):
                self.ray.kill(self.ray.get_actor(name, namespace=self.namespace), no_restart=True)

    def forget(self, job_id: str) -> None:
        """Kill a finished job's host actors and drop what the executor knows of it."""
        job = self._jobs.pop(job_id, None)
        for actor in job.actors if job is not None else []:
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)
        self._kill_named(job_id)

    def close(self, *, stop_ray: bool) -> None:
        """Disconnect from Ray; stop the local Ray only when asked (a graceful shutdown, never a crash)."""
        with contextlib.suppress(Exception):
            self.ray.shutdown()
        if stop_ray and self.local_ray is not None:
            ray_cluster.stop_local_ray(self.state_dir, self.local_ray)


def _running(states: list[RankStatus]) -> bool:
    return any(s.state is RankState.RUNNING for s in states)


def rank_env(spec: LaunchSpec, rank: int, node: NodeInfo, gpus: tuple[int, ...], master_addr: str,
             master_port: int) -> dict[str, str]:
    """What one rank's process gets on top of its node's environment: the job's variables, torchrun's
    (``LOCAL_RANK`` counts the job's ranks on the same node, ``GROUP_RANK`` its node among the job's; the
    restart count is how many incarnations ran before this one), the node's GPU type and slowdown unless the
    service set them, and on GPU nodes the rank's devices."""
    on_node = [r for r, (n, _) in enumerate(spec.ranks) if n == node.name]
    nodes = list(dict.fromkeys(n for n, _ in spec.ranks))  # the job's nodes, in rank order
    local_size = str(len(on_node))
    env = {**spec.env, "RANK": str(rank), "WORLD_SIZE": str(spec.world_size),
           "LOCAL_RANK": str(on_node.index(rank)), "LOCAL_WORLD_SIZE": local_size,
           "GROUP_RANK": str(nodes.index(node.name)), "GROUP_WORLD_SIZE": str(len(nodes)),
           "ROLE_NAME": "default", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(spec.world_size),
           "MASTER_ADDR": str(master_addr), "MASTER_PORT": str(master_port),
           # torchrun's: an unmodified script that reads them (or torch.distributed's env:// init) just works
           "TORCHELASTIC_RUN_ID": spec.job_id, "TORCHELASTIC_RESTART_COUNT": str(max(0, spec.incarnation - 1)),
           "TORCHELASTIC_MAX_RESTARTS": "0"}
    env.setdefault("DLSCHED_GPU_TYPE", node.gpu_type)
    env.setdefault("DLSCHED_SLOWDOWN", f"{node.slowdown:g}")
    if node.real_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    return env


def _same_auth_as_ray_start() -> None:
    """Connect with the authentication ``ray start`` chose for the cluster.

    ``ray start`` turns token authentication on when ``RAY_AUTH_MODE`` is unset and a token exists (as
    ``~/.ray/auth_token`` after any ``ray.init()`` of a local cluster), while a driver joining an existing
    cluster only follows ``RAY_AUTH_MODE``: without this, whether the service could reach its own Ray would
    depend on whether some earlier Ray on the machine left a token. Applying Ray's own rule here makes the two
    agree (an explicit ``RAY_AUTH_MODE`` still wins on both sides)."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray without token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _local_auth_mode() -> None:
    """The service's own Ray (``local``) runs without token authentication, said explicitly to ``ray start``
    (which inherits this process's environment) and to this driver alike: the choice then never depends on
    whether another Ray left a token in ``~/.ray`` between a start and a later reconnection (a restarted
    service). The Ray is the service's own, started for the emulated nodes of one machine."""
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        from ray._raylet import Config  # type: ignore[attr-defined]
    except ImportError:
        return
    Config.initialize("")  # a Ray configuration read earlier in this process sees the mode too
