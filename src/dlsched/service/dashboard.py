"""The dashboard of ``dlsched serve``: the page at ``/`` and the JSON it polls under ``/ui/v1``.

The page is the same one ``dlsched report`` writes (:mod:`dlsched.dashboard`); here its snapshot is built
from the store and the round loop's view of the nodes on every poll. The routes need a token like the API:
``/?token=TOKEN`` hands it to the page once (kept in the browser's localStorage, then taken out of the
address bar), after which the page sends it as a bearer token. A user who is not an admin sees other
users' jobs on the GPUs and in the queue only as ``other``, as the API hides them. The routes are left out
of the OpenAPI schema: they serve the page, not clients.

The queue's rank is the order in which the service's view hands waiting jobs to the policy (submission
order); the explanations of the ordering stage, shown on each job's page, give the policy's own key.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, status
from fastapi.responses import HTMLResponse

from dlsched.dashboard import goodput_series, merge_timeline, page_html
from dlsched.service.api import User
from dlsched.service.records import JobRecord, UserRecord
from dlsched.service.store import Store

#: How many of the latest rounds the timeline draws (older allocations drop off the left edge).
TIMELINE_ROUNDS = 2000
OTHER = "other"


def _visible(job: JobRecord, viewer: UserRecord) -> bool:
    return viewer.admin or job.user == viewer.name


def _wait_s(job: JobRecord, now_s: float) -> float:
    """Time since submission not spent running, as the round loop's view counts it."""
    end = job.finished_s if job.finished_s is not None else now_s
    return max(0.0, end - job.submitted_s - job.attained_service_s)


def _latency_ratio(job: JobRecord, now_s: float) -> float | None:
    """Hops's latency ratio, wait / run: the time the job waited over the time it ran so far (0: it never
    waited), the same definition as the report page's column and the simulator's metrics; unknown (None)
    before it has run at all."""
    if job.attained_service_s <= 0:
        return None
    return _wait_s(job, now_s) / job.attained_service_s


def job_row(job: JobRecord, now_s: float, rank: int | None) -> dict[str, Any]:
    """A job as the snapshot lists it."""
    return {"id": job.id, "name": job.name, "user": job.user, "status": job.status, "gpus": job.gpus,
            "gpu_type": job.gpu_type, "gpus_requested": job.submission.to_job_spec(job.id, 0.0, job.user).num_gpus,
            "priority": job.submission.priority, "wait_s": _wait_s(job, now_s),
            "latency_ratio": _latency_ratio(job, now_s), "rank": rank, "restarts": job.restarts,
            "reason": job.reason, "reason_detail": job.reason_detail}


def snapshot(store: Store, cluster: dict[str, Any], viewer: UserRecord, now_s: float | None = None) -> dict[str, Any]:
    """The dashboard's data for ``viewer`` (see :mod:`dlsched.dashboard` for its shape)."""
    now = time.time() if now_s is None else now_s
    jobs = store.jobs(include_finished=False)
    shown = {j.id: (j.id if _visible(j, viewer) else OTHER) for j in jobs}
    waiting = sorted((j for j in jobs if j.status in ("queued", "held")),
                     key=lambda j: (j.status == "held", j.submitted_s, j.id))
    ranks = {j.id: i + 1 for i, j in enumerate(waiting)}
    node_types = {n["name"]: n.get("gpu_type", "") for n in cluster.get("nodes", [])}
    nodes = [{"name": n["name"], "gpu_type": n.get("gpu_type", ""), "gpus": [[] for _ in range(int(n["gpus"]))]}
             for n in cluster.get("nodes", [])]
    by_name = {n["name"]: n for n in nodes}
    for job in jobs:
        for node, local in job.placement.items():
            for g in local:
                if node in by_name and 0 <= g < len(by_name[node]["gpus"]):
                    by_name[node]["gpus"][g].append(shown[job.id])
    rounds = store.recent_rounds(TIMELINE_ROUNDS)
    t0 = rounds[0]["time_s"] if rounds else now
    timeline = merge_timeline(((r["time_s"] - t0, _holdings(r["decision"], node_types)) for r in rounds), now - t0)
    if not viewer.admin:  # a user's own jobs, finished ones too
        own = {j.id for j in store.jobs(user=viewer.name)}
        timeline = [s for s in timeline if s["job"] in own]
    return {"title": f"dlsched · {cluster.get('name', 'service')} · {cluster.get('policy', '')}",
            "source": "service", "live": True, "time_s": now - t0, "round": cluster.get("round"),
            "nodes": nodes,
            "jobs": [job_row(j, now, ranks.get(j.id)) for j in jobs if _visible(j, viewer)],
            "rank_note": "rank: the order in which waiting jobs reach the policy (submission order)",
            "timeline": {"end_s": now - t0, "segments": timeline}, "usage": usage(store, jobs, viewer)}


def _holdings(decision: dict[str, Any], node_types: dict[str, str]) -> dict[str, tuple[int, str]]:
    """A round's decision as {job: (GPUs, type)} (allocations and profiling alike)."""
    held: dict[str, tuple[int, str]] = {}
    places = [(k, a.get("placement", {})) for k, a in decision.get("allocations", {}).items()]
    places += list(decision.get("profiles", {}).items())
    for job, placement in places:
        gpus = sum(len(v) for v in placement.values())
        types = sorted({node_types.get(n, "?") for n in placement})
        if gpus:
            held[job] = (gpus, "+".join(types))
    return held


def usage(store: Store, jobs: list[JobRecord], viewer: UserRecord | None = None) -> list[dict[str, Any]]:
    """GPUs each user and team holds now, beside its quota (None: no quota set). A viewer who is not an
    admin sees only their own row and their team's (the team's GPUs counted whoever holds them): the names
    of other users and teams are not theirs to see."""
    users = {u.name: u for u in store.users()}
    quotas: dict[tuple[str, str], int] = {(q.kind, q.name): q.gpus for q in store.quotas()}
    held: dict[tuple[str, str], int] = {}
    for name, user in users.items():
        if not user.admin or any(j.user == name for j in jobs):
            held.setdefault(("user", name), 0)
        if user.team:
            held.setdefault(("team", user.team), 0)
    for job in jobs:
        held[("user", job.user)] = held.get(("user", job.user), 0) + job.gpus
        team = users[job.user].team if job.user in users else None
        if team:
            held[("team", team)] = held.get(("team", team), 0) + job.gpus
    for key in quotas:
        held.setdefault(key, 0)
    if viewer is not None and not viewer.admin:
        mine = {("user", viewer.name)} | ({("team", viewer.team)} if viewer.team else set())
        held = {key: gpus for key, gpus in held.items() if key in mine}
        held.setdefault(("user", viewer.name), 0)
    return [{"kind": kind, "name": name, "gpus": gpus, "quota": quotas.get((kind, name))}
            for (kind, name), gpus in sorted(held.items())]


def job_detail(store: Store, job: JobRecord, now_s: float | None = None) -> dict[str, Any]:
    """One job's page: the snapshot's row, its series from the reports and the facts the store keeps."""
    now = time.time() if now_s is None else now_s
    rank = None
    if job.status == "queued":
        waiting = sorted((j for j in store.jobs(include_finished=False) if j.status == "queued"),
                         key=lambda j: (j.submitted_s, j.id))
        rank = next(i + 1 for i, j in enumerate(waiting) if j.id == job.id)
    placement = ", ".join(f"{n} x{len(g)}" for n, g in job.placement.items()) or "none"
    facts = [("submitted", datetime.fromtimestamp(job.submitted_s, UTC).isoformat(timespec="seconds")),
             ("placement", placement), ("batch size", job.batch_size if job.batch_size is not None else "—"),
             ("steps done", job.steps_done), ("last checkpoint step", job.last_checkpoint_step),
             ("progress", f"{100 * job.progress:.1f}%"), ("GPU time", f"{job.attained_gpu_s:.0f} GPU-s"),
             ("failures", job.failures), ("preemptions", job.preemptions)]
    if job.queue_entry_s is not None:
        facts.append(("entered waiting queue", datetime.fromtimestamp(job.queue_entry_s, UTC)
                      .isoformat(timespec="seconds")))
    if job.message:
        facts.append(("message", job.message))
    return {"job": job_row(job, now, rank), "facts": [[k, str(v)] for k, v in facts],
            "series": goodput_series(store.telemetry(job.id), job.submitted_s),
            "series_note": "time in seconds since submission; goodput needs the job's gradient statistics"}


def add_dashboard(app: FastAPI, store: Store, cluster_info: Callable[[], dict[str, Any]]) -> None:
    """Serve the dashboard at ``/`` and its data under ``/ui/v1`` on ``app``."""
    page = page_html()

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(token: Annotated[str | None, Query(description="A token, handed to the page once.")] = None) -> str:
        return page

    @app.get("/ui/v1/snapshot", include_in_schema=False)
    def ui_snapshot(user: User) -> dict[str, Any]:
        return snapshot(store, cluster_info(), user)

    @app.get("/ui/v1/jobs/{job_id}", include_in_schema=False)
    def ui_job(job_id: str, user: User) -> dict[str, Any]:
        job = store.job(job_id)
        if job is None or not _visible(job, user):
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}")
        return job_detail(store, job)
