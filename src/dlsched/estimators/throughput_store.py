"""Hops's multi-layer throughput database (section 3.3), kept in SQLite.

Per job and GPU type the store has three layers, read top-down by the estimator
(:mod:`dlsched.estimators.hops_throughput`):

1. **server entity layer** (``entity``): the per-GPU throughput the job reached on one server, in an
   aggregated table (key: GPUs on the server) and a distributed table (key: servers in the configuration);
2. **type layer** (``type_layer``): the same two tables per GPU type, over every server of the type;
3. **component layer** (``components``, ``data_load``): the time components the profiler measured (``T_f``,
   ``T_b``, ``T_u``, the parameter count, the overlap pattern of equation 1) and every data-loading time
   recorded, from which the estimator fits equation 3's two-component mixture.

Every observation is also kept verbatim (``observations``). Throughputs of a layer are means over the
observations that reached it. A distributed observation is gated by its slowest server (section 3.5), so
it is recorded for each of its servers as the per-GPU throughput they delivered together.

The database is a file: by default one per run, in a temporary directory removed when the run's store
goes (at the end of the process at the latest); or a path or ``sqlite:///path`` URL the user gives, kept, so
a restarted scheduler finds what earlier runs recorded. Lookups
are answered from an in-memory mirror loaded when the store opens and written through on every record: a
round asks thousands of them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from dataclasses import dataclass

from dlsched.core import ThroughputObservation

#: Keys of the layers: (job, server, kind, key) for the entity layer, (job, GPU type, kind, key) for types.
AGGREGATED, DISTRIBUTED = "aggregated", "distributed"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS observations (
    id INTEGER PRIMARY KEY, job TEXT NOT NULL, gpu_type TEXT NOT NULL, time_s REAL NOT NULL,
    servers TEXT NOT NULL, num_gpus INTEGER NOT NULL, num_nodes INTEGER NOT NULL, local_bsz INTEGER NOT NULL,
    step_time_s REAL NOT NULL, components TEXT NOT NULL, data_load TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entity (
    job TEXT NOT NULL, server INTEGER NOT NULL, kind TEXT NOT NULL, key INTEGER NOT NULL,
    tput_sum REAL NOT NULL, n INTEGER NOT NULL, gpu_type TEXT NOT NULL, PRIMARY KEY (job, server, kind, key));
CREATE TABLE IF NOT EXISTS type_layer (
    job TEXT NOT NULL, gpu_type TEXT NOT NULL, kind TEXT NOT NULL, key INTEGER NOT NULL,
    tput_sum REAL NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (job, gpu_type, kind, key));
CREATE TABLE IF NOT EXISTS components (
    job TEXT NOT NULL, gpu_type TEXT NOT NULL, batch INTEGER NOT NULL, t_f REAL NOT NULL, t_b REAL NOT NULL,
    t_u REAL NOT NULL, params REAL NOT NULL, pattern INTEGER NOT NULL, PRIMARY KEY (job, gpu_type));
CREATE TABLE IF NOT EXISTS data_load (job TEXT NOT NULL, gpu_type TEXT NOT NULL, t_d REAL NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Components:
    """The component layer of one job on one GPU type: what the profiler measured."""

    batch: int
    t_f: float
    t_b: float
    t_u: float
    params: float
    #: Equation 1's overlap pattern (1 or 2), detected from the profiled iteration time.
    pattern: int


def check_location(location: str) -> None:
    """Refuse a location that names no SQLite file (before anything runs)."""
    if "://" in location and not location.startswith("sqlite:///"):
        raise ValueError(f"throughput store '{location}': give a file path or a sqlite:///path URL")
    path = location[len("sqlite:///"):] if location.startswith("sqlite:///") else location
    if path and os.path.isdir(path):
        raise ValueError(f"throughput store '{location}' is a directory; give a file in it")


def store_path(location: str) -> str:
    """The SQLite file of ``location``: a path or a ``sqlite:///path`` URL (``sqlite:///`` alone: in memory).
    Empty is handled by :class:`ThroughputStore` (a file in a temporary directory removed with the store)."""
    check_location(location)
    if location.startswith("sqlite:///"):
        return location[len("sqlite:///"):] or ":memory:"
    return location


class ThroughputStore:
    """The three layers of section 3.3 in one SQLite database; see the module docstring."""

    def __init__(self, location: str = "") -> None:
        #: The run's own temporary directory when no location is given: removed when the store is.
        self._tmp: tempfile.TemporaryDirectory | None = None
        if location:
            self.path = store_path(location)
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="dlsched-hops-")
            self.path = os.path.join(self._tmp.name, "throughput.sqlite")
        if self.path != ":memory:":
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
        #: Counts the observations recorded by this process (answers derived from the layers key on it).
        self.version = 0
        #: Per job, the observations of it recorded by this process: every answer about a job derives from its
        #: own records only, so an answer computed at one count holds while the count stays.
        self._job_version: dict[str, int] = {}
        # one user at a time, but not always the same thread: the service runs its first round before its
        # round thread starts, and the round thread every one after
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        # a crash may lose the last round's records, never corrupt the file; syncing every round would
        # cost more than the round's plan
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._entity: dict[tuple[str, int, str, int], tuple[float, int]] = {}
        #: job -> server -> GPU type, for the servers the entity layer has records of
        self._servers: dict[str, dict[int, str]] = {}
        #: job -> its entity-layer keys (server, kind, key): a plan reads a job's records without a scan
        self._entity_keys: dict[str, set[tuple[int, str, int]]] = {}
        for j, server, k, key, v, n, t in self._db.execute("SELECT * FROM entity"):
            self._entity[(j, server, k, key)] = (v, n)
            self._servers.setdefault(j, {})[server] = t
            self._entity_keys.setdefault(j, set()).add((server, k, key))
        self._type: dict[tuple[str, str, str, int], tuple[float, int]] = {
            (j, t, k, key): (v, n) for j, t, k, key, v, n in self._db.execute("SELECT * FROM type_layer")}
        #: job -> its type-layer keys (GPU type, kind, key)
        self._type_keys: dict[str, set[tuple[str, str, int]]] = {}
        for j, t, k, key in self._type:
            self._type_keys.setdefault(j, set()).add((t, k, key))
        #: (job, GPU type) -> (sum, count) of every per-GPU throughput recorded there, any shape
        self._type_any: dict[tuple[str, str], tuple[float, int]] = {}
        for (j, t, _, _), (v, n) in self._type.items():
            total, count = self._type_any.get((j, t), (0.0, 0))
            self._type_any[(j, t)] = (total + v, count + n)
        self._components: dict[tuple[str, str], Components] = {
            (j, t): Components(b, f, bw, u, p, pat)
            for j, t, b, f, bw, u, p, pat in self._db.execute("SELECT * FROM components")}
        self._loads: dict[tuple[str, str], list[float]] = {}
        for j, t, v in self._db.execute("SELECT job, gpu_type, t_d FROM data_load"):
            self._loads.setdefault((j, t), []).append(v)

    def close(self) -> None:
        """Close the database (and remove the run's temporary one, if it is that)."""
        self._db.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    # -- writing -------------------------------------------------------------------------------------
    def record(self, job: str, obs: ThroughputObservation, pattern_of=None, *, commit: bool = True) -> None:
        """Record one observation in every layer it reaches (and commit, unless the caller commits a batch).

        ``pattern_of(components, observation)`` detects equation 1's pattern when the observation carries
        the first profiled components of the job on its type (the component layer keeps the first ones).
        """
        self.version += 1
        self._job_version[job] = self._job_version.get(job, 0) + 1
        db = self._db
        comps = dict(obs.components)
        db.execute("INSERT INTO observations (job, gpu_type, time_s, servers, num_gpus, num_nodes, local_bsz, "
                   "step_time_s, components, data_load) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (job, obs.gpu_type, obs.time_s, json.dumps(obs.servers), obs.num_gpus, obs.num_nodes,
                    obs.local_bsz, obs.step_time_s, json.dumps(comps), json.dumps(obs.data_load_s)))
        if obs.step_time_s > 0:
            # a job that reports no batch (a rigid job of another workload) counts one unit per step
            per_gpu = max(1, obs.local_bsz) / obs.step_time_s
            kind, key = (AGGREGATED, obs.num_gpus) if obs.num_nodes <= 1 else (DISTRIBUTED, obs.num_nodes)
            self._add(self._type, "type_layer", (job, obs.gpu_type, kind, key), per_gpu)
            self._type_keys.setdefault(job, set()).add((obs.gpu_type, kind, key))
            total, count = self._type_any.get((job, obs.gpu_type), (0.0, 0))
            self._type_any[(job, obs.gpu_type)] = (total + per_gpu, count + 1)
            for server, _ in obs.servers:
                self._add(self._entity, "entity", (job, int(server), kind, key), per_gpu, obs.gpu_type)
                self._servers.setdefault(job, {})[int(server)] = obs.gpu_type
                self._entity_keys.setdefault(job, set()).add((int(server), kind, key))
        if {"T_f", "T_b", "T_u", "params"} <= comps.keys() and (job, obs.gpu_type) not in self._components:
            pattern = int(pattern_of(comps, obs)) if pattern_of is not None else 1
            c = Components(obs.local_bsz, comps["T_f"], comps["T_b"], comps["T_u"], comps["params"], pattern)
            self._components[(job, obs.gpu_type)] = c
            db.execute("INSERT OR REPLACE INTO components VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (job, obs.gpu_type, c.batch, c.t_f, c.t_b, c.t_u, c.params, c.pattern))
        if obs.data_load_s:
            self._loads.setdefault((job, obs.gpu_type), []).extend(obs.data_load_s)
            db.executemany("INSERT INTO data_load VALUES (?, ?, ?)",
                           [(job, obs.gpu_type, float(v)) for v in obs.data_load_s])
        if commit:
            db.commit()

    def commit(self) -> None:
        self._db.commit()

    def job_version(self, job: str) -> int:
        """How many observations of ``job`` this process recorded (answers about the job key on it)."""
        return self._job_version.get(job, 0)

    def _add(self, mirror: dict, table: str, key: tuple, value: float, *extra: str) -> None:
        total, n = mirror.get(key, (0.0, 0))
        mirror[key] = (total + value, n + 1)
        marks = ", ".join("?" * (6 + len(extra)))
        self._db.execute(f"INSERT OR REPLACE INTO {table} VALUES ({marks})", (*key, total + value, n + 1, *extra))

    # -- reading (top-down, by the estimator) ------------------------------------------------------------
    def entity(self, job: str, server: int, kind: str, key: int) -> float | None:
        """Mean per-GPU throughput of the job on one server (layer 1), None if never observed."""
        got = self._entity.get((job, server, kind, key))
        return got[0] / got[1] if got else None

    def type_throughput(self, job: str, gpu_type: str, kind: str, key: int) -> float | None:
        """Mean per-GPU throughput of the job on a GPU type (layer 2), None if never observed."""
        got = self._type.get((job, gpu_type, kind, key))
        return got[0] / got[1] if got else None

    def type_records(self, job: str) -> list[tuple[str, str, int, float]]:
        """The job's type-layer records as ``(GPU type, kind, key, mean per-GPU throughput)``, sorted."""
        out = []
        for t, kind, key in sorted(self._type_keys.get(job, ())):
            total, n = self._type[(job, t, kind, key)]
            out.append((t, kind, key, total / n))
        return out

    def type_any_shape(self, job: str, gpu_type: str) -> float | None:
        """Mean per-GPU throughput of the job on a type over every shape it reported there (None: none)."""
        got = self._type_any.get((job, gpu_type))
        return got[0] / got[1] if got else None

    def components(self, job: str, gpu_type: str) -> Components | None:
        """The profiled components of the job on a type (layer 3), None if not profiled there."""
        return self._components.get((job, gpu_type))

    def data_loads(self, job: str, gpu_type: str) -> list[float]:
        """Every data-loading time recorded for the job on a type."""
        return self._loads.get((job, gpu_type), [])

    def servers_of(self, job: str) -> dict[int, str]:
        """Servers with a server-layer record of the job, and their GPU types."""
        return self._servers.get(job, {})

    def distinct_records(self, job: str, tolerance: float) -> list[tuple[int, str, int, float, float]]:
        """The job's server-layer records that differ from its type layer's by more than ``tolerance``
        (relative to the larger): ``(server, kind, key, server's mean, type's mean)``, sorted. These are the answers by which
        the estimator tells a server apart from its peers for the job; the others it answers as the type."""
        out = []
        for server, kind, key in self._entity_keys.get(job, ()):
            total, n = self._entity[(job, server, kind, key)]
            t_total, t_n = self._type[(job, self._servers[job][server], kind, key)]
            mine, theirs = total / n, t_total / t_n
            if abs(mine - theirs) > tolerance * max(mine, theirs):
                out.append((server, kind, key, mine, theirs))
        return sorted(out)

    def distinct_servers(self, job: str, tolerance: float) -> set[int]:
        """Servers where some server-layer throughput of the job differs from its type layer's by more than
        ``tolerance`` (relative to the larger): the servers the estimator tells apart for the job."""
        return {server for server, *_ in self.distinct_records(job, tolerance)}

    def profiled_types(self, job: str) -> set[str]:
        return {t for j, t in self._components if j == job}

    def count_observations(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM observations").fetchone()[0])
