"""``dlsched serve``: the store, the executor, the round loop in a thread, and the HTTP API in front.

``STATE/server.json`` (mode 0600) tells clients where the service listens and holds the admin token; it is
written only once the socket is bound and the database is open, so a client that reads it can connect. The
admin token is kept across restarts (the database holds only its hash; the file is what keeps it).

A graceful stop (SIGINT, SIGTERM) checkpoints and stops every job, requeues it as preempted, and stops the
Ray this service started; a crash (``kill -9``) does none of that, and the next start re-attaches to the
workers that still run (see :mod:`dlsched.service.loop`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from dlsched.core import InputError
from dlsched.service.loop import LoopOptions, RoundLoop
from dlsched.service.options import ServeOptions
from dlsched.service.store import Store

log = logging.getLogger(__name__)

SERVER_FILE = "server.json"


def admin_token(store: Store, state: Path) -> str:
    """The admin's token: the one in ``server.json`` when it is still valid, else a new one."""
    path = state / SERVER_FILE
    if path.is_file():
        try:
            token = json.loads(path.read_text()).get("token")
        except ValueError:
            token = None
        if isinstance(token, str):
            user = store.user_by_token(token)
            if user is not None and user.admin:
                return token
    if any(u.name == "admin" for u in store.users()):
        return store.add_token("admin")
    return store.add_user("admin", admin=True)


def write_server_file(state: Path, url: str, token: str) -> None:
    tmp = state / f".{SERVER_FILE}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"url": url, "token": token, "pid": os.getpid()}, fh)
    tmp.replace(state / SERVER_FILE)


def build_executor(options: ServeOptions, state: Path) -> tuple[Any, str]:
    """The executor the options ask for, and the name of the cluster it runs."""
    from dlsched.runtime.workload import load_cluster

    if options.executor == "dry-run":
        from dlsched.runtime.dry_run import DryRunExecutor

        cluster = load_cluster(options.cluster)
        return DryRunExecutor(cluster), cluster.name
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError("the service runs jobs on Ray: pip install 'dlsched[runtime]'") from None
    from dlsched.runtime.executor import RayExecutor

    if options.address is not None:
        given = load_cluster(options.cluster) if options.cluster_given else None
        return RayExecutor.join(options.address, state, given), (given.name if given else "ray")
    cluster = load_cluster(options.cluster)
    return RayExecutor.local(state, cluster), cluster.name


def service_scheduler(options: ServeOptions) -> Any:
    """The policy the options name, with the quota admission stage in front when the policy admits everyone
    (it admits everyone too until quotas are set), so quotas hold under any preset."""
    from dlsched.policies import build_scheduler
    from dlsched.policies.registry import SCHEDULERS

    entry = SCHEDULERS.get(options.policy)
    admission = "quota" if entry is not None and entry.stage("admission") == "all" else None
    return build_scheduler(options.policy, admission=admission, settings=dict(options.settings), seed=0)


def serve(options: ServeOptions) -> None:
    """Run the service until SIGINT or SIGTERM (see the module docstring)."""
    import uvicorn

    from dlsched.service.api import create_app
    from dlsched.service.dashboard import add_dashboard
    from dlsched.service.metrics import add_metrics

    state = options.state.expanduser().resolve()
    state.mkdir(parents=True, exist_ok=True)
    store = Store.open(state, options.database)
    token = admin_token(store, state)

    def make_scheduler() -> Any:
        return service_scheduler(options)

    probe = make_scheduler()  # a bad policy or tunable fails before anything starts
    if probe.traits.needs_oracle:
        raise InputError(f"'{options.policy}' as configured asks for the simulator's oracle, which a real "
                         f"cluster does not have", field="policy")
    executor, cluster_name = build_executor(options, state)
    jobs_dir = state / "jobs"
    checkpoint_dir = (options.checkpoint_dir or state / "checkpoints").expanduser().resolve()
    loop = RoundLoop(store, executor, make_scheduler, cluster_name=cluster_name,
                     options=LoopOptions(round_s=options.round_s, jobs_dir=jobs_dir, checkpoint_dir=checkpoint_dir))
    loop.recover()
    stop = threading.Event()

    def cluster_info() -> dict[str, Any]:
        cluster = loop.cluster
        return {"name": cluster_name, "policy": options.policy, "round": loop.round_no,
                "nodes": [] if cluster is None else
                [{"name": n.name, "gpu_type": n.gpu_type, "gpus": n.num_gpus} for n in cluster.nodes]}

    app = create_app(store, jobs_dir=jobs_dir, cluster_info=cluster_info)
    add_dashboard(app, store, cluster_info)
    add_metrics(app, store)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((options.host, options.port))
    except OSError as exc:
        raise InputError(f"cannot listen on {options.host}:{options.port}: {exc.strerror}", field="port") from None
    port = sock.getsockname()[1]
    loop.run_round()  # the first round before the API answers: the cluster is known
    thread = threading.Thread(target=_rounds, args=(loop, options.round_s, stop), name="dlsched-rounds",
                              daemon=True)
    thread.start()
    write_server_file(state, f"http://{options.host}:{port}", token)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        thread.join(timeout=options.round_s + 60.0)
        loop.shutdown()
        executor.close(stop_ray=True)
        store.close()


def _rounds(loop: RoundLoop, round_s: float, stop: threading.Event) -> None:
    """Run rounds every ``round_s`` seconds until told to stop; a failing round is logged, never fatal."""
    while not stop.is_set():
        t0 = time.monotonic()
        if t0 - (loop.last_monotonic or 0.0) >= round_s:
            try:
                loop.last_monotonic = t0
                loop.run_round()
            except Exception:  # the service keeps serving; the next round tries again
                log.exception("round %d failed", loop.round_no)
        stop.wait(max(0.05, round_s - (time.monotonic() - (loop.last_monotonic or t0))))
