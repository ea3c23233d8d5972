"""What jobs reported, as the store keeps it: telemetry lines, the observations made of them, and how far
each job's ``reports.jsonl`` has been read; with reads of many jobs at once for a round that sees thousands.

A mixin of :class:`dlsched.service.store.Store`, as :class:`dlsched.service.accounts.Accounts` is.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from dlsched.core import GradientObservation, ThroughputObservation
from dlsched.service import models as m

#: Meta key prefix of the bytes of a job's ``reports.jsonl`` consumed (committed with what they caused).
REPORTS_OFFSET = "reports_offset:"
#: Ids in one ``IN (...)`` (below SQLite's 999 bound variables of old builds, and PostgreSQL's 65,535).
IN_CHUNK = 900


class JobReports:
    """Reads of what jobs reported, over the store's sessions."""

    if TYPE_CHECKING:
        def _read(self) -> AbstractContextManager[Session]: ...
        def meta_get(self, key: str) -> str | None: ...

    def telemetry(self, job_id: str) -> list[dict[str, Any]]:
        with self._read() as s:
            return [dict(t.report) for t in s.execute(select(m.Telemetry).where(m.Telemetry.job_id == job_id)
                                                      .order_by(m.Telemetry.id)).scalars()]

    def observations(self, job_id: str) -> tuple[list[ThroughputObservation], list[GradientObservation]]:
        return self.observations_of([job_id]).get(job_id, ([], []))

    def observations_of(self, job_ids: Sequence[str]
                        ) -> dict[str, tuple[list[ThroughputObservation], list[GradientObservation]]]:
        """:meth:`observations` of many jobs in a few queries (jobs without any are left out)."""
        out: dict[str, tuple[list[ThroughputObservation], list[GradientObservation]]] = {}
        with self._read() as s:
            for i in range(0, len(job_ids), IN_CHUNK):
                chunk = list(job_ids[i:i + IN_CHUNK])
                for o in s.execute(select(m.Observation).where(m.Observation.job_id.in_(chunk))
                                   .order_by(m.Observation.id)).scalars():
                    tput, grad = out.setdefault(o.job_id, ([], []))
                    if o.kind == "throughput":
                        tput.append(_throughput(o.data))
                    else:
                        grad.append(GradientObservation(**o.data))
        return out

    def meta_many(self, keys: Sequence[str]) -> dict[str, str]:
        """The meta values of those ``keys`` that are set, in a few queries."""
        out: dict[str, str] = {}
        with self._read() as s:
            for i in range(0, len(keys), IN_CHUNK):
                chunk = list(keys[i:i + IN_CHUNK])
                out.update((k, v) for k, v in s.execute(select(m.Meta.key, m.Meta.value).where(m.Meta.key.in_(chunk))))
        return out

    def reports_offset(self, job_id: str) -> int:
        """Bytes of the job's ``reports.jsonl`` consumed by committed rounds."""
        return int(self.meta_get(f"{REPORTS_OFFSET}{job_id}") or 0)


def _throughput(data: dict[str, Any]) -> ThroughputObservation:
    """A ThroughputObservation back from JSON (whose lists were tuples)."""
    fields = dict(data)
    fields["servers"] = tuple((int(a), int(b)) for a, b in fields.get("servers", ()))
    fields["components"] = tuple((str(a), float(b)) for a, b in fields.get("components", ()))
    fields["data_load_s"] = tuple(float(x) for x in fields.get("data_load_s", ()))
    return ThroughputObservation(**fields)
