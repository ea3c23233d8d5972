"""The service's own history, read without touching it: jobs, events, reports and rounds as plain data.

A what-if reads a live service's database while the service writes it, so it must never write: the SQLite
file is opened with ``mode=ro`` (SQLite refuses every write on that connection, and no migration runs, as
:class:`~dlsched.service.store.Store` would run one), and a service behind a URL is asked through its
admin-only ``GET /v1/admin/history`` route, which answers from the same reading. What comes back is a
:class:`History` of JSON-ready mappings, so the export, the fit and the replay work the same on either.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dlsched.core import InputError

#: The database file ``dlsched serve --state DIR`` keeps by default.
DB_FILE = "dlsched.db"


@dataclass(frozen=True)
class History:
    """What a service recorded: jobs (the store's job records as mappings, times in Unix seconds), each
    job's events and reports (telemetry) oldest first, every round's time, summary and decision (the
    placements it gave, by node name: what ``whatif --at`` starts from), and how the service
    ran (``service``: policy, settings, cluster and round length, as ``dlsched serve`` records them)."""

    jobs: list[dict[str, Any]]
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    telemetry: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    service: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> History:
        try:
            return cls(jobs=list(data["jobs"]), events=dict(data.get("events") or {}),
                       telemetry=dict(data.get("telemetry") or {}), rounds=list(data.get("rounds") or []),
                       service=dict(data.get("service") or {}))
        except (KeyError, TypeError) as exc:
            raise InputError(f"not a service history: {exc}", field="history") from None


def read_store(store: Any) -> History:
    """The history as a running service's :class:`~dlsched.service.store.Store` holds it (read methods only:
    what the API's admin route answers)."""
    jobs = [_job_dict(j) for j in store.jobs()]
    events = {j["id"]: [asdict(e) for e in store.events(j["id"])] for j in jobs}
    telemetry = {j["id"]: store.telemetry(j["id"]) for j in jobs}
    rounds = [{"round_no": r["round_no"], "time_s": r["time_s"], "summary": r["summary"],
               "decision": r["decision"]} for r in store.rounds()]
    return History(jobs, events, telemetry, rounds, _service_meta(store.meta_get("service")))


def read_state(state: Path) -> History:
    """The history in ``STATE/dlsched.db``, opened read-only (the file is left byte for byte as it was)."""
    from sqlalchemy import create_engine, select
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.orm import Session

    from dlsched.service import models as m
    from dlsched.service.store import _job_record

    db = Path(state).expanduser() / DB_FILE
    if not db.is_file():
        raise InputError(f"no service database here ({DB_FILE} is missing): give the folder a `dlsched serve "
                         f"--state` used", source=str(state), field="state")
    uri = f"file:{db.resolve()}?mode=ro"
    engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False))
    try:
        with Session(engine) as s:
            jobs = [_job_dict(_job_record(row)) for row in s.execute(select(m.Job).order_by(m.Job.seq)).scalars()]
            events: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for e in s.execute(select(m.Event).order_by(m.Event.id)).scalars():
                events[e.job_id].append({"time_s": e.time_s, "kind": e.kind, "message": e.message,
                                         "data": dict(e.data or {})})
            telemetry: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for t in s.execute(select(m.Telemetry).order_by(m.Telemetry.id)).scalars():
                telemetry[t.job_id].append(dict(t.report))
            rounds = [{"round_no": r.round_no, "time_s": r.time_s, "summary": r.summary,
                       "decision": dict(r.decision or {})} for r in s.execute(select(m.Round).order_by(m.Round.round_no)).scalars()]
            meta = s.execute(select(m.Meta.value).where(m.Meta.key == "service")).scalar_one_or_none()
    except DBAPIError as exc:
        reason = " ".join(str(exc.orig).split()) if exc.orig is not None else str(exc)
        raise InputError(f"cannot read the service database: {reason}", source=str(db), field="state") from None
    finally:
        engine.dispose()
    return History(jobs, dict(events), dict(telemetry), rounds, _service_meta(meta))


def read_server(url: str, token: str | None) -> History:
    """The history a running service answers on ``GET URL/v1/admin/history`` (an admin's token)."""
    import httpx

    if not token:
        raise InputError("reading a service needs an admin's token: set DLSCHED_TOKEN or give --token",
                         field="token")
    try:
        resp = httpx.get(url.rstrip("/") + "/v1/admin/history", headers={"Authorization": f"Bearer {token}"},
                         timeout=120.0)
    except httpx.HTTPError as exc:
        raise InputError(f"cannot reach {url}: {exc}", field="server") from None
    if resp.status_code in (401, 403):
        raise InputError(f"{url} refused the history: an admin's token is needed ({resp.status_code})",
                         field="token")
    if resp.status_code != 200:
        raise InputError(f"{url} answered {resp.status_code} to GET /v1/admin/history", field="server")
    return History.from_json(resp.json())


def load_history(state: Path | None, server: str | None, token: str | None = None) -> History:
    """The history of ``--state DIR`` or ``--server URL`` (exactly one of them)."""
    if (state is None) == (server is None):
        raise InputError("give either --state DIR or --server URL", field="state")
    return read_state(state) if state is not None else read_server(str(server), token)


def _job_dict(job: Any) -> dict[str, Any]:
    out = asdict(job)
    out["submission"] = job.submission.model_dump(mode="json")
    out["profiled_types"] = list(job.profiled_types)
    return out


def _service_meta(value: str | None) -> dict[str, Any]:
    try:
        data = json.loads(value) if value else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
