"""The service's HTTP API (FastAPI): submit, list, show and cancel jobs, read their logs.

Every route but ``/healthz`` needs ``Authorization: Bearer <token>``; a user sees and cancels only their own
jobs (another user's job is a 404, as if it did not exist), an admin sees all. Every response has a declared
model, so the OpenAPI schema (``/openapi.json``, the page at ``/docs``) describes exactly what is sent and
a client can be generated from it. A submission is answered only once the store has committed it: a 201
means the job survives a crash of the service.

Timestamps in responses are ISO 8601 in UTC; the store keeps Unix seconds.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from dlsched.core import InputError
from dlsched.dashboard.page import docs_html
from dlsched.service.admission_check import command_refusal
from dlsched.service.confine import Confinement
from dlsched.service.errors import database_error, error_response, input_refusal, install_error_handlers
from dlsched.service.limits import RequestLimits
from dlsched.service.logfiles import UnsafeLog, job_logs, open_log, read_chunks, tail_offset
from dlsched.service.records import STATUSES, EventRecord, JobRecord, UserRecord
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store
from dlsched.version import __version__

#: How often a followed log is polled for new lines and the job for its end (seconds).
FOLLOW_POLL_S = 0.5
#: Largest request body (``dlsched serve --max-body-kb``), and requests per second per token.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_RATE_PER_S = 200.0
#: At most this much of a log is read per poll of a followed log.
FOLLOW_MAX_BYTES = 4 * 1024 * 1024
_RANK_LOG = re.compile(r"^rank(\d+)\.log$")
#: The ``/docs`` page may load and fetch nothing but what this service serves (its script is inline).
DOCS_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
            "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: What an ``Idempotency-Key`` may hold (a UUID, a ULID, a hash): 1 to 128 of these characters.
IDEMPOTENCY_KEY = r"^[A-Za-z0-9._:~+/=-]{1,128}$"


class ErrorOut(BaseModel):
    """Every error's shape (docs/service.md, "Errors"): ``error`` one line, ``field`` when one is to blame,
    ``detail`` (FastAPI's: the same line, or on a 422 the list of problems)."""

    error: str
    field: str | None = None
    detail: Any = None


class EventOut(BaseModel):
    time: datetime
    kind: str
    message: str
    data: dict[str, Any]


class JobOut(BaseModel):
    """A job as listed: who, what, where it runs and when it started and ended."""

    id: str
    user: str
    name: str
    status: str
    gpus: int
    gpu_type: str | None
    placement: dict[str, list[int]]
    batch_size: int | None
    submitted: datetime
    started: datetime | None
    finished: datetime | None
    progress: float
    cancel_requested: bool
    message: str | None
    #: Why the job is where it is (Slurm's REASON: Resources, Priority, Quota, Profiling, Held: <why>,
    #: Starting, Stopping; None while it runs, or before its first round); ``reason_detail`` says more.
    reason: str | None = None
    reason_detail: str | None = None
    spec: JobSubmission


class JobDetail(JobOut):
    """A job as shown: its progress counters and its events as well."""

    steps_done: int
    #: The step of the job's last checkpoint (0: none yet): where it resumes after a stop or a crash.
    last_checkpoint_step: int
    restarts: int
    failures: int
    preemptions: int
    incarnation: int
    attained_gpu_s: float
    profiled_types: list[str]
    #: When the job entered the waiting queue (its first profile's end): its latency ratio counts its wait
    #: from there. None before that, and for a job its policy never profiles (its wait counts from submission).
    queue_entered: datetime | None
    events: list[EventOut]


class WhoAmI(BaseModel):
    name: str
    team: str | None
    admin: bool


class AuditOut(BaseModel):
    """One audit record: who (a user, or ``os:<account>`` for a command run on the host) did what to what."""

    time: datetime
    actor: str
    action: str
    target: str | None
    detail: dict[str, Any]


class Health(BaseModel):
    """``status`` ``ok``, or ``degraded`` (answered 503) with the ``cause`` and ``since`` when."""

    status: str
    database: str
    version: str
    #: ``accounts``: jobs run under their own OS accounts; ``none``: as the service (dlsched.service.isolation)
    isolation: str | None = None
    cause: str | None = None
    since: datetime | None = None


class HealthDegraded(Health):
    error: str
    detail: Any = None


def _utc(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def job_out(job: JobRecord) -> JobOut:
    return JobOut(id=job.id, user=job.user, name=job.name, status=job.status, gpus=job.gpus,
                  gpu_type=job.gpu_type, placement=job.placement, batch_size=job.batch_size,
                  submitted=datetime.fromtimestamp(job.submitted_s, UTC), started=_utc(job.started_s),
                  finished=_utc(job.finished_s), progress=job.progress, cancel_requested=job.cancel_requested,
                  message=job.message, reason=job.reason, reason_detail=job.reason_detail, spec=job.submission)


def job_detail(job: JobRecord, events: list[EventRecord]) -> JobDetail:
    return JobDetail(**job_out(job).model_dump(), steps_done=job.steps_done,
                     last_checkpoint_step=job.last_checkpoint_step, restarts=job.restarts,
                     failures=job.failures, preemptions=job.preemptions, incarnation=job.incarnation,
                     attained_gpu_s=job.attained_gpu_s, profiled_types=list(job.profiled_types),
                     queue_entered=_utc(job.queue_entry_s),
                     events=[EventOut(time=datetime.fromtimestamp(e.time_s, UTC), kind=e.kind, message=e.message,
                                      data=e.data) for e in events])


def read_logs(job_dir: Path, rank: int | None, *, tail: int | None = None) -> Iterator[bytes]:
    """Every log of the job, each under its header line (what ``dlsched logs`` prints without ``--follow``),
    streamed in bounded chunks; a log the service may not read (a link, a FIFO) is named, not read."""
    for log in job_logs(job_dir, rank):
        try:
            fd = open_log(job_dir, log.parts)
        except UnsafeLog as exc:
            yield (log.header + f"(not shown: {exc})\n").encode()
            continue
        yield log.header.encode()
        last = b""
        for chunk in read_chunks(fd, tail_offset(fd, tail) if tail else 0, None):
            last = chunk
            yield chunk
        if last and not last.endswith(b"\n"):
            yield b"\n"


_bearer = HTTPBearer(auto_error=False, description="A token from 'dlsched serve user add'.")


def current_user(request: Request,
                 credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> UserRecord:
    """The user whose token the request carries; 401 without a valid one."""
    store: Store = request.app.state.store
    user = store.user_by_token(credentials.credentials) if credentials is not None else None
    if user is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or invalid token",
                            headers={"WWW-Authenticate": "Bearer"})
    return user


def known_query(request: Request) -> None:
    """Refuse a query parameter the route does not declare (422), as the job spec refuses unknown keys: a
    misspelt ``?al=true`` would otherwise be ignored without a word."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    declared: set[str] = set()
    pending = [route.dependant]
    while pending:  # the route's own parameters and its dependencies'
        dependant = pending.pop()
        declared.update(p.alias for p in dependant.query_params)
        pending.extend(dependant.dependencies)
    unknown = [key for key in request.query_params if key not in declared]
    if unknown:
        raise RequestValidationError([{"loc": ("query", key), "msg": "unknown query parameter",
                                       "type": "extra_forbidden", "input": request.query_params[key]}
                                      for key in unknown])


#: A route parameter of this type makes the route need a token (and documents the bearer scheme).
User = Annotated[UserRecord, Depends(current_user)]

_UNAUTHORIZED = {"model": ErrorOut, "description": "No valid bearer token."}
_NOT_FOUND = {"model": ErrorOut, "description": "No such job (or not yours)."}


def refused(error: InputError) -> JSONResponse:
    """A submission refused for what it asks (422), in the shape of a validation error: ``detail`` as
    FastAPI's, ``message`` and ``error`` the one line naming the field, ``field`` the field."""
    return input_refusal(error)


def _json_error(description: str) -> dict[str, Any]:
    """An error answer documented as JSON on a route whose own answer is text (FastAPI would otherwise
    document it in the route's media type)."""
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}


#: The most jobs one page of ``GET /v1/jobs`` holds (and the page a request without ``limit`` gets).
MAX_PAGE = 1000


def create_app(store: Store, *, jobs_dir: Path, cluster_info: Callable[[], dict[str, Any]] | None = None,
               admit: Callable[[JobSubmission], InputError | None] | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, rate_per_s: float = DEFAULT_RATE_PER_S,
               allowed_dirs: Sequence[Path] | None = None, protected_dirs: Sequence[Path] = (),
               state_dir: Path | None = None, isolation: str | None = None) -> FastAPI:
    """The API over ``store``; ``jobs_dir`` holds each job's folder (its logs), ``cluster_info`` answers
    ``GET /v1/cluster`` (the round loop's view of the nodes; empty without one); ``admit`` says why the
    cluster can never hold a submission (refused with 422, nothing stored), None when it can.

    A job's ``working_dir`` must lie under one of ``allowed_dirs`` (None: anywhere; ``dlsched serve`` always
    passes its roots, :mod:`dlsched.service.confine`) and never in ``jobs_dir``, ``protected_dirs`` or
    ``state_dir`` (whose ``uploads/`` is allowed)."""
    app = FastAPI(title="dlsched", version=__version__, docs_url=None, redoc_url=None,
                  dependencies=[Depends(known_query)],
                  description="The dlsched scheduler service: submit training jobs to a shared GPU cluster.")
    app.state.store = store
    install_error_handlers(app)
    protected = [jobs_dir, *protected_dirs, *([state_dir] if state_dir is not None else [])]
    confinement = Confinement.of(allowed_dirs, protected,
                                 [state_dir / "uploads"] if state_dir is not None else [])
    # sizes, rates and the token of a request with a body are checked before its body is read
    app.add_middleware(RequestLimits, max_body_bytes=max_body_bytes, rate_per_s=rate_per_s,
                       burst=max(1.0, 2 * rate_per_s), known_token=lambda t: store.user_by_token(t) is not None)

    def visible_job(job_id: str, user: UserRecord) -> JobRecord:
        job = store.job(job_id)
        if job is None or not (user.admin or job.user == user.name):
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}")
        return job

    @app.get("/healthz", response_model=Health, tags=["service"],
             responses={503: {"model": HealthDegraded, "description": "The database does not answer, or "
                                                                      "cannot write (degraded, with the cause)."}})
    def healthz() -> Any:
        """Liveness and the database: 200 when a query goes through and writes do (a write probe every few
        seconds, at once after a write failed); 503 ``degraded`` with the cause when writes fail (a full
        disk, a read-only file system), 503 ``down`` when the database does not answer at all."""
        try:
            store.ping()
        except Exception as exc:  # noqa: BLE001 - any database failure is a 503, never a crash
            return error_response(503, f"the database does not answer: {database_error(exc)}",
                                  status="down", database=store.dialect, version=__version__,
                                  isolation=isolation)
        failure = store.write_health()
        if failure is not None:
            since, cause = failure
            when = datetime.fromtimestamp(since, UTC)
            return error_response(503, f"degraded: the database cannot write (since {when.isoformat()}): {cause}",
                                  status="degraded", database=store.dialect, version=__version__, cause=cause,
                                  since=when, isolation=isolation)
        return Health(status="ok", database=store.dialect, version=__version__, isolation=isolation)

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        """The API reference, drawn from ``/openapi.json`` by the package's own script (no CDN); the
        Content-Security-Policy lets the page reach nothing but this service."""
        return HTMLResponse(docs_html(), headers={"Content-Security-Policy": DOCS_CSP})

    @app.get("/v1/whoami", response_model=WhoAmI, tags=["users"], responses={401: _UNAUTHORIZED})
    def whoami(user: User) -> WhoAmI:
        return WhoAmI(name=user.name, team=user.team, admin=user.admin)

    @app.post("/v1/jobs", response_model=JobOut, status_code=201, tags=["jobs"],
              responses={200: {"model": JobOut, "description": "The job this Idempotency-Key created before."},
                         400: {"model": ErrorOut, "description": "The body cannot be read (not UTF-8 JSON)."},
                         401: _UNAUTHORIZED})
    def submit(submission: JobSubmission, user: User, response: Response,
               idempotency_key: Annotated[str | None, Header(
                   alias="Idempotency-Key", min_length=1, max_length=128, pattern=IDEMPOTENCY_KEY,
                   description="A key of the client's choosing (a UUID per submission, say): the same key from "
                               "the same user answers the job it created (200) instead of storing another.")
               ] = None) -> Any:
        """Queue a job; answered once it is committed to the database (201; 200 for a repeated key). A job
        the cluster as it stands can never hold, or whose ``working_dir`` is not a folder here, is refused
        (422) and nothing is stored."""
        refusal = (confinement.refusal(submission.working_dir) or command_refusal(submission)
                   or (admit(submission) if admit is not None else None))
        if refusal is not None:
            return refused(refusal)
        submission = submission.model_copy(update={"working_dir": os.path.realpath(submission.working_dir)})
        try:
            job, created = store.submit_job(user.name, submission, time.time(), idempotency_key)
        except InputError as exc:  # an Idempotency-Key sent again with another spec (``detail``: the line)
            return error_response(422, str(exc), field=exc.field, message=str(exc))
        if not created:
            response.status_code = status.HTTP_200_OK
        return job_out(job)

    @app.get("/v1/jobs", response_model=list[JobOut], tags=["jobs"],
             responses={401: _UNAUTHORIZED, 403: _json_error("A user asked for another user's jobs."),
                        422: _json_error("A filter out of its range.")})
    def list_jobs(request: Request, response: Response, user: User,
                  all: Annotated[bool, Query(description="Finished jobs too.")] = False,  # noqa: A002
                  status_: Annotated[list[str] | None, Query(alias="status", description="Only jobs in these "
                                                             "statuses (repeatable).")] = None,
                  owner: Annotated[str | None, Query(alias="user", max_length=64,
                                                     description="Only this user's jobs (an admin's filter).")] = None,
                  since: Annotated[datetime | None, Query(description="Only jobs submitted at or after this "
                                                          "time (ISO 8601).")] = None,
                  limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Jobs per page.")] = MAX_PAGE,
                  cursor: Annotated[str | None, Query(max_length=20, pattern=r"^[0-9]+$", description="The "
                                                      "X-Next-Cursor of the page before.")] = None,
                  ) -> Any:
        """Your jobs (an admin: everyone's), unfinished ones unless ``all`` or ``status``, in submission order,
        a page at a time: when more follow, the ``X-Next-Cursor`` header (and ``Link: <...>; rel="next"``)
        says where the next page starts."""
        for value in status_ or ():
            if value not in STATUSES:
                raise InputError(f"must be one of {', '.join(STATUSES)}, got {value!r}", field="status")
        if owner is not None and not user.admin and owner != user.name:
            return error_response(403, "only an admin lists other users' jobs", field="user")
        jobs, nxt = store.jobs_page(user=owner if user.admin else user.name, statuses=status_,
                                    include_finished=all, since_s=None if since is None else since.timestamp(),
                                    after=int(cursor or 0), limit=limit)
        if nxt is not None:
            response.headers["X-Next-Cursor"] = str(nxt)
            response.headers["Link"] = f'<{request.url.include_query_params(cursor=str(nxt))}>; rel="next"'
        return [job_out(j) for j in jobs]

    @app.get("/v1/jobs/{job_id}", response_model=JobDetail, tags=["jobs"],
             responses={401: _UNAUTHORIZED, 404: _NOT_FOUND})
    def show_job(job_id: str, user: User) -> JobDetail:
        job = visible_job(job_id, user)
        return job_detail(job, store.events(job.id))

    @app.post("/v1/jobs/{job_id}/cancel", response_model=JobOut, tags=["jobs"],
              responses={401: _UNAUTHORIZED, 404: _NOT_FOUND})
    def cancel_job(job_id: str, user: User) -> JobOut:
        """Cancel a job: a queued one at once, a running one at the next round (its workers are stopped)."""
        job = visible_job(job_id, user)
        try:
            return job_out(store.request_cancel(job.id, time.time(), actor=user.name))
        except KeyError:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}") from None

    @app.get("/v1/jobs/{job_id}/logs", response_class=PlainTextResponse, tags=["jobs"],
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Each rank's log under a '==> rank<r> <==' header."},
                        401: _json_error("No valid bearer token."),
                        404: _json_error("No such job (or not yours), or a rank it never has."),
                        409: _json_error("The log asked for is not a regular file the service may read.")})
    def job_logs_route(job_id: str, user: User,
                       follow: Annotated[bool, Query(description="Stream new lines until the job ends.")] = False,
                       rank: Annotated[int | None, Query(ge=0, le=65535, description="Only this rank's log.")] = None,
                       tail: Annotated[int | None, Query(ge=1, le=1_000_000,
                                                         description="Only the last N lines of each log.")] = None,
                       offset: Annotated[int | None, Query(ge=0, le=2**62, description="With rank: from this "
                                                           "byte of the log on.")] = None,
                       limit: Annotated[int | None, Query(ge=1, le=2**62, description="With rank: at most "
                                                          "this many bytes.")] = None,
                       ) -> Any:
        job = visible_job(job_id, user)
        job_dir = jobs_dir / job.id
        most = job.submission.gpu_bounds()[1]
        if rank is not None and rank >= most:  # one rank per GPU: no incarnation of the job ever had it
            return error_response(404, f"job {job.id} has no rank {rank} (it runs at most {most} ranks)",
                                  field="rank")
        if offset is not None or limit is not None:  # a byte range of one rank's log
            if rank is None:
                raise InputError("offset and limit need rank", field="rank")
            try:
                fd = open_log(job_dir, ("logs", f"rank{rank}.log"))
            except UnsafeLog as exc:
                if exc.missing:
                    return PlainTextResponse("")
                return error_response(409, str(exc), field="rank")
            return StreamingResponse(read_chunks(fd, offset or 0, limit), media_type="text/plain; charset=utf-8")
        if rank is not None:  # one rank asked for by name: a planted name is an error, at once
            try:
                os.close(open_log(job_dir, ("logs", f"rank{rank}.log")))
            except UnsafeLog as exc:
                if not exc.missing:
                    return error_response(409, str(exc), field="rank")
        if not follow:
            return StreamingResponse(read_logs(job_dir, rank, tail=tail), media_type="text/plain; charset=utf-8")
        return StreamingResponse(_follow(store, job.id, job_dir, rank), media_type="text/plain; charset=utf-8")

    @app.get("/v1/jobs/{job_id}/explain", response_model=list[dict[str, Any]], tags=["jobs"],
             responses={401: _UNAUTHORIZED, 404: _NOT_FOUND})
    def explain_job(job_id: str, user: User,
                    round: Annotated[int | None, Query(ge=0, le=2**31 - 1,  # noqa: A002
                                                       description="Only this round's records.")] = None,
                    ) -> list[dict[str, Any]]:
        """Why the scheduler decided what it did for the job: one record per round and stage (round, time_s,
        job, stage, decided, summary, facts; docs/service.md, "Explanations"), newest rounds last."""
        job = visible_job(job_id, user)
        return store.explanations(job.id, round)

    @app.get("/v1/audit", response_model=list[AuditOut], tags=["service"],
             responses={401: _UNAUTHORIZED, 403: {"model": ErrorOut, "description": "Not an admin."}})
    def audit(user: User,
              since: Annotated[datetime | None, Query(description="Only records from this time on.")] = None,
              actor: Annotated[str | None, Query(max_length=80, description="Only what this user did.")] = None,
              limit: Annotated[int, Query(ge=1, le=10_000, description="At most the last this many.")] = 1000,
              ) -> list[AuditOut]:
        """Who did what, and when (admins only): submissions, cancels, quotas, users, tokens, reconfigurations;
        oldest first."""
        if not user.admin:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "the audit trail is for admins")
        rows = store.audit(since_s=None if since is None else since.timestamp(), actor=actor, limit=limit)
        return [AuditOut(time=datetime.fromtimestamp(r["time_s"], UTC), actor=r["actor"], action=r["action"],
                         target=r["target"], detail=r["detail"]) for r in rows]

    @app.get("/v1/cluster", response_model=dict[str, Any], tags=["service"], responses={401: _UNAUTHORIZED})
    def cluster(user: User) -> dict[str, Any]:
        """The cluster as the round loop sees it (nodes, GPUs, who holds them: each node's ``holders``, one
        list of job ids per GPU, another user's job as ``other``); empty before the first round."""
        from dlsched.service.cluster_view import cluster_with_holders

        return cluster_with_holders(store, cluster_info() if cluster_info is not None else {}, user)

    return app


async def _follow(store: Store, job_id: str, job_dir: Path, rank: int | None) -> AsyncIterator[str]:
    """New log text as it is written, a header whenever the log changes, until the job has ended and its
    logs are read to the end (read as :func:`read_logs` reads them: no link followed, bounded chunks)."""
    offsets: dict[tuple[str, ...], int] = {}
    last: tuple[str, ...] | None = None
    while True:
        job = await asyncio.to_thread(store.job, job_id)
        ended = job is None or job.finished
        for log in await asyncio.to_thread(job_logs, job_dir, rank):
            data = await asyncio.to_thread(_read_from, job_dir, log.parts, offsets.get(log.parts, 0), ended)
            if not data:
                continue
            offsets[log.parts] = offsets.get(log.parts, 0) + len(data)
            if log.parts != last:
                yield ("\n" if last is not None else "") + log.header
                last = log.parts
            yield data.decode("utf-8", errors="replace")
        if ended:
            return
        await asyncio.sleep(FOLLOW_POLL_S)


def _read_from(job_dir: Path, parts: tuple[str, ...], offset: int, whole: bool) -> bytes:
    """What was appended to a log since ``offset`` (at most :data:`FOLLOW_MAX_BYTES`): up to its last
    complete line while the job runs (a multi-byte character is never split), all once ``whole``; nothing
    from a file the service may not read."""
    try:
        fd = open_log(job_dir, parts)
    except UnsafeLog:
        return b""
    data = b"".join(read_chunks(fd, offset, FOLLOW_MAX_BYTES))
    if whole:
        return data
    cut = data.rfind(b"\n")
    return data[:cut + 1] if cut >= 0 else b""
