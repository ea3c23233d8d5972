"""Server classes: Hops's ILP over kinds of servers instead of servers (plan time at scale).

Two servers of the same GPU type, size and host with the same number of idle GPUs are interchangeable to
every job: a configuration on one has the throughput of the same configuration on the other. The exact
ILP still offers each job one option per server with room, so an idle 512-GPU cluster gives a job hundreds
of mirror-image options and HiGHS spends its time limit telling them apart. Here servers are grouped into
*classes* (type, size, host, idle GPUs), and an option is a *signature*: how many GPUs it takes from a
server of which class, e.g. ``((c, 8), (c, 4))`` for 12 GPUs over one full and one half server of class
``c``. The ILP picks signatures under one capacity row per class (its idle GPUs) and, per class, one row
counting pieces of more than half a server (no two fit on one server); it is a relaxation of the exact
ILP, so its optimum bounds the exact one from above. The chosen signatures are then mapped back onto
servers: jobs keeping their current signature first, on their current servers; then pieces largest first,
each on the fullest server of its class that still holds it (best fit); a job whose pieces do not all
fit (the relaxation allowed a packing that does not exist) is dropped, and the GPUs left over go greedily
to the dropped and unplanned jobs' options by value. The planner reports the mapped plan's objective
against the ILP's bound, the price of the mapping.

Distributed signatures come from section 3.6's walk over the real servers in node order (job-independent:
computed once per plan for each type and requirement), so a job is offered the same shapes as in the exact
ILP; the mapping may put them on other servers of the same classes, which no job can tell apart.

**Servers the estimator tells apart.** Once jobs have run, the estimator's server entity layer may answer
differently for one server than for its peers (a job ran slower there, or was gated by a slower partner).
Such servers are interchangeable no longer, so classes are refined by what the estimator says of them: each
server carries a *profile*, its answers for the jobs of the plan that differ from the type layer's (per
job and layer key: the server's per-GPU throughput and the type's), and a server joins a class only if its
profile agrees with the class's first member (its *representative*) within a relative ``tolerance`` on
every answer either of them has (a missing answer is the type's). Servers without records stay together,
so where the estimates do not differ the classes, and the plan, are those above. The ILP prices a
signature by its slowest piece, each class answering with its representative's profile, as the estimator
prices a configuration by its slowest server; with ``tolerance = 0`` a class holds only servers with equal
answers and the relaxation still bounds the exact ILP.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dlsched.core import Cluster
from dlsched.estimators.throughput_store import AGGREGATED, DISTRIBUTED
from dlsched.policies.hops.configs import type_configs

Signature = tuple[tuple[int, int], ...]  # (class id, GPUs on one server of it), class ids ascending
#: A server's profile: per answer key (e.g. job, layer kind, layer key) its value and the type's value.
Profile = Mapping[Hashable, tuple[float, float]]
_NO_PROFILE: Profile = {}


def profiles_agree(a: Profile, b: Profile, tolerance: float) -> bool:
    """Whether two servers' answers agree within ``tolerance`` (relative to the larger) on every key either
    has; a key one of them lacks is answered there by the type's value."""
    for k in a.keys() | b.keys():
        va = a[k][0] if k in a else b[k][1]
        vb = b[k][0] if k in b else a[k][1]
        if abs(va - vb) > tolerance * max(abs(va), abs(vb)):
            return False
    return True


@dataclass
class ServerClasses:
    """Servers with idle GPUs grouped by (GPU type, size, host, idle GPUs), refined by their profiles."""

    class_of: np.ndarray  # per node: class id, -1 for servers without idle GPUs
    members: list[list[int]]  # per class: node ids ascending
    free: list[int]  # per class: idle GPUs of each member
    gpu_type: list[str]
    #: Per class: its profile (its first member's; empty: the estimator answers as for the type).
    profile: list[Profile] = field(default_factory=list)
    #: Per job (a profile key's first part): the classes whose profile answers for it (see :meth:`answering`).
    _answering: dict[Hashable, set[int]] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, cluster: Cluster, idle: np.ndarray, profiles: Mapping[int, Profile] | None = None,
           tolerance: float = 0.0) -> ServerClasses:
        """Classes of the servers with idle GPUs; ``profiles`` (per node id, absent: empty) split servers the
        estimator tells apart by more than ``tolerance`` (see the module docstring)."""
        profiles = profiles or {}
        class_of = np.full(len(cluster.nodes), -1, dtype=np.int64)
        index: dict[tuple[str, int, str, int], list[int]] = {}
        members: list[list[int]] = []
        free: list[int] = []
        types: list[str] = []
        reps: list[Profile] = []
        for node in cluster.nodes:
            f = int(idle[node.node_id])
            if f <= 0:
                continue
            mine = profiles.get(node.node_id, _NO_PROFILE)
            candidates = index.setdefault((node.gpu_type, node.num_gpus, node.host, f), [])
            c = next((c for c in candidates if profiles_agree(mine, reps[c], tolerance)), -1)
            if c < 0:
                c = len(members)
                candidates.append(c)
                members.append([])
                free.append(f)
                types.append(node.gpu_type)
                reps.append(mine)
            class_of[node.node_id] = c
            members[c].append(node.node_id)
        return cls(class_of, members, free, types, reps)

    @property
    def num_classes(self) -> int:
        return len(self.members)

    def answering(self, job: Hashable) -> set[int]:
        """The classes whose profile has an answer for ``job`` (keys ``(job, kind, key)``); every other class
        answers for it as the type, so a plan prices most signatures without looking at a profile."""
        if self._answering is None:
            self._answering = {}
            for c, prof in enumerate(self.profile):
                for k in prof:
                    self._answering.setdefault(k[0] if isinstance(k, tuple) else k, set()).add(c)
        return self._answering.get(job, set())

    def signature(self, servers: Sequence[tuple[int, int]]) -> Signature | None:
        """The signature of (node id, GPUs) pairs; None when a server has no idle GPUs (no class)."""
        out = []
        for n, k in servers:
            c = int(self.class_of[n])
            if c < 0:
                return None
            out.append((c, k))
        return tuple(sorted(out))


@dataclass
class SignatureCatalog:
    """Per (GPU type, requirement): the aggregated and the distributed signatures on the idle servers."""

    classes: ServerClasses
    cluster: Cluster
    idle: np.ndarray
    _cache: dict[tuple[str, int], tuple[list[Signature], list[Signature]]] = field(default_factory=dict)
    _shapes: dict[tuple[str, int], tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]] = field(
        default_factory=dict)

    def shapes_of(self, gpu_type: str, requirement: int) -> tuple[list[tuple[str, int, int]],
                                                                  list[tuple[str, int, int]]]:
        """:meth:`of`'s signatures as (GPU type, servers, GPUs) shapes, the estimator's question for each
        (computed once per plan, not once per job)."""
        key = (gpu_type, requirement)
        if key not in self._shapes:
            agg, dist = self.of(gpu_type, requirement)
            self._shapes[key] = ([(gpu_type, len(g), sum(k for _, k in g)) for g in agg],
                                 [(gpu_type, len(g), sum(k for _, k in g)) for g in dist])
        return self._shapes[key]

    def of(self, gpu_type: str, requirement: int) -> tuple[list[Signature], list[Signature]]:
        key = (gpu_type, requirement)
        if key not in self._cache:
            agg: list[Signature] = [((c, requirement),) for c in range(self.classes.num_classes)
                   if self.classes.gpu_type[c] == gpu_type and requirement <= self.classes.free[c]]
            nodes = self.cluster.nodes_of_type[gpu_type]
            size = max(self.cluster.nodes[n].num_gpus for n in nodes)
            walked = type_configs(gpu_type, [(n, int(self.idle[n])) for n in nodes], [requirement],
                                  distributed=True, server_size=size)
            dist: list[Signature] = []
            seen: set[Signature] = set()
            for cfg in walked:
                if cfg.num_nodes < 2:
                    continue
                sig = self.classes.signature(cfg.servers)
                if sig is not None and sig not in seen:
                    seen.add(sig)
                    dist.append(sig)
            self._cache[key] = (agg, dist)
        return self._cache[key]


def class_rows(classes: ServerClasses, sigs: Sequence[Signature]) -> tuple[sp.csc_matrix, np.ndarray]:
    """The relaxation's rows: idle GPUs per class, then big pieces (over half a server) per class. Built
    from arrays of every signature's pieces (a plan has thousands of options)."""
    k_classes = classes.num_classes
    pieces = np.array([p for sig in sigs for p in sig], dtype=np.int64).reshape(-1, 2)
    col = np.repeat(np.arange(len(sigs)), [len(sig) for sig in sigs])
    cls, k = pieces[:, 0], pieces[:, 1]
    big = 2 * k > np.asarray(classes.free, dtype=np.int64)[cls] if len(cls) else np.zeros(0, dtype=bool)
    rows = np.concatenate([cls, k_classes + cls[big]])
    cols = np.concatenate([col, col[big]])
    vals = np.concatenate([k.astype(float), np.ones(int(big.sum()))])
    usage = sp.csc_matrix((vals, (rows, cols)), shape=(2 * k_classes, len(sigs)))  # duplicates are summed
    cap = np.array([len(m) * f for m, f in zip(classes.members, classes.free, strict=True)]
                   + [len(m) for m in classes.members], dtype=float)
    return usage, cap


def place_signature(classes: ServerClasses, left: np.ndarray, sig: Signature,
                    prefer: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]] | None:
    """Servers for one signature on the GPUs ``left`` (updated when it fits): ``prefer`` (the job's current
    servers) when they match the signature and have room, else each piece, largest first, on the fullest
    server of its class that holds it. None (``left`` untouched) when some piece finds no server."""
    if prefer and classes.signature(prefer) == sig and all(left[n] >= k for n, k in prefer):
        for n, k in prefer:
            left[n] -= k
        return sorted(prefer)
    chosen: list[tuple[int, int]] = []
    for c, k in sorted(sig, key=lambda p: -p[1]):
        used = {n for n, _ in chosen}
        fits = [n for n in classes.members[c] if n not in used and left[n] >= k]
        if not fits:
            for n, kk in chosen:
                left[n] += kk
            return None
        n = min(fits, key=lambda m: (left[m], m))
        left[n] -= k
        chosen.append((n, k))
    return sorted(chosen)


def map_back(classes: ServerClasses, idle: np.ndarray, group: np.ndarray, sigs: Sequence[Signature],
             value: np.ndarray, choice: np.ndarray, current: Callable[[int], Sequence[tuple[int, int]]]
             ) -> dict[int, tuple[int, list[tuple[int, int]]]]:
    """Per job (group) its option and servers: the ILP's choices first (jobs keeping their current
    signature before the rest, then larger jobs first), then the leftover GPUs to the options of jobs left
    without servers, by value."""
    left = idle.astype(np.int64).copy()
    out: dict[int, tuple[int, list[tuple[int, int]]]] = {}
    picked = [(g, int(o)) for g, o in enumerate(choice.tolist()) if o >= 0]
    keeps = [p for p in picked if classes.signature(current(p[0])) == sigs[p[1]]]
    rest = sorted((p for p in picked if p not in keeps), key=lambda p: (-max(k for _, k in sigs[p[1]]),
                                                                        -sum(k for _, k in sigs[p[1]]), p[0]))
    for g, o in keeps + rest:
        servers = place_signature(classes, left, sigs[o], current(g))
        if servers is not None:
            out[g] = (o, servers)
    for o in np.argsort(-value, kind="stable").tolist():
        g = int(group[o])
        if g in out or value[o] <= 0 or sum(k for _, k in sigs[o]) > left.sum():
            continue
        servers = place_signature(classes, left, sigs[o], current(g))
        if servers is not None:
            out[g] = (o, servers)
    return out


def slowest_piece(classes: ServerClasses, job: int, sigs: list[Signature], gains: np.ndarray) -> np.ndarray:
    """Throughputs of signatures for window job ``job`` from the type's (``gains``, samples/s) and the classes'
    profiles: as the estimator prices a configuration, its slowest piece's per-GPU throughput times its GPUs,
    a class answering with its profile where it has an answer for the job and as the type elsewhere. Only
    signatures with a piece on a class that answers for the job (:meth:`ServerClasses.answering`) differ
    from the type's."""
    out = np.array(gains, dtype=float)
    answering = classes.answering(job)
    if not answering:
        return out
    for o, sig in enumerate(sigs):
        if not any(c in answering for c, _ in sig):
            continue
        total = sum(k for _, k in sig)
        kind, key = (AGGREGATED, total) if len(sig) == 1 else (DISTRIBUTED, len(sig))
        answers = [classes.profile[c].get((job, kind, key)) for c, _ in sig]
        if any(a is not None for a in answers):
            type_per_gpu = out[o] / total
            out[o] = min(type_per_gpu if a is None else a[0] for a in answers) * total
    return out
