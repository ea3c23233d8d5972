"""The service's client commands: ``dlsched submit``, ``jobs``, ``show``, ``cancel``, ``logs``.

They talk to a running ``dlsched serve`` over its HTTP API, named by ``--server``/``DLSCHED_SERVER`` and
authenticated by ``--token``/``DLSCHED_TOKEN``. Whatever goes wrong (no server, a refused token, an unknown
job, a bad spec) ends as one ``error:`` line and exit code 2, like every other dlsched command.

``submit`` checks the spec here first (the same model the server checks with), so a typo is reported
against the file before anything is sent; it also makes ``working_dir`` absolute, relative to the spec
file's folder (the folder itself when the spec gives none), and checks that it exists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dlsched.cli.common import Format, FormatOpt, app, guard, note, out
from dlsched.core import InputError

ServerOpt = Annotated[str | None, typer.Option("--server", envvar="DLSCHED_SERVER", show_envvar=True,
                                               help="URL of the dlsched service (http://HOST:PORT).")]
TokenOpt = Annotated[str | None, typer.Option("--token", envvar="DLSCHED_TOKEN", show_envvar=True,
                                              help="Your API token (from 'dlsched serve user add').")]
JobIdArg = Annotated[str, typer.Argument(help="The job's id (job-<n>).", metavar="ID")]
#: Seconds a plain request may take; a followed log has no read limit.
TIMEOUT_S = 30.0


class Client:
    """The API seen from a command: every failure becomes an InputError with one readable line."""

    def __init__(self, server: str | None, token: str | None) -> None:
        from dlsched.service.extra import CLIENT_MODULES, require

        require(CLIENT_MODULES)
        if not server:
            raise InputError("no service named: set DLSCHED_SERVER or give --server http://HOST:PORT",
                             field="server")
        if not token:
            raise InputError("no token: set DLSCHED_TOKEN or give --token", field="token")
        if not server.startswith(("http://", "https://")):
            server = f"http://{server}"
        self.server = server.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer to one request."""
        import httpx

        try:
            response = httpx.request(method, self.server + path, headers=self.headers, timeout=TIMEOUT_S, **kwargs)
        except httpx.HTTPError as exc:
            raise InputError(f"cannot reach the service at {self.server}: {_reason(exc)}") from None
        self._check(response)
        try:
            return response.json()
        except ValueError:
            raise InputError(f"the service at {self.server} did not answer JSON (is it a dlsched service?)") from None

    def stream(self, path: str, params: dict[str, Any]) -> None:
        """Copy a text answer to stdout as it arrives (a followed log)."""
        import httpx

        try:
            with httpx.stream("GET", self.server + path, headers=self.headers, params=params,
                              timeout=httpx.Timeout(TIMEOUT_S, read=None)) as response:
                if response.status_code >= 400:
                    response.read()
                    self._check(response)
                for chunk in response.iter_text():
                    sys.stdout.write(chunk)
                    sys.stdout.flush()
        except httpx.HTTPError as exc:
            raise InputError(f"cannot reach the service at {self.server}: {_reason(exc)}") from None

    def _check(self, response: Any) -> None:
        code = response.status_code
        if code < 400:
            return
        detail = _detail(response)
        if code == 401:
            raise InputError(f"the service refused the token (401): {detail}", field="token")
        if code == 404:
            raise InputError(f"not found (404): {detail}")
        if code == 422:
            raise InputError(f"the service refused the request (422): {detail}")
        raise InputError(f"the service answered {code}: {detail}")


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


def load_spec(path: Path) -> dict[str, Any]:
    """The spec file as the JSON body to submit: checked, ``working_dir`` absolute and existing."""
    import yaml

    from dlsched.service.spec import parse_submission

    source = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read the job spec: {exc.strerror}", source=source) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", source=source,
                         line=None if mark is None else mark.line + 1) from None
    if not isinstance(data, dict):
        raise InputError("a job spec must be a mapping of fields (name, command, gpus, ...)", source=source)
    given = data.get("working_dir", ".")
    if not isinstance(given, str) or not given:
        raise InputError("must be a path", source=source, field="working_dir")
    folder = (path.resolve().parent / Path(given).expanduser()).resolve()
    if not folder.is_dir():
        raise InputError(f"{folder} is not an existing folder", source=source, field="working_dir")
    data["working_dir"] = str(folder)
    return parse_submission(data, source=source).model_dump(mode="json", exclude_none=True)


def _when(value: str | None) -> str:
    """An ISO 8601 timestamp, shortened for a table (UTC, to the second)."""
    if not value:
        return "-"
    return value.replace("T", " ")[:19] + "Z"


@app.command("submit")
def submit(
    spec: Annotated[Path, typer.Argument(help="The job spec (YAML).", metavar="SPEC.yaml")],
    server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table,
) -> None:
    """Submit a job to the service; prints its id (json: the whole job)."""

    def go() -> None:
        body = load_spec(spec)
        client = Client(server, token)
        job = client.request("POST", "/v1/jobs", json=body)
        if fmt is Format.json:
            sys.stdout.write(json.dumps(job) + "\n")
        else:
            sys.stdout.write(f"{job['id']}\n")

    guard(go)


JOB_COLUMNS = ("id", "user", "name", "status", "gpus", "gpu_type", "submitted", "started", "finished")


@app.command("jobs")
def jobs(
    all_: Annotated[bool, typer.Option("--all", help="Finished jobs too.")] = False,
    server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table,
) -> None:
    """Your jobs on the service (an admin's: everyone's), unfinished ones unless --all."""

    def go() -> None:
        rows = Client(server, token).request("GET", "/v1/jobs", params={"all": str(all_).lower()})
        if fmt is Format.json:
            sys.stdout.write(json.dumps(rows) + "\n")
            return
        table = Table()
        for column in JOB_COLUMNS:
            table.add_column(column, justify="right" if column == "gpus" else "left")
        for row in rows:
            table.add_row(*[_when(row.get(c)) if c in ("submitted", "started", "finished")
                            else ("-" if row.get(c) is None else str(row.get(c))) for c in JOB_COLUMNS])
        out.print(table)
        if not rows:
            note("no jobs" if all_ else "no unfinished jobs (--all shows finished ones)")

    guard(go)


@app.command("show")
def show(job_id: JobIdArg, server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table) -> None:
    """One job: its spec, placement, progress counters and events."""

    def go() -> None:
        job = Client(server, token).request("GET", f"/v1/jobs/{_quote(job_id)}")
        if fmt is Format.json:
            sys.stdout.write(json.dumps(job) + "\n")
            return
        lines = [f"{c}: {_when(job.get(c)) if c in ('submitted', 'started', 'finished') else job.get(c)}"
                 for c in JOB_COLUMNS]
        lines += [f"{c}: {job.get(c)}" for c in ("placement", "batch_size", "progress", "steps_done", "restarts",
                                                 "failures", "preemptions", "cancel_requested", "message")]
        lines.append(f"command: {job['spec']['command']}")
        lines.append("events:")
        lines += [f"  {_when(e['time'])}  {e['kind']}: {e['message']}" for e in job.get("events", [])]
        sys.stdout.write("\n".join(lines) + "\n")

    guard(go)


@app.command("cancel")
def cancel(job_id: JobIdArg, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Cancel a job: a queued one at once, a running one at the next round."""

    def go() -> None:
        job = Client(server, token).request("POST", f"/v1/jobs/{_quote(job_id)}/cancel")
        if job["status"] == "cancelled":
            sys.stdout.write(f"{job['id']} cancelled\n")
        elif job["status"] in ("succeeded", "failed"):
            sys.stdout.write(f"{job['id']} had already {job['status']}\n")
        else:
            sys.stdout.write(f"{job['id']} cancel requested (its workers stop at the next round)\n")

    guard(go)


@app.command("logs")
def logs(
    job_id: JobIdArg,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until the job ends.")] = False,
    rank: Annotated[str | None, typer.Option("--rank", metavar="INTEGER", help="Only this rank's log.")] = None,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """The job's workers' logs, each rank under a header."""

    def go() -> None:
        params: dict[str, Any] = {"follow": str(follow).lower()}
        if rank is not None:
            if not rank.isdigit():
                raise InputError(f"must be a rank number (0, 1, ...), got {rank!r}", field="rank")
            params["rank"] = int(rank)
        Client(server, token).stream(f"/v1/jobs/{_quote(job_id)}/logs", params)

    guard(go)


def _quote(job_id: str) -> str:
    from urllib.parse import quote

    return quote(job_id, safe="")
