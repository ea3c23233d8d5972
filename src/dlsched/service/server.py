"""``dlsched serve``: the store, the executor, the round loop in a thread, and the HTTP API in front.

Before anything else the service takes its lock (:mod:`dlsched.service.lock`: one service per state and
per database) and resolves its configuration against the one the state was created with
(:mod:`dlsched.service.config`). ``STATE/server.json`` (mode 0600) tells clients where the service listens,
its ``pid`` and the admin token; it is written only once uvicorn accepts connections, so a client that reads
it can connect, and removed at a graceful stop (a ``kill -9`` leaves it behind with a dead ``pid``: ``dlsched
serve status`` tells the two apart). The admin token is kept across restarts in ``STATE/admin.token`` (the
database holds only its hash). What the service does is logged, one logfmt line each, on stderr and in
``STATE/serve.log`` (:mod:`dlsched.service.servicelog`).

A graceful stop (SIGINT, SIGTERM) checkpoints and stops every job, requeues it as preempted, and stops the
Ray this service started; a crash (``kill -9``) does none of that, and the next start re-attaches to the
workers that still run (see :mod:`dlsched.service.loop`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlsched.core import InputError
from dlsched.plugins import load_plugins
from dlsched.service import config
from dlsched.service import isolation as isolation_mod
from dlsched.service.isolation import Isolation
from dlsched.service.lock import ServiceLock
from dlsched.service.loop import LoopOptions, RoundLoop
from dlsched.service.options import ServeOptions
from dlsched.service.servicelog import LoggedStore, event, setup_logging, teardown_logging
from dlsched.service.store import Store
from dlsched.version import __version__

log = logging.getLogger(__name__)

SERVER_FILE = "server.json"
#: The admin's token, kept across restarts (mode 0600; the database holds only its hash).
TOKEN_FILE = "admin.token"


def admin_token(store: Store, state: Path) -> str:
    """The admin's token: the one ``STATE/admin.token`` (or an older ``server.json``) keeps when it is still
    valid, else a new one, kept there (``server.json`` goes at a graceful stop; the token stays)."""
    for path, read in ((state / TOKEN_FILE, lambda text: text.strip()),
                       (state / SERVER_FILE, lambda text: json.loads(text).get("token"))):
        try:
            token = read(path.read_text())
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(token, str) and token:
            user = store.user_by_token(token)
            if user is not None and user.admin:
                _write_private(state / TOKEN_FILE, token + "\n")
                return token
    if any(u.name == "admin" for u in store.users()):
        token = store.add_token("admin")
    else:
        token = store.add_user("admin", admin=True)
    _write_private(state / TOKEN_FILE, token + "\n")
    return token


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read, atomically (temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    tmp.replace(path)


def write_server_file(state: Path, url: str, token: str) -> None:
    _write_private(state / SERVER_FILE, json.dumps({"url": url, "token": token, "pid": os.getpid()}))


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
    """The policy the options name with the stages they swap in (registered by the ``--plugin`` files, which
    :func:`_run` loads first), and the quota admission stage in front when the policy admits everyone and no
    admission is given (it admits everyone too until quotas are set), so quotas hold under any preset."""
    from dlsched.policies import build_scheduler
    from dlsched.policies.registry import SCHEDULERS

    entry = SCHEDULERS.get(options.policy)
    stages = dict(options.stages)
    if "admission" not in stages and entry is not None and entry.stage("admission") == "all":
        stages["admission"] = "quota"
    return build_scheduler(options.policy, admission=stages.get("admission"), ordering=stages.get("ordering"),
                           allocation=stages.get("allocation"), placement=stages.get("placement"),
                           coordination=stages.get("coordination"), settings=dict(options.settings), seed=0)


def serve(options: ServeOptions) -> None:
    """Run the service until SIGINT or SIGTERM (see the module docstring).

    The lock comes first: a second service on the same state or database is refused before it writes
    anything, builds an executor or recovers a job. Then the stored configuration fills the flags not given
    (:mod:`dlsched.service.config`), and only then do the executor and the round loop start."""
    state = options.state.expanduser().resolve()
    os.umask(0o077)  # whatever the service creates is its own alone unless made otherwise (isolation.py)
    try:
        state.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {state}: {exc.strerror}", field="state") from None
    lock = ServiceLock(state)
    try:
        database = config.database_of(state, options)
        lock.acquire_files(sqlite_file(database, state))
        store = LoggedStore.open(state, database)
        try:
            if store.dialect == "postgresql":
                assert database is not None
                lock.acquire_postgres(database, store)
            stored = config.stored_config(store, state)
            resolved, changes = config.resolve(options, state, stored)
            _run(resolved, state, store, lock, changes)
        finally:
            store.close()
    finally:
        lock.release()


def sqlite_file(database: str | None, state: Path) -> Path | None:
    """The SQLite database file of a URL (the state's own when None); None for PostgreSQL."""
    if database is None:
        return state / "dlsched.db"
    from sqlalchemy.engine import make_url

    try:
        url = make_url(database)
    except Exception:  # noqa: BLE001 - the store refuses it with its own message
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def _run(options: ServeOptions, state: Path, store: Store, lock: ServiceLock, changes: dict[str, Any]) -> None:
    """Build the executor, serve the API and run rounds until told to stop, and stop everything in order."""
    token = admin_token(store, state)
    load_plugins(options.plugins)  # the stored ones on a restart too: their stages are named by the policy
    probe = service_scheduler(options)  # a bad policy, stage or tunable fails before anything starts
    if probe.traits.needs_oracle:
        raise InputError(f"'{options.policy}' as configured asks for the simulator's oracle, which a real "
                         f"cluster does not have", field="policy")
    sock = _bind(options)
    handlers = setup_logging(state)
    try:
        isolation = _isolation(options, state, store,
                               (options.checkpoint_dir or state / "checkpoints").expanduser().resolve())
        executor, cluster_name = build_executor(options, state)
        shown = config.save(store, state, options, changes)
        event("start", f"dlsched serve {__version__} starting on {state}", pid=os.getpid(), state=str(state),
              cluster_name=cluster_name,
              **{k: json.dumps(v) if isinstance(v, dict) else v for k, v in shown.items()})
        _say_isolation(isolation)
        if changes:
            event("reconfigured", "configuration changed by --reconfigure", logging.WARNING,
                  changes=json.dumps(changes))
        try:
            _serve_api(options, state, store, lock, executor, cluster_name, token, sock, isolation)
        except Exception:
            log.exception("the service failed")
            raise
        finally:
            executor.close(stop_ray=not lock.lost)
            event("stopped", "the service stopped", pid=os.getpid())
        if lock.lost:
            raise InputError("another service took this one's database lock while its connection was down; "
                             "this one stopped and left the jobs to it", field="database")
    finally:
        teardown_logging(handlers)
        sock.close()


def _bind(options: ServeOptions) -> socket.socket:
    """The API's listening socket. Made with ``IPPROTO_TCP`` named, not 0: asyncio turns Nagle's algorithm
    off only on connections whose socket says TCP, and with it on, every answer (h11 writes the headers and
    the body apart) waited ~40 ms for the client's delayed ACK, which capped one client at ~20 requests/s."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((options.host, options.port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {options.host}:{options.port}: {exc.strerror}", field="port") from None
    return sock


def _isolation(options: ServeOptions, state: Path, store: Store, checkpoint_dir: Path) -> Isolation:
    """Who this start's jobs run as (:mod:`dlsched.service.isolation`), with the state's modes set for it;
    an InputError when the job account could not reach its folders or a second user would share the
    service's account."""
    isolation = isolation_mod.resolve(options.isolation, options.job_user)
    isolation_mod.check_users(len(store.users()), isolation, options.allow_shared_account)
    isolation_mod.secure_state(state, isolation.mode, checkpoint_dir)  # first: these folders' modes are ours
    if isolation.job_account is not None:
        for field, folder in (("state", state), ("checkpoint_dir", checkpoint_dir)):
            blocked = isolation_mod.unreachable(folder, isolation.job_account)
            if blocked is not None:
                raise InputError(f"the job account {isolation.job_account.name!r} cannot pass {blocked} (mode "
                                 f"{blocked.stat().st_mode & 0o777:o}) to reach {folder}; put it under a folder "
                                 "others may pass through", field=field)
        blocked = isolation_mod.unreachable(Path(sys.executable).resolve(), isolation.job_account)
        if blocked is not None:  # jobs find this Python first on their PATH, as the service's own run
            event("isolation-python", f"the job account cannot run this service's Python ({sys.executable}: "
                  f"{blocked} is closed to it); jobs will need a python of their own", logging.WARNING,
                  blocked=str(blocked))
    store.meta_set(isolation_mod.META_KEY, isolation.mode)
    return isolation


def _say_isolation(isolation: Isolation) -> None:
    if isolation.mode == "none":
        event("isolation", f"no isolation: {isolation.why}", logging.WARNING, isolation="none")
    else:
        assert isolation.job_account is not None
        event("isolation", f"jobs run under their users' OS accounts, else as {isolation.job_account.name}",
              isolation="accounts", job_user=isolation.job_account.name)


def _serve_api(options: ServeOptions, state: Path, store: Store, lock: ServiceLock, executor: Any,
               cluster_name: str, token: str, sock: socket.socket, isolation: Isolation) -> None:
    """Recover, run the first round, then the API in front and the rounds behind until SIGINT or SIGTERM."""
    import uvicorn

    from dlsched.replay.routes import add_history_route
    from dlsched.service.api import create_app
    from dlsched.service.confine import default_roots
    from dlsched.service.dashboard import add_dashboard
    from dlsched.service.metrics import add_metrics
    from dlsched.service.whatif_view import WhatIfRuns, add_whatif_routes

    store.meta_set("service", json.dumps({"policy": options.policy, "settings": dict(options.settings),  # what-ifs
                                           "stages": dict(options.stages), "cluster": options.cluster,
                                           "round_s": options.round_s}))
    jobs_dir = state / "jobs"
    checkpoint_dir = (options.checkpoint_dir or state / "checkpoints").expanduser().resolve()
    loop = RoundLoop(store, executor, lambda: service_scheduler(options), cluster_name=cluster_name,
                     options=LoopOptions(round_s=options.round_s, jobs_dir=jobs_dir, checkpoint_dir=checkpoint_dir,
                                         stop_grace_s=options.stop_grace_s, min_run_s=options.min_run_s,
                                         isolation=isolation, max_log_bytes=options.max_log_mb << 20,
                                         explain_keep_rounds=options.explain_keep_rounds))
    loop.recover()
    stop = threading.Event()

    def cluster_info() -> dict[str, Any]:
        cluster = loop.cluster
        return {"name": cluster_name, "policy": options.policy, "round": loop.round_no,
                "nodes": [] if cluster is None else
                [{"name": n.name, "gpu_type": n.gpu_type, "gpus": n.num_gpus} for n in cluster.nodes]}

    app = create_app(store, jobs_dir=jobs_dir, cluster_info=cluster_info, admit=loop.refusal,
                     max_body_bytes=options.max_body_kb * 1024, rate_per_s=options.rate_per_s,
                     allowed_dirs=list(options.allow_dir) or default_roots(state), protected_dirs=[checkpoint_dir],
                     state_dir=state, isolation=isolation.mode)
    add_dashboard(app, store, cluster_info)
    add_metrics(app, store)
    add_history_route(app, store)
    url = f"http://{options.host}:{sock.getsockname()[1]}"
    whatifs = WhatIfRuns(state, server_url=url, admin_token=token,
                         sqlite=store.dialect == "sqlite" and options.database is None,
                         plugins=[p.expanduser().resolve() for p in options.plugins])
    add_whatif_routes(app, whatifs)
    loop.run_round()  # the first round before the API answers: the cluster is known
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))

    def lost() -> None:
        server.should_exit = True

    thread = threading.Thread(target=_rounds, args=(loop, options.round_s, stop, lock.verify, lost),
                              name="dlsched-rounds", daemon=True)
    thread.start()
    announcer = threading.Thread(target=_announce, args=(server, stop, state, url, token, lock),
                                 name="dlsched-announce", daemon=True)
    announcer.start()
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        whatifs.close()
        remove_server_file(state)
        event("stopping", "the API stopped; checkpointing and stopping the jobs", url=url)
        thread.join(timeout=options.round_s + 60.0)
        if not lock.lost:  # the jobs are the new holder's now: neither stopped nor requeued by this one
            loop.shutdown()


def _announce(server: Any, stop: threading.Event, state: Path, url: str, token: str, lock: ServiceLock) -> None:
    """Write ``server.json`` once uvicorn accepts connections (not before: a client that finds the file
    must be able to connect), and name the URL in the lock for a second service refused to report."""
    while not server.started:
        if stop.wait(0.05):
            return
    write_server_file(state, url, token)
    lock.set_url(url)
    event("listening", f"the API listens at {url}", url=url, pid=os.getpid())


def remove_server_file(state: Path) -> None:
    """Remove ``server.json`` if this process wrote it (a graceful stop: nothing listens any more)."""
    path = state / SERVER_FILE
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _rounds(loop: RoundLoop, round_s: float, stop: threading.Event, held: Callable[[], bool] = lambda: True,
            lost: Callable[[], None] = lambda: None) -> None:
    """Run rounds every ``round_s`` seconds until told to stop; a failing round is logged, never fatal. Before
    each round the service's lock must still be ``held``: a service that lost it (its PostgreSQL lock's
    connection died and another service took the lock) runs no more rounds and calls ``lost``."""
    while not stop.is_set():
        t0 = time.monotonic()
        if t0 - (loop.last_monotonic or 0.0) >= round_s:
            if not held():
                log.error("the service lost its lock to another service; stopping without another round",
                          extra={"event": "lock-lost", "fields": {}})
                lost()
                return
            try:
                loop.last_monotonic = t0
                loop.run_round()
            except Exception:  # the service keeps serving; the next round tries again
                log.exception("round %d failed", loop.round_no)
        stop.wait(max(0.05, round_s - (time.monotonic() - (loop.last_monotonic or t0))))
