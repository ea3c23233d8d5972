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
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError

from dlsched.service.records import EventRecord, JobRecord, UserRecord
from dlsched.service.spec import JobSubmission, describe_error
from dlsched.service.store import Store
from dlsched.version import __version__

#: How often a followed log is polled for new lines and the job for its end (seconds).
FOLLOW_POLL_S = 0.5
_RANK_LOG = re.compile(r"^rank(\d+)\.log$")


class ErrorOut(BaseModel):
    detail: str


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


class Health(BaseModel):
    status: str
    database: str
    version: str


def _utc(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def job_out(job: JobRecord) -> JobOut:
    return JobOut(id=job.id, user=job.user, name=job.name, status=job.status, gpus=job.gpus,
                  gpu_type=job.gpu_type, placement=job.placement, batch_size=job.batch_size,
                  submitted=datetime.fromtimestamp(job.submitted_s, UTC), started=_utc(job.started_s),
                  finished=_utc(job.finished_s), progress=job.progress, cancel_requested=job.cancel_requested,
                  message=job.message, spec=job.submission)


def job_detail(job: JobRecord, events: list[EventRecord]) -> JobDetail:
    return JobDetail(**job_out(job).model_dump(), steps_done=job.steps_done,
                     last_checkpoint_step=job.last_checkpoint_step, restarts=job.restarts,
                     failures=job.failures, preemptions=job.preemptions, incarnation=job.incarnation,
                     attained_gpu_s=job.attained_gpu_s, profiled_types=list(job.profiled_types),
                     queue_entered=_utc(job.queue_entry_s),
                     events=[EventOut(time=datetime.fromtimestamp(e.time_s, UTC), kind=e.kind, message=e.message,
                                      data=e.data) for e in events])


def rank_logs(job_dir: Path, rank: int | None) -> list[tuple[int, Path]]:
    """The job's log files ``logs/rank<r>.log`` as (rank, path), by rank; only ``rank`` when given."""
    folder = job_dir / "logs"
    found = []
    if folder.is_dir():
        for path in folder.iterdir():
            match = _RANK_LOG.match(path.name)
            if match and (rank is None or int(match.group(1)) == rank):
                found.append((int(match.group(1)), path))
    return sorted(found)


def _header(rank: int) -> str:
    return f"==> rank{rank} <==\n"


def read_logs(job_dir: Path, rank: int | None) -> str:
    """Every rank's log, each under a header line (what ``dlsched logs`` prints without ``--follow``)."""
    parts = []
    for r, path in rank_logs(job_dir, rank):
        text = path.read_bytes().decode("utf-8", errors="replace")
        parts.append(_header(r) + text + ("" if not text or text.endswith("\n") else "\n"))
    return "".join(parts)


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


def _json_error(description: str) -> dict[str, Any]:
    """An error answer documented as JSON on a route whose own answer is text (FastAPI would otherwise
    document it in the route's media type)."""
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}


def create_app(store: Store, *, jobs_dir: Path, cluster_info: Callable[[], dict[str, Any]] | None = None) -> FastAPI:
    """The API over ``store``; ``jobs_dir`` holds each job's folder (its logs), ``cluster_info`` answers
    ``GET /v1/cluster`` (the round loop's view of the nodes; empty without one)."""
    app = FastAPI(title="dlsched", version=__version__, docs_url="/docs", redoc_url=None,
                  dependencies=[Depends(known_query)],
                  description="The dlsched scheduler service: submit training jobs to a shared GPU cluster.")
    app.state.store = store

    def visible_job(job_id: str, user: UserRecord) -> JobRecord:
        job = store.job(job_id)
        if job is None or not (user.admin or job.user == user.name):
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}")
        return job

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's 422 body, plus ``message``: the first problem in one line naming the field."""
        errors = exc.errors()
        message = "invalid request"
        if errors:
            first = errors[0]
            loc = [str(p) for p in first.get("loc", ()) if p != "body"]
            try:  # re-validate the body alone to phrase it as the CLI does
                if first.get("loc", ("",))[0] == "body":
                    body = await request.json()
                    JobSubmission.model_validate(body)
            except ValidationError as verr:
                field, text = describe_error(verr)
                message = f"field '{field}': {text}"
            except Exception:  # noqa: BLE001 - a body that is not JSON at all
                message = f"{'.'.join(loc) or 'body'}: {first.get('msg', 'invalid')}"
            else:
                message = f"{'.'.join(loc) or 'request'}: {first.get('msg', 'invalid')}"
        detail = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                  for e in errors]
        return JSONResponse(status_code=422, content=jsonable_encoder({"detail": detail, "message": message}))

    @app.get("/healthz", response_model=Health, tags=["service"],
             responses={503: {"model": ErrorOut, "description": "The database does not answer."}})
    def healthz() -> Any:
        """Liveness and the database: 200 when a query goes through."""
        try:
            store.ping()
        except Exception as exc:  # noqa: BLE001 - any database failure is a 503, never a crash
            return JSONResponse(status_code=503, content={"detail": f"database: {type(exc).__name__}"})
        return Health(status="ok", database=store.dialect, version=__version__)

    @app.get("/v1/whoami", response_model=WhoAmI, tags=["users"], responses={401: _UNAUTHORIZED})
    def whoami(user: User) -> WhoAmI:
        return WhoAmI(name=user.name, team=user.team, admin=user.admin)

    @app.post("/v1/jobs", response_model=JobOut, status_code=201, tags=["jobs"],
              responses={400: {"model": ErrorOut, "description": "The body cannot be read (not UTF-8 JSON)."},
                         401: _UNAUTHORIZED})
    def submit(submission: JobSubmission, user: User) -> JobOut:
        """Queue a job; answered once it is committed to the database."""
        return job_out(store.add_job(user.name, submission, time.time()))

    @app.get("/v1/jobs", response_model=list[JobOut], tags=["jobs"], responses={401: _UNAUTHORIZED})
    def list_jobs(user: User, all: Annotated[bool, Query(description="Finished jobs too.")] = False) -> list[JobOut]:
        """Your jobs (an admin: everyone's), unfinished ones unless ``all``."""
        jobs = store.jobs(user=None if user.admin else user.name, include_finished=all)
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
            return job_out(store.request_cancel(job.id, time.time()))
        except KeyError:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}") from None

    @app.get("/v1/jobs/{job_id}/logs", response_class=PlainTextResponse, tags=["jobs"],
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Each rank's log under a '==> rank<r> <==' header."},
                        401: _json_error("No valid bearer token."),
                        404: _json_error("No such job (or not yours).")})
    def job_logs(job_id: str, user: User,
                 follow: Annotated[bool, Query(description="Stream new lines until the job ends.")] = False,
                 rank: Annotated[int | None, Query(ge=0, le=65535, description="Only this rank's log.")] = None,
                 ) -> Any:
        job = visible_job(job_id, user)
        job_dir = jobs_dir / job.id
        if not follow:
            return PlainTextResponse(read_logs(job_dir, rank))
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

    @app.get("/v1/cluster", response_model=dict[str, Any], tags=["service"], responses={401: _UNAUTHORIZED})
    def cluster(user: User) -> dict[str, Any]:
        """The cluster as the round loop sees it (nodes, GPUs, who holds them); empty before the first round."""
        return cluster_info() if cluster_info is not None else {}

    return app


async def _follow(store: Store, job_id: str, job_dir: Path, rank: int | None) -> AsyncIterator[str]:
    """New log text as it is written, a header whenever the rank changes, until the job has ended and its
    logs are read to the end."""
    offsets: dict[int, int] = {}
    last_rank: int | None = None
    while True:
        job = await asyncio.to_thread(store.job, job_id)
        ended = job is None or job.finished
        for r, path in await asyncio.to_thread(rank_logs, job_dir, rank):
            data = await asyncio.to_thread(_read_from, path, offsets.get(r, 0), ended)
            if not data:
                continue
            offsets[r] = offsets.get(r, 0) + len(data)
            if r != last_rank:
                yield ("\n" if last_rank is not None else "") + _header(r)
                last_rank = r
            yield data.decode("utf-8", errors="replace")
        if ended:
            return
        await asyncio.sleep(FOLLOW_POLL_S)


def _read_from(path: Path, offset: int, whole: bool) -> bytes:
    """What was appended to ``path`` since ``offset``: up to the last complete line while the job runs (a
    line being written is read when it is whole, so a multi-byte character is never split), all once
    ``whole``."""
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    if whole:
        return data
    cut = data.rfind(b"\n")
    return data[:cut + 1] if cut >= 0 else b""
