"""The Python client of ``dlsched serve``: what the ``dlsched submit|jobs|show|cancel|logs|explain`` commands use.

::

    import dlsched
    client = dlsched.Client()                      # DLSCHED_SERVER and DLSCHED_TOKEN, as the CLI
    job = client.submit("examples/resnet.yaml")    # or a dict: the job spec (docs/job-spec.md)
    done = client.wait(job.id, timeout_s=3600)
    print(done.status, done.steps_done, client.logs(job.id, tail=20))

Answers are typed (:class:`Job`, :class:`JobDetail`, :class:`WhoAmI`, :class:`Cluster`): pydantic models
mirroring the API's ``JobOut``/``JobDetail`` (a test keeps the two field for field). Every failure (no server,
a refused token, an unknown job, a refused spec, a wait that timed out) is one :class:`ServiceError`, with the
HTTP status (None when there was no answer) and the server's own message, so a caller catches one type.

A submission is sent with an ``Idempotency-Key`` (a fresh UUID unless given) and, when the service does not
answer (connection refused or lost, a 5xx), is tried again with the same key for up to 60 s
(``DLSCHED_SUBMIT_RETRY_S``): the service stores it once whatever happened to the answers.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from dlsched.core import InputError
from dlsched.service.spec import JobSubmission

#: Seconds a plain request may take; a followed log has no read limit.
TIMEOUT_S = 30.0
#: How long :meth:`Client.submit` keeps retrying a submission the service did not answer, with the same
#: Idempotency-Key each time; ``DLSCHED_SUBMIT_RETRY_S`` overrides it.
SUBMIT_RETRY_S = 60.0
#: A job's statuses once it has ended (it never changes again).
FINISHED_STATUSES = ("succeeded", "failed", "cancelled")

log = logging.getLogger("dlsched.client")


class ServiceError(InputError):
    """A request the service refused or did not answer. ``status`` is the HTTP status (None: no answer, or a
    problem found before sending), ``detail`` the server's own message. It is an :class:`~dlsched.InputError`,
    so the CLI prints it as its one ``error:`` line."""

    def __init__(self, message: str, *, status: int | None = None, detail: str | None = None,
                 field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.status = status
        self.detail = detail if detail is not None else message


    @classmethod
    def from_input(cls, exc: InputError) -> ServiceError:
        """A spec's problem found here, before anything was sent (the same line, no status)."""
        error = cls(str(exc))
        error.source, error.line, error.field = exc.source, exc.line, exc.field
        return error


class WaitTimeout(ServiceError, TimeoutError):
    """:meth:`Client.wait` ran out of time before the job ended (the job itself goes on)."""


class _Answer(BaseModel):
    """An answer of the API: its fields typed, the JSON as it came kept in :attr:`raw` (new fields a newer
    service adds are kept too)."""

    model_config = ConfigDict(extra="allow")
    _raw: Any = PrivateAttr(default=None)

    @property
    def raw(self) -> Any:
        """The answer's JSON exactly as the service sent it."""
        return self._raw

    @classmethod
    def of(cls, data: Any) -> Any:
        try:
            value = cls.model_validate(data)
        except ValidationError as exc:
            raise ServiceError(f"the service's answer is not a {cls.__name__} as this client knows it: "
                               f"{' '.join(str(exc).split())[:300]}") from None
        value._raw = data
        return value


class Event(_Answer):
    """One thing that happened to a job (submitted, started, moved, checkpointed, ended, ...)."""

    time: datetime
    kind: str
    message: str
    data: dict[str, Any]


class Job(_Answer):
    """A job as listed (the API's ``JobOut``): who, what, where it runs, when it started and ended."""

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
    reason: str | None = None
    reason_detail: str | None = None
    spec: JobSubmission

    @property
    def ended(self) -> bool:
        """Whether the job has ended (succeeded, failed or cancelled)."""
        return self.status in FINISHED_STATUSES


class JobDetail(Job):
    """A job as shown (the API's ``JobDetail``): its progress counters and events as well."""

    steps_done: int
    last_checkpoint_step: int
    restarts: int
    failures: int
    preemptions: int
    incarnation: int
    attained_gpu_s: float
    profiled_types: list[str]
    queue_entered: datetime | None
    events: list[Event]


class WhoAmI(_Answer):
    """The user a token belongs to."""

    name: str
    team: str | None
    admin: bool


class Node(_Answer):
    """One node of the service's cluster; ``holders[g]`` names the jobs on its GPU ``g`` (another user's job
    as ``other``, unless you are an admin)."""

    name: str
    gpu_type: str
    gpus: int
    holders: list[list[str]] = []


class Cluster(_Answer):
    """The cluster as the service's round loop sees it (empty before its first round)."""

    name: str | None = None
    policy: str | None = None
    round: int | None = None
    nodes: list[Node] = []


class Client:
    """A user of one ``dlsched serve``: ``server`` (``http://HOST:PORT``) and ``token`` default to
    ``DLSCHED_SERVER`` and ``DLSCHED_TOKEN``, as for the CLI. ``on_retry`` hears, once per request, that a
    request is being tried again (the CLI prints it; by default it is logged)."""

    def __init__(self, server: str | None = None, token: str | None = None, *,
                 on_retry: Callable[[str], None] | None = None) -> None:
        from dlsched.service.extra import CLIENT_MODULES, require

        try:
            require(CLIENT_MODULES)
        except InputError as exc:
            raise ServiceError(str(exc)) from None
        server = server or os.environ.get("DLSCHED_SERVER")
        token = token or os.environ.get("DLSCHED_TOKEN")
        if not server:
            raise ServiceError("no service named: set DLSCHED_SERVER or give --server http://HOST:PORT",
                               field="server")
        if not token:
            raise ServiceError("no token: set DLSCHED_TOKEN or give --token", field="token")
        if not server.startswith(("http://", "https://")):
            server = f"http://{server}"
        self.server = server.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.on_retry = on_retry or log.warning

    # what a user asks

    def submit(self, spec: dict[str, Any] | str | Path, idempotency_key: str | None = None, *,
               retry_s: float | None = None) -> Job:
        """Queue a job. ``spec`` is the job spec as a mapping, or the path of its YAML file (checked here
        first, ``working_dir`` made absolute relative to the file's folder). Retried for ``retry_s``
        (default ``DLSCHED_SUBMIT_RETRY_S`` or 60 s) with one Idempotency-Key, so it is stored once."""
        from dlsched.service.spec import parse_submission
        from dlsched.service.spec_file import load_spec

        try:
            if isinstance(spec, str | Path):
                body = load_spec(Path(spec))
            else:
                body = parse_submission(spec).model_dump(mode="json", exclude_none=True)
        except InputError as exc:
            raise ServiceError.from_input(exc) from None
        key = idempotency_key or str(uuid.uuid4())
        wait_s = submit_retry_s() if retry_s is None else retry_s
        return Job.of(self.request("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key}, retry_s=wait_s))

    def jobs(self, all: bool = False, *, status: Sequence[str] = (), user: str | None = None,  # noqa: A002
             since: str | None = None) -> list[Job]:
        """Your jobs (an admin's: everyone's, or ``user``'s), unfinished ones unless ``all`` or ``status``,
        submitted at or after ``since`` (ISO 8601) when given; every page of them."""
        params: dict[str, Any] = {"all": str(all).lower(), "status": list(status)}
        params.update({k: v for k, v in (("user", user), ("since", since)) if v is not None})
        out: list[Job] = []
        while True:
            rows, cursor = self.page("/v1/jobs", params)
            out.extend(Job.of(row) for row in rows)
            if cursor is None:
                return out
            params["cursor"] = cursor

    def page(self, path: str, params: dict[str, Any]) -> tuple[Any, str | None]:
        """One page of a listing, and the cursor of the next (None: the last page)."""
        found: dict[str, str | None] = {}
        rows = self.request("GET", path, params=params, _headers_out=found)
        return rows, found.get("x-next-cursor")

    def show(self, job_id: str) -> JobDetail:
        """One job with its counters and events."""
        return JobDetail.of(self.request("GET", f"/v1/jobs/{quote(job_id, safe='')}"))

    def cancel(self, job_id: str) -> Job:
        """Cancel a job: a queued one at once, a running one at the next round (``cancel_requested``)."""
        return Job.of(self.request("POST", f"/v1/jobs/{quote(job_id, safe='')}/cancel"))

    def logs(self, job_id: str, tail: int | None = None, rank: int | None = None) -> str:
        """The job's logs as they are now, each rank's under a ``==> rank<r> <==`` header."""
        return "".join(self.stream_logs(job_id, tail=tail, rank=rank))

    def stream_logs(self, job_id: str, *, follow: bool = False, tail: int | None = None,
                    rank: int | None = None) -> Iterator[str]:
        """The job's logs as text chunks as they arrive; with ``follow``, until the job has ended."""
        params: dict[str, Any] = {"follow": str(follow).lower()}
        if rank is not None:
            params["rank"] = rank
        if tail is not None:
            params["tail"] = tail
        return self.stream(f"/v1/jobs/{quote(job_id, safe='')}/logs", params)

    def explain(self, job_id: str, round: int | None = None) -> list[dict[str, Any]]:  # noqa: A002
        """Why the scheduler decided what it did for the job: one record per round and stage (round, time_s,
        job, stage, decided, summary, facts), as :func:`dlsched.explain.explain` returns a simulation's."""
        params = {} if round is None else {"round": round}
        return list(self.request("GET", f"/v1/jobs/{quote(job_id, safe='')}/explain", params=params))

    def wait(self, job_id: str, timeout_s: float, poll_s: float = 2.0) -> JobDetail:
        """The job once it has ended; :class:`WaitTimeout` when it has not within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.show(job_id)
            if job.ended:
                return job
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"{job_id} is still {job.status} after {timeout_s:g} s")
            time.sleep(min(poll_s, left))

    def whoami(self) -> WhoAmI:
        """The user this client's token belongs to."""
        return WhoAmI.of(self.request("GET", "/v1/whoami"))

    def cluster(self) -> Cluster:
        """The service's nodes, their GPUs and the jobs holding them."""
        return Cluster.of(self.request("GET", "/v1/cluster"))

    # the HTTP underneath

    def request(self, method: str, path: str, *, headers: dict[str, str] | None = None, retry_s: float = 0.0,
                _headers_out: dict[str, str | None] | None = None, **kwargs: Any) -> Any:
        """The JSON answer to one request; for ``retry_s`` seconds a refused or lost connection or a 5xx is
        tried again (with growing pauses, up to 5 s), so only a request that may be repeated (an
        idempotent one, or one with an Idempotency-Key) should be given one."""
        import httpx

        deadline = time.monotonic() + retry_s
        pause = 0.25
        tries = 0
        while True:
            tries += 1
            try:
                response = httpx.request(method, self.server + path, headers={**self.headers, **(headers or {})},
                                         timeout=TIMEOUT_S, **kwargs)
            except httpx.TransportError as exc:
                if time.monotonic() + pause < deadline:
                    self._waiting(tries, _reason(exc), deadline)
                    time.sleep(pause)
                    pause = min(5.0, pause * 2)
                    continue
                raise ServiceError(f"cannot reach the service at {self.server}: {_reason(exc)}") from None
            except httpx.HTTPError as exc:
                raise ServiceError(f"cannot reach the service at {self.server}: {_reason(exc)}") from None
            if response.status_code >= 500 and time.monotonic() + pause < deadline:
                self._waiting(tries, f"it answered {response.status_code}", deadline)
                time.sleep(pause)
                pause = min(5.0, pause * 2)
                continue
            break
        self._check(response)
        if _headers_out is not None:
            _headers_out["x-next-cursor"] = response.headers.get("x-next-cursor")
        try:
            return response.json()
        except ValueError:
            raise ServiceError(f"the service at {self.server} did not answer JSON (is it a dlsched service?)",
                               status=response.status_code) from None

    def stream(self, path: str, params: dict[str, Any]) -> Iterator[str]:
        """A text answer's chunks as they arrive (a followed log has no read limit)."""
        import httpx

        try:
            with httpx.stream("GET", self.server + path, headers=self.headers, params=params,
                              timeout=httpx.Timeout(TIMEOUT_S, read=None)) as response:
                if response.status_code >= 400:
                    response.read()
                    self._check(response)
                yield from response.iter_text()
        except httpx.HTTPError as exc:
            raise ServiceError(f"cannot reach the service at {self.server}: {_reason(exc)}") from None

    def _waiting(self, tries: int, reason: str, deadline: float) -> None:
        """Say once that the request is being retried (a silent wait reads as a hang)."""
        if tries == 1:
            self.on_retry(f"the service at {self.server} did not answer ({reason}); trying again for up to "
                          f"{max(0.0, deadline - time.monotonic()):.0f} s")

    def _check(self, response: Any) -> None:
        code = response.status_code
        if code < 400:
            return
        detail = _detail(response)
        if code == 401:
            raise ServiceError(f"the service refused the token (401): {detail}", status=code, detail=detail,
                               field="token")
        if code == 404:
            raise ServiceError(f"not found (404): {detail}", status=code, detail=detail)
        if code == 422:
            raise ServiceError(f"the service refused the request (422): {detail}", status=code, detail=detail)
        raise ServiceError(f"the service answered {code}: {detail}", status=code, detail=detail)


def submit_retry_s() -> float:
    """Seconds a submission is retried: ``DLSCHED_SUBMIT_RETRY_S`` or :data:`SUBMIT_RETRY_S`."""
    text = os.environ.get("DLSCHED_SUBMIT_RETRY_S")
    if text is None:
        return SUBMIT_RETRY_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 86400.0:
        raise ServiceError(f"must be seconds in [0, 86400], got {text!r}", field="DLSCHED_SUBMIT_RETRY_S")
    return value


def _reason(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _detail(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return (response.text or "").strip()[:200] or "no detail"
    if isinstance(body, dict):
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
        return json.dumps(body.get("detail", body))[:300]
    return str(body)[:300]
