"""Service at scale (issue 35): rounds, submissions and listing of ``dlsched serve`` with 10,000 GPUs and
100,000 jobs waiting, on SQLite or PostgreSQL.

Per policy ``dlsched serve`` runs on a fresh ``--state`` (and PostgreSQL schema) with the dry-run executor:
no processes, a job holds its GPUs ``DLSCHED_DRY_RUN_S`` seconds (an hour: the queue stays full). Before its
first start ``Store.add_jobs`` writes the queue (``load_s``): ``--queued`` jobs plus one per GPU (at most that
many run), 1, 2, 4 or 8 GPUs (seeded), so every round sees ``--queued`` waiting. Round figures: the rounds
after the first (``first_round_s``: before the API answers) with ``--queued`` waiting, ``--rounds`` awaited
and those during the phases. ``--submissions`` POST /v1/jobs as fast as ``--clients`` threads go, a token each
(the API limits requests per token), timed to the 201; ``lost``: accepted ids missing after the stop.
``--pages`` GET /v1/jobs?limit=100 follow ``X-Next-Cursor``, every fifth filtered by status and user (a 429 is
waited out, not timed). ``peak_rss_mb``: the service's VmHWM. One JSON object per line per policy.

Targets, with 10,000 GPUs and 100,000 queued, on SQLite and PostgreSQL: round p99 <= 1 s under fifo and
tiresias, <= 2 s under sia; >= 500 submissions/s, p99 < 100 ms, 0 lost; a page of 100 jobs in <= 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import httpx
import numpy as np

from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_10K = ROOT / "benchmarks" / "clusters" / "service-10k.yaml"
POSTGRES_ENV = "DLSCHED_TEST_POSTGRES_URL"
CHUNK = 5000
GPU_MIX = (1, 2, 4, 8)


class Failed(Exception):
    """A policy's run that could not finish (the service exited or was too slow)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One ``error:`` line, exit 2."""
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags, checked (a bad one exits 2 with one ``error:`` line)."""
    ap = Parser(description=__doc__.split("\n\n")[0])
    for flag, kind, default in (("gpus", int, 10000), ("queued", int, 100000), ("rounds", int, 10),
                                ("round-s", float, 5.0), ("submissions", int, 5000), ("clients", int, 8),
                                ("pages", int, 50), ("timeout-s", float, 3600.0)):
        ap.add_argument(f"--{flag}", type=kind, default=default)
    ap.add_argument("--policy", action="append", help="repeatable or a comma list (default fifo,tiresias,sia)")
    ap.add_argument("--database", default="sqlite", help=f"sqlite, postgresql (${POSTGRES_ENV}) or a URL")
    args = ap.parse_args(argv)
    ones = ((f, getattr(args, f) >= 1, "at least 1") for f in ("rounds", "submissions", "clients", "pages"))
    bad = [(f, why) for f, ok, why in (
        ("gpus", args.gpus >= 8 and not args.gpus % 8, "a positive multiple of 8 (nodes of 8 GPUs)"),
        ("queued", args.queued >= 0, "at least 0"), *ones, ("round-s", 1 <= args.round_s <= 86400, "in [1, 86400]"),
        ("timeout-s", args.timeout_s > 0, "positive")) if not ok]
    if bad:
        ap.error(f"--{bad[0][0]}: must be {bad[0][1]}, got {getattr(args, bad[0][0].replace('-', '_')):g}")
    import dlsched.policies  # noqa: F401 - registers the presets
    from dlsched.policies.registry import SCHEDULERS

    args.policy = [p.strip() for v in (args.policy or ["fifo,tiresias,sia"]) for p in v.split(",") if p.strip()]
    unknown = [p for p in args.policy if p not in SCHEDULERS]
    if unknown or not args.policy:
        ap.error(f"--policy: unknown {', '.join(unknown) or 'none given'} (see 'dlsched policies')")
    if args.database == "postgresql":
        args.database = os.environ.get(POSTGRES_ENV) or ap.error(f"--database postgresql: set {POSTGRES_ENV}")
    elif args.database != "sqlite" and not args.database.startswith("postgresql"):
        ap.error(f"--database: sqlite, postgresql or a postgresql+psycopg:// URL, got {args.database!r}")
    return args


def cluster_file(gpus: int, tmp: Path) -> Path:
    """service-10k.yaml for 10,000 GPUs; else gpus/8 nodes in its proportions, written to ``tmp``."""
    if gpus == 10000:
        return CLUSTER_10K
    nodes = gpus // 8
    counts = {"a100": nodes // 5, "v100": 2 * nodes // 5}  # as service-10k.yaml: 250 a100, 500 v100, 500 t4
    counts["t4"] = nodes - sum(counts.values())
    lines = [f"name: service-{gpus}", f'description: "service-10k scaled to {gpus} GPUs"', "nodes:"]
    lines += [f"  - {{gpu_type: {t}, count: {n}, gpus_per_node: 8}}" for t, n in counts.items() if n]
    (path := tmp / f"service-{gpus}.yaml").write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def database_for_run(base: str) -> Iterator[str | None]:
    """None for SQLite (the state's own file); for PostgreSQL a URL into a fresh schema, dropped afterwards
    (as tests/service/conftest.py does), so runs do not see each other."""
    if base == "sqlite":
        yield None
        return
    import sqlalchemy as sa

    schema, admin = f"bench_{os.urandom(6).hex()}", sa.create_engine(base)
    with admin.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{base}{'&' if '?' in base else '?'}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def preload(state: Path, db: str | None, args: argparse.Namespace, workdir: Path) -> tuple[float, list[str]]:
    """User ``bench`` with a token per client, and the queue; the seconds the jobs took to store."""
    rng, env = random.Random(0), {"DLSCHED_DRY_RUN_S": "3600"}
    subs = [JobSubmission(name=f"queued-{i}", command="true", working_dir=str(workdir), gpus=rng.choice(GPU_MIX),
                          env=env) for i in range(args.queued + args.gpus)]
    store = Store.open(state, db)
    try:
        tokens = [store.add_user("bench")] + [store.add_token("bench") for _ in range(args.clients - 1)]
        t0 = time.perf_counter()
        for i in range(0, len(subs), CHUNK):
            store.add_jobs("bench", subs[i:i + CHUNK], time.time())
        return time.perf_counter() - t0, tokens
    finally:
        store.close()


def start_service(state: Path, db: str | None, cluster: Path, policy: str, round_s: float,
                  workdir: Path) -> subprocess.Popen[bytes]:
    """``dlsched serve`` with the dry-run executor, its stderr in STATE-serve.log. Two users (bench, and the
    admin the first start adds) without isolation need --allow-shared-account, or serve refuses the state."""
    cmd = [sys.executable, "-m", "dlsched", "serve", "--state", str(state), "--executor", "dry-run",
           "--cluster", str(cluster), "--policy", policy, "--round-s", f"{round_s:g}", "--min-run-s", "0",
           "--isolation", "none", "--allow-shared-account", "--allow-dir", str(workdir)]
    err = (state.parent / f"{state.name}-serve.log").open("ab")  # a file: a pipe nobody reads would block it
    return subprocess.Popen(cmd + (["--database", db] if db else []), stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True)


def check_alive(state: Path, proc: subprocess.Popen[bytes], deadline: float, what: str) -> None:
    """Failed with the log's tail if the service exited, or if ``deadline`` passed waiting for ``what``."""
    if proc.poll() is not None:
        tail = (state.parent / f"{state.name}-serve.log").read_text(errors="replace").strip().splitlines()[-3:]
        raise Failed(f"the service exited ({proc.returncode}) waiting for {what}: {' | '.join(tail)}")
    if time.monotonic() > deadline:
        raise Failed(f"timed out waiting for {what}")


def wait_for_rounds(state: Path, db: str | None, proc: subprocess.Popen[bytes], rounds: int,
                    deadline: float) -> dict[str, Any]:
    """server.json once /healthz answers and ``rounds`` rounds followed the first (round 0 of a fresh state)."""
    info: dict[str, Any] | None = None
    while info is None:
        check_alive(state, proc, deadline, "the service to answer")
        try:
            got = json.loads((state / "server.json").read_text())
            info = got if httpx.get(got["url"] + "/healthz", timeout=5.0).status_code == 200 else None
        except (OSError, ValueError, httpx.HTTPError):
            pass
        time.sleep(0.2)
    store = Store.open(state, db)
    try:
        while (store.last_round_no() or 0) < rounds:
            check_alive(state, proc, deadline, f"{rounds} rounds")
            time.sleep(0.5)
    finally:
        store.close()
    return info


def submit(url: str, tokens: list[str], n: int, workdir: Path) -> tuple[list[float], list[str], float]:
    """``n`` submissions, one thread per token, as fast as they go: latencies, accepted ids, wall seconds."""
    latencies: list[float] = []
    ids: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[k]}"}, timeout=60.0) as http:
            for i in range(k, n, len(tokens)):
                spec = {"name": f"submit-{i}", "command": "true", "working_dir": str(workdir),
                        "gpus": GPU_MIX[i % len(GPU_MIX)], "env": {"DLSCHED_DRY_RUN_S": "3600"}}
                t0 = time.perf_counter()
                try:
                    r = http.post("/v1/jobs", json=spec)
                except httpx.HTTPError:
                    continue
                with lock:
                    latencies.append(time.perf_counter() - t0)
                    if r.status_code == 201:
                        ids.append(r.json()["id"])

    start = time.perf_counter()
    with ThreadPoolExecutor(len(tokens)) as pool:
        list(pool.map(client, range(len(tokens))))
    return latencies, ids, time.perf_counter() - start


def list_pages(url: str, token: str, pages: int) -> list[float]:
    """``pages`` pages of 100 jobs following X-Next-Cursor (every fifth: user bench's queued jobs)."""
    latencies: list[float] = []
    cursors: dict[bool, str | None] = {False: None, True: None}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60.0) as http:
        while len(latencies) < pages:
            filtered = len(latencies) % 5 == 4
            params: dict[str, Any] = {"limit": 100, **({"status": "queued", "user": "bench"} if filtered else {})}
            if cursors[filtered]:
                params["cursor"] = cursors[filtered]
            t0 = time.perf_counter()
            r = http.get("/v1/jobs", params=params)
            dt = time.perf_counter() - t0
            if r.status_code == 429:
                time.sleep(float(r.headers.get("Retry-After", "1")))
                continue
            r.raise_for_status()
            latencies.append(dt)
            cursors[filtered] = r.headers.get("X-Next-Cursor")
    return latencies


def stop(proc: subprocess.Popen[bytes]) -> float | None:
    """The service's peak resident set in MiB (VmHWM; None if it exited), read before SIGTERM to its process
    group and the wait (SIGKILL after five minutes)."""
    status = Path(f"/proc/{proc.pid}/status")
    lines = status.read_text().splitlines() if proc.poll() is None and status.is_file() else []
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return next((int(x.split()[1]) / 1024 for x in lines if x.startswith("VmHWM:")), None)


def run_policy(policy: str, args: argparse.Namespace, commit: str) -> dict[str, Any]:
    """One policy's figures on a fresh state (and a fresh PostgreSQL schema)."""
    with tempfile.TemporaryDirectory(prefix="dlsched-scale-") as tmp_name, database_for_run(args.database) as db:
        tmp = Path(tmp_name).resolve()
        state = tmp / "state"
        load_s, tokens = preload(state, db, args, tmp)
        proc = start_service(state, db, cluster_file(args.gpus, tmp), policy, args.round_s, tmp)
        try:
            info = wait_for_rounds(state, db, proc, args.rounds, time.monotonic() + args.timeout_s)
            latencies, ids, wall = submit(info["url"], tokens, args.submissions, tmp)
            pages = list_pages(info["url"], info["token"], args.pages)
            check_alive(state, proc, float("inf"), "the end of the phases")
        finally:
            rss = stop(proc)
        store = Store.open(state, db)
        try:
            rounds, held = store.rounds(), {j.id for j in store.jobs_by_id(ids)}
        finally:
            store.close()

    def pct(values: list[float], q: float) -> float | None:
        return float(np.percentile(values, q)) if values else None

    busy = [r["summary"] for r in rounds if r["round_no"] > 0 and r["summary"].get("queued", 0) >= args.queued]
    round_s, policy_s = [s["round_s"] for s in busy], [s["policy_s"] for s in busy]
    first_s = next((r["summary"].get("round_s") for r in rounds if r["round_no"] == 0), None)
    return {"gpus": args.gpus, "queued": args.queued, "policy": policy, "round_p50_s": pct(round_s, 50),
            "round_p99_s": pct(round_s, 99), "rounds": len(busy), "policy_p99_s": pct(policy_s, 99),
            "first_round_s": first_s, "commit": commit, "submit_per_s": len(ids) / wall if wall > 0 else None,
            "p99_submit_s": pct(latencies, 99), "submitted": args.submissions, "accepted": len(ids),
            "lost": len(set(ids) - held), "clients": len(tokens), "list_page_p99_s": pct(pages, 99),
            "peak_rss_mb": rss, "database": "postgresql" if db else "sqlite", "load_s": load_s,
            "preloaded": args.queued + args.gpus}


def main(argv: list[str] | None = None) -> int:
    """Every policy's line; 1 if one could not finish (its ``error:`` line on stderr)."""
    args = parse_args(argv)
    head, changes = (subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
                     for a in (["rev-parse", "--short", "HEAD"], ["status", "--porcelain"]))  # untracked too
    commit, failed = (head or "unknown") + ("-dirty" if changes else ""), False
    for policy in args.policy:
        try:
            print(json.dumps(run_policy(policy, args, commit)), flush=True)
        except (Failed, httpx.HTTPError) as exc:
            print(f"error: {policy}: {exc}", file=sys.stderr, flush=True)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
