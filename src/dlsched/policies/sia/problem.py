"""Building Sia's optimisation problem: candidate (job, configuration) options and their values.

Section 3.3.4: ``G[i, c]`` is the estimated goodput of job ``i`` on configuration ``c`` (throughput for
strong-scaling and rigid jobs, whose batch size is fixed), scaled so that each row's minimum over all the
job's configurations equals its smallest GPU count ``N_min``. Choosing ``c`` costs ``(r G)^p`` (restart factor
``r``, fairness exponent ``p``) and leaving the job without GPUs costs ``lambda_``. For ``p < 0`` Sia minimises
``sum A (r G)^p + lambda (1 - |A|)``, for ``p > 0`` it maximises ``sum A (r G)^p - lambda (1 - |A|)``; either
way the problem handed to the solver is *maximise the sum of option values* with value ``lambda - (rG)^p``
(``p < 0``) or ``(rG)^p + lambda``, and options with a non-positive value are dropped. (The printed eq. 3.4
writes ``+ lambda`` in the maximisation; the penalty reading, which the text describes and the artifact code
implements through its sign convention, is used for both signs.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dlsched.core import Adaptivity, ClusterView, JobView
from dlsched.estimators.base import GoodputEstimator
from dlsched.policies.sia.configs import ConfigSet

#: Value of keeping a running job's configuration over an equal alternative: far below any difference in
#: ``lambda - (rG)^p`` worth a restart (Sia's artifact rounds that cost to 0.01 before solving), far above the
#: MILP's optimality gap (1e-6 relative), so ties go to the current configuration and nothing else changes.
STAY_BONUS = 1e-4


def option_values(G: np.ndarray, r: np.ndarray, lam: np.ndarray, p: float) -> np.ndarray:
    """Per-option value for the maximisation: ``lam - (rG)^p`` if ``p < 0`` else ``(rG)^p + lam``."""
    base = np.maximum(r * G, 1e-9)
    tv = np.power(base, p)
    return lam - tv if p < 0 else tv + lam


@dataclass(frozen=True)
class Candidates:
    """A job's possible configurations: parallel arrays plus, per GPU type, the shapes to ask the estimator."""

    o_t: np.ndarray
    o_k: np.ndarray
    o_n: np.ndarray
    segments: list[tuple[int, str, np.ndarray]]
    rigid: bool


def candidates_of(cs: ConfigSet, job: JobView) -> Candidates | None:
    """The configurations a job may ever use: its accepted types, GPU range and unit (eq. 3.5 for rigid
    jobs: exactly their GPU count, only the type is chosen)."""
    spec = job.spec
    allowed_t = np.array([spec.allows_gpu_type(t) for t in cs.type_names], dtype=bool)
    if spec.adaptivity is Adaptivity.RIGID or spec.gpu_counts:
        # rigid jobs: exactly their count; jobs with a requirement set (Hops): a configuration for each
        # requirement, as the Hops paper ran Sia (section 4.2), whole nodes plus a partial one beyond a node
        counts = np.array(spec.requirement_set(), dtype=np.int64)
        grid_t, grid_k = np.meshgrid(np.arange(len(cs.type_names)), counts, indexing="ij")
        tt, kk = grid_t.ravel(), grid_k.ravel()
        keep = allowed_t[tt] & (cs.capacity[tt] >= kk)
        o_t, o_k = tt[keep].astype(np.int64), kk[keep].astype(np.int64)
        o_n = np.where(o_k <= cs.node_size[o_t], 1, -(-o_k // cs.node_size[o_t])).astype(np.int64)
    else:
        m = allowed_t[cs.type_idx] & (cs.gpus >= spec.lower_gpus) & (cs.gpus <= spec.upper_gpus)
        if spec.gpu_unit > 1:
            m &= cs.gpus % spec.gpu_unit == 0
        m &= cs.gpus <= cs.capacity[cs.type_idx]
        idx = np.nonzero(m)[0]
        o_t, o_k, o_n = cs.type_idx[idx], cs.gpus[idx], cs.nodes[idx]
    if len(o_t) == 0:
        return None
    segs = []
    for ti in np.unique(o_t).tolist():
        sel = np.nonzero(o_t == ti)[0]
        shapes = np.ascontiguousarray(np.stack([o_n[sel], o_k[sel]], axis=1))
        segs.append((ti, cs.type_names[ti], shapes))
    return Candidates(o_t=o_t, o_k=o_k, o_n=o_n, segments=segs, rigid=spec.adaptivity is Adaptivity.RIGID)


@dataclass
class Options:
    """The round's candidate (job, configuration) pairs, contiguous per job."""

    jobs: list[JobView]
    job_of: np.ndarray
    type_idx: np.ndarray
    nodes: np.ndarray
    gpus: np.ndarray
    value: np.ndarray
    forced: np.ndarray
    G: np.ndarray

    @classmethod
    def empty(cls) -> Options:
        e = np.zeros(0)
        ei = np.zeros(0, dtype=np.int64)
        return cls([], ei, ei, ei, ei, e, np.zeros(0, dtype=bool), e)


@dataclass(frozen=True)
class Objective:
    """The knobs of the objective that shape option values."""

    p: float
    lambda_: float
    max_doubling: bool
    time_varying: bool
    #: Added to the value of a running job's current configuration, so that among options of equal value the
    #: solver keeps what runs (:data:`STAY_BONUS`, or 0 to leave ties to the solver).
    stay_bonus: float = 0.0


@dataclass(frozen=True)
class RoundInputs:
    """What the problem needs to know about one round beyond the jobs' goodputs."""

    view: ClusterView
    cs: ConfigSet
    cur_config: dict[str, tuple[int, int, int]]
    forced_ids: set[str]
    capacity: np.ndarray
    #: Per job, the GPU count whose double caps its growth this round (``max_doubling``); jobs not named
    #: use their current count.
    growth_base: dict[str, int] | None = None


def build_options(inp: RoundInputs, jobs: list[JobView], est: GoodputEstimator,
                  candidates: Callable[[JobView], Candidates | None], explore: Callable[[JobView, str], bool],
                  restart: Callable[[JobView], float],
                  penalties: Callable[[list[JobView], bool], np.ndarray], obj: Objective) -> Options:
    """Candidate options with their values, vectorised over all jobs.

    Only the estimator queries loop over jobs and GPU types; normalisation, the doubling limit, restart
    factors and the objective transform run on flat arrays.
    """
    cs = inp.cs
    ntypes = len(cs.type_names)
    big = np.iinfo(np.int64).max
    used: list[JobView] = []
    t_parts, k_parts, n_parts, g_parts, unk_parts, sizes = [], [], [], [], [], []
    now, cur_t, cur_k, rigid = [], [], [], []
    for job in jobs:
        cand = candidates(job)
        if cand is None:
            continue
        # Every allowed shape is asked for, not only those under the doubling limit: the row minimum that
        # normalises G is taken over all configurations (section 3.3.4), often a poor multi-node one, and
        # a stable set of shapes keeps the estimator's cache warm.
        off = 0
        n_job = 0
        for _ti, tname, shapes in cand.segments:
            m = len(shapes)
            vals = np.asarray(est.goodput_many(job, tname, shapes), dtype=float)
            unk = np.zeros(m, dtype=bool)
            if not (vals > 0).any() and explore(job, tname):
                unk[0] = True  # unknown type: its smallest configuration, at the lowest utility
            t_parts.append(cand.o_t[off:off + m])
            k_parts.append(cand.o_k[off:off + m])
            n_parts.append(cand.o_n[off:off + m])
            g_parts.append(vals)
            unk_parts.append(unk)
            n_job += m
            off += m
        used.append(job)
        sizes.append(n_job)
        c = inp.cur_config.get(job.job_id)
        now.append(len(job.placement) if inp.growth_base is None else inp.growth_base.get(job.job_id, len(job.placement)))
        cur_t.append(-1 if c is None else c[0])
        cur_k.append(-1 if c is None else c[2])
        rigid.append(cand.rigid)
    if not used:
        return Options.empty()
    cat = np.concatenate
    o_t, o_k, o_n = cat(t_parts), cat(k_parts), cat(n_parts)
    g, unk = cat(g_parts), cat(unk_parts)
    g = np.where(np.isfinite(g), g, 0.0)
    nj = len(used)
    sizes_a = np.array(sizes, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes_a)[:-1]])
    grp = np.repeat(np.arange(nj), sizes_a)
    now_a = np.array(now, dtype=np.int64)
    cur_t_a, cur_k_a = np.array(cur_t, dtype=np.int64), np.array(cur_k, dtype=np.int64)
    rigid_a = np.array(rigid, dtype=bool)
    # normalised goodput: G <- N_min * G / min_c G, the minimum over every configuration the job may use and
    # N_min its smallest GPU count, so each row's least useful option is worth N_min
    pos = g > 0
    usable = pos | unk
    gmin = np.minimum.reduceat(np.where(pos, g, np.inf), starts)
    nmin = np.minimum.reduceat(np.where(usable, o_k, big), starts).astype(float)
    known = np.isfinite(gmin)
    scale = np.where(known, nmin / np.where(known, gmin, 1.0), 0.0)
    G = np.where(pos, g * scale[grp], 0.0)
    # unknown types sit at the row's lowest utility, N_min; with nothing known at all, a whisker of
    # preference for the faster types breaks the ties
    whisker = np.where(known[grp], 1.0, 1.0 + 1e-3 * o_t / max(1, ntypes))
    G = np.where(unk, nmin[grp] * whisker, G)
    keep = G > 0
    # doubling limit: at most twice the current GPU count, but always each type's smallest option and the
    # job's next count above the current one (a requirement set such as {1, 4, 16} has no count at double
    # the current; without this step the job could never grow)
    if obj.max_doubling:
        seg_new = np.ones(len(o_t), dtype=bool)
        seg_new[1:] = (grp[1:] != grp[:-1]) | (o_t[1:] != o_t[:-1])
        seg_starts = np.nonzero(seg_new)[0]
        seg_id = np.cumsum(seg_new) - 1
        smallest = np.minimum.reduceat(np.where(keep, o_k, big), seg_starts)[seg_id]
        next_up = np.minimum.reduceat(np.where(keep & (o_k > now_a[grp]), o_k, big), starts)[grp]
        cap = np.maximum(np.maximum(2 * now_a[grp], smallest), np.where(next_up < big, next_up, 0))
        keep &= (o_k <= cap) | rigid_a[grp]
    is_cur = (o_t == cur_t_a[grp]) & (o_k == cur_k_a[grp])
    keep |= is_cur & (G > 0)
    # restart factor on every configuration but the current one, for running jobs
    r_job = np.array([restart(j) if j.placement else 1.0 for j in used])
    r = np.where(is_cur, 1.0, r_job[grp])
    min_need = np.minimum.reduceat(np.where(keep, o_k, big), starts)
    congested = int(min_need[min_need < big].sum()) > int(inp.capacity.sum())
    lam_job = penalties(used, congested)
    value = option_values(G, r, lam_job[grp], obj.p) + np.where(is_cur, obj.stay_bonus, 0.0)
    if obj.time_varying and congested:
        lowered = lam_job[grp] < obj.lambda_
        floor = 1e-4 * np.power(np.maximum(r * G, 1e-9), abs(obj.p))
        value = np.where(lowered, np.maximum(value, floor), value)
    forced_jobs = np.array([j.job_id in inp.forced_ids for j in used], dtype=bool)
    forced = is_cur & forced_jobs[grp] & (G > 0)
    keep &= (value > 0) | forced
    keep &= ~(forced_jobs[grp] & ~forced)  # a forced job keeps only its current option
    idx = np.nonzero(keep)[0]
    has = np.bincount(grp[idx], minlength=nj) > 0
    new_id = np.cumsum(has) - 1
    jobs_kept = [j for j, h in zip(used, has.tolist(), strict=True) if h]
    return Options(jobs=jobs_kept, job_of=new_id[grp[idx]], type_idx=o_t[idx], nodes=o_n[idx],
                   gpus=o_k[idx], value=value[idx], forced=forced[idx], G=G[idx])
