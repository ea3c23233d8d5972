"""Turn a run's records into the numbers schedulers are compared on.

Everything here is a pure function of :class:`JobRecord` / :class:`RoundRecord` lists so that metrics can be
recomputed from saved runs, tested on hand-made records, and averaged over seeds without the engine.
Every value :func:`summarize` returns is a plain ``int``/``float``/``None`` so a summary can be dumped
to JSON as-is (numpy scalars are not JSON-serialisable).

Definitions follow the Sia thesis (chapter 3) where it defines them: JCT statistics, makespan, GPU hours
per job, restarts per job, finish-time fairness (eq. 3.6, section 3.5.5) with its worst value and the
unfair-job fraction (rho > 1), plus the Hops latency ratio.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal, get_args, overload

import numpy as np
import pandas as pd

from dlsched.sim.records import JobRecord, RoundRecord

__all__ = [
    "SUMMARY_KEYS",
    "JOB_COLUMNS",
    "ROUND_COLUMNS",
    "ContentionProfile",
    "FTF_READINGS",
    "FtfDefinition",
    "average_contention",
    "average_summaries",
    "fair_share_gpus",
    "finish_time_fairness",
    "ftf_readings",
    "isolated_start_s",
    "time_sliced_runtime_s",
    "jobs_frame",
    "rounds_frame",
    "summarize",
]

#: Window of the recent average queue latency ratio (Hops eq. 7): jobs that finished in the last hour.
RAQLR_WINDOW_S = 3600.0


def raqlr_series(jobs: Sequence[JobRecord], window_s: float = RAQLR_WINDOW_S) -> list[float]:
    """Hops's recent average queue latency ratio (eq. 7) at every job completion: the mean latency ratio of
    the jobs that finished within the ``window_s`` before it (the finishing job included)."""
    done = sorted((j.finish_s, j.latency_ratio) for j in jobs
                  if j.finish_s is not None and j.latency_ratio is not None)
    out: list[float] = []
    lo, total = 0, 0.0
    for hi, (t, lr) in enumerate(done):
        total += lr
        while done[lo][0] < t - window_s:
            total -= done[lo][1]
            lo += 1
        out.append(total / (hi - lo + 1))
    return out


#: Keys of :func:`summarize`'s result, in the order reports and CSVs show them.
SUMMARY_KEYS: tuple[str, ...] = (
    "jobs",
    "completed",
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "makespan_s",
    "avg_wait_s",
    "avg_queue_wait_s",
    "gpu_hours_per_job",
    "utilization",
    "restarts_per_job",
    "checkpoint_restores_per_job",
    "ftf_max",
    "ftf_unfair_frac",
    "latency_ratio_max",
    "latency_ratio_avg",
    "latency_ratio_best_max",
    "latency_ratio_submit_max",
    "latency_ratio_submit_avg",
    "raqlr",
    "raqlr_max",
    "fragments_per_round",
    "fragments_waiting_per_round",
    "deadline_met_frac",
    "policy_time_median_s",
    "policy_time_p99_s",
    "sim_wall_s",
)

#: Fixed columns of :func:`jobs_frame` (``gpu_s_<type>`` columns follow, one per GPU type seen).
JOB_COLUMNS: tuple[str, ...] = (
    "job_id", "model", "user", "adaptivity", "requested_gpus", "submit_s", "start_s", "finish_s", "jct_s",
    "wait_s", "gpu_s", "restarts", "moves", "restart_gpu_s", "deadline_s", "ideal_runtime_s", "ftf",
    "latency_ratio", "queue_wait_s", "latency_ratio_submit",
)

#: Fixed columns of :func:`rounds_frame` (``gpus_<type>`` columns follow, one per GPU type seen).
ROUND_COLUMNS: tuple[str, ...] = (
    "round", "time_s", "allocated_gpus", "idle_gpus", "fragments", "queue_len", "running_jobs", "active_jobs",
    "policy_s", "restarts", "profiling_jobs", "awaiting_profile",
)

#: Slack when comparing a finish time to a deadline, so float noise in the engine's clock does not turn a
#: job that finished exactly at its deadline into a miss.
_DEADLINE_EPS_S = 1e-6


# ----------------------------------------------------------------------------------------------- helpers


def _f(x: float | np.floating | None) -> float | None:
    """A plain Python float (or None): summaries must be JSON-serialisable, numpy scalars are not."""
    return None if x is None else float(x)


def _mean(values: Sequence[float] | np.ndarray) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _pct(values: Sequence[float] | np.ndarray, q: float) -> float | None:
    """Percentile with numpy's default linear interpolation; None for no data."""
    return float(np.percentile(values, q)) if len(values) else None


def _round_lengths(times: np.ndarray) -> np.ndarray:
    """How long each round's state held: until the next round; the last round gets the median length.

    The engine does not record when the final round ends, and the median interval is the best guess that
    is not thrown off by an idle gap in the trace.
    """
    if len(times) == 0:
        return np.zeros(0)
    if len(times) == 1:
        return np.zeros(1)
    gaps = np.diff(times)
    return np.append(gaps, float(np.median(gaps)))


# ---------------------------------------------------------------------------------- finish-time fairness


#: Fair share of each type's GPUs: ``type`` = N_g / N_avg (the thesis's text: rho_g is "computed ... only for the
#: N_g GPUs of type g"); ``cluster`` = N_total / N_avg GPUs of every type, at most N_g (the Sia artifact's
#: ``ftf_simulator.py`` sizes each type's isolated cluster from the whole cluster's GPU count).
FtfShare = Literal["type", "cluster"]
#: How per-type results combine: ``ratio`` = sum_g P(g) T_shared / T_g (eq. 3.6, an expectation of ratios);
#: ``time`` = T_shared / sum_g P(g) T_g (the artifact averages the isolated JCTs, then divides).
FtfCombine = Literal["ratio", "time"]
#: The isolated time: ``ideal`` = the job alone on its fair share in its best configuration (shape and batch
#: size from the truth) from the moment it is submitted; ``started`` adds what any run under a round-based
#: scheduler pays before its first step even alone: the wait for the next round, the profiling the run did
#: and one checkpoint-restore delay (the artifact simulates the job alone under the same scheduler, which pays
#: these and more).
FtfIsolated = Literal["ideal", "started"]
FTF_SHARES: tuple[str, ...] = get_args(FtfShare)
FTF_COMBINES: tuple[str, ...] = get_args(FtfCombine)
FTF_ISOLATED: tuple[str, ...] = get_args(FtfIsolated)


@dataclass(frozen=True, slots=True)
class FtfDefinition:
    """Which reading of finish-time fairness a run reports (``RunConfig.ftf``); defaults follow the thesis's text."""

    share: FtfShare = "type"
    combine: FtfCombine = "ratio"
    isolated: FtfIsolated = "ideal"

    def __post_init__(self) -> None:
        for name, known in (("share", FTF_SHARES), ("combine", FTF_COMBINES), ("isolated", FTF_ISOLATED)):
            if getattr(self, name) not in known:
                raise ValueError(f"ftf.{name} must be one of {', '.join(known)}, got {getattr(self, name)!r}")

    @property
    def label(self) -> str:
        """``share/combine/isolated``: the key of this reading in a summary's ``ftf_readings``."""
        return f"{self.share}/{self.combine}/{self.isolated}"


#: Every reading of eq. 3.6 a run reports at once (the metric is cheap; the simulation is not), so comparing
#: readings needs one run, not one per reading.
FTF_READINGS: tuple[FtfDefinition, ...] = tuple(
    FtfDefinition(share=s, combine=c, isolated=i)  # type: ignore[arg-type]
    for s in FTF_SHARES for c in FTF_COMBINES for i in FTF_ISOLATED)


def fair_share_gpus(gpus_by_type: Mapping[str, int], n_avg: float, share: FtfShare = "type") -> dict[str, float]:
    """GPUs of each type in a job's isolated, fair-sized cluster (``n_avg`` = its average contention, >= 1).

    ``type``: ``N_g / n_avg``. ``cluster``: ``N_total / n_avg``, capped at ``N_g`` (no more GPUs of a type than
    the cluster has).
    """
    if not n_avg >= 1.0:
        raise ValueError(f"average contention must be at least 1, got {n_avg!r}")
    if share == "type":
        return {g: n / n_avg for g, n in gpus_by_type.items()}
    if share == "cluster":
        total = sum(gpus_by_type.values())
        return {g: min(float(n), total / n_avg) for g, n in gpus_by_type.items()}
    raise ValueError(f"unknown fair share {share!r} (known: {', '.join(FTF_SHARES)})")


def time_sliced_runtime_s(runtime_at: Callable[[int], float], gpus: float) -> float:
    """Run time on a fractional number of GPUs: ``k = floor(gpus)`` GPUs all the time and one more GPU for the
    fraction ``f = gpus - k`` of the time (time-slicing), so the rate is ``(1 - f) / T(k) + f / T(k + 1)``.

    ``runtime_at(k)`` is the run time alone on ``k`` whole GPUs (``inf`` where the job cannot run). Below one
    GPU this is ``T(1) / gpus``; on whole GPUs it is ``T(k)``; in between it is continuous and never slower
    than on fewer GPUs, unlike rounding the share down.
    """
    if not gpus > 0:
        return math.inf
    k = math.floor(gpus)
    f = gpus - k
    if f < 1e-9:
        return float(runtime_at(k))
    rate_k = 0.0 if k == 0 else 1.0 / runtime_at(k)
    rate = (1.0 - f) * rate_k + f / runtime_at(k + 1)
    return math.inf if rate <= 0 else 1.0 / rate


def isolated_start_s(submit_s: float, round_s: float, profile_s: float = 0.0, restart_delay_s: float = 0.0) -> float:
    """Seconds from submission to a job's first training step when it is alone under a round-based scheduler.

    It waits for the next round (rounds start at multiples of ``round_s``), is profiled for ``profile_s`` if
    the scheduler profiles (the job then starts at the first round after profiling ends), and pays one
    checkpoint-restore delay when it starts.
    """
    if not round_s > 0:
        raise ValueError(f"round length must be positive, got {round_s!r}")
    first = math.ceil(submit_s / round_s - 1e-9) * round_s
    start = math.ceil((first + profile_s) / round_s - 1e-9) * round_s if profile_s > 0 else first
    return start - submit_s + restart_delay_s


def finish_time_fairness(jct_s: float, isolated_s_by_type: Mapping[str, float],
                         gpus_by_type: Mapping[str, int], *, combine: FtfCombine = "ratio") -> float | None:
    """Heterogeneous finish-time fairness rho (Sia thesis eq. 3.6, section 3.5.5).

    ``rho = sum_g (N_g / N_total) * T_shared / T_isolated_g`` where ``T_shared = jct_s`` is the job's
    completion time in the shared cluster (submission to finish: waiting included) and ``T_isolated_g``
    (``isolated_s_by_type[g]``) its completion time alone on a fair share of the type-``g`` GPUs (see
    :func:`fair_share_gpus`, :func:`time_sliced_runtime_s`). The caller computes ``T_isolated_g`` because
    only it knows the job's throughput model; this function only does the weighting, so it stays testable.
    ``combine="time"`` gives the Sia artifact's ``T_shared / sum_g (N_g / N_total) * T_isolated_g`` instead.

    Types where the isolated time is infinite (the job cannot run there: too little memory, fair share
    below its minimum size), types missing from ``isolated_s_by_type`` and types with no GPUs are left out
    and the remaining weights renormalised: the paper's expectation over "a random GPU" only makes sense
    over GPUs the job could have used (the artifact drops such types too).

    Returns None when no type is usable (say a job whose fair share is below its scale-out unit on every
    type): its fair-share time is undefined, which is a fact about the job, not an error in the run. Raises
    ValueError only for impossible inputs (a negative JCT, a non-positive isolated time).
    """
    if jct_s < 0 or math.isnan(jct_s):
        raise ValueError(f"jct_s must be a non-negative number, got {jct_s!r}")
    if combine not in FTF_COMBINES:
        raise ValueError(f"unknown combination {combine!r} (known: {', '.join(FTF_COMBINES)})")
    weights: list[float] = []
    times: list[float] = []
    for gtype, t_iso in isolated_s_by_type.items():
        n = gpus_by_type.get(gtype, 0)
        if n <= 0 or math.isinf(t_iso) or math.isnan(t_iso):
            continue
        if t_iso <= 0:
            raise ValueError(f"isolated time on {gtype!r} must be positive, got {t_iso!r}")
        weights.append(float(n))
        times.append(t_iso)
    if not weights:
        return None
    w = np.array(weights) / sum(weights)
    t = np.array(times)
    if combine == "time":
        return float(jct_s / float(w @ t))
    return float(w @ (jct_s / t))


@dataclass(frozen=True, slots=True)
class ContentionProfile:
    """Number of active jobs as a step function of time, with its running integral for O(log R) averages.

    The engine needs ``N_avg`` for every finished job; re-scanning all rounds per job would be
    O(jobs x rounds), which is minutes for 10,000-job traces. Build this once with :meth:`from_rounds` and
    call :meth:`average` per job (or with arrays for all jobs at once).

    Round ``i``'s ``active_jobs`` holds on ``[time_s[i], time_s[i+1])``; the last round's value holds
    forever after and the first round's value is used before the first round (nothing else is known).
    """

    times: np.ndarray
    values: np.ndarray
    #: cum[i] = integral of the step function from times[0] to times[i].
    cum: np.ndarray

    @classmethod
    def from_rounds(cls, rounds: Iterable[RoundRecord]) -> ContentionProfile:
        pairs = sorted((r.time_s, r.active_jobs) for r in rounds)
        times = np.array([p[0] for p in pairs], dtype=float)
        values = np.array([p[1] for p in pairs], dtype=float)
        cum = np.concatenate([[0.0], np.cumsum(values[:-1] * np.diff(times))]) if len(times) else times
        return cls(times=times, values=values, cum=cum)

    def _integral(self, t: np.ndarray) -> np.ndarray:
        """Integral of the step function from times[0] to t (negative before times[0])."""
        idx = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, None)
        return self.cum[idx] + self.values[idx] * (t - self.times[idx])

    def _value_at(self, t: np.ndarray) -> np.ndarray:
        idx = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, None)
        return self.values[idx]

    @overload
    def average(self, start_s: float, end_s: float) -> float: ...

    @overload
    def average(self, start_s: float | np.ndarray, end_s: float | np.ndarray) -> float | np.ndarray: ...

    def average(self, start_s: float | np.ndarray, end_s: float | np.ndarray) -> float | np.ndarray:
        """Time-weighted mean of active jobs over ``[start_s, end_s]``, never below 1.

        At least 1 because the job being measured is itself contending; a zero would make its fair share
        infinite. An empty interval (``end_s <= start_s``) gives the value at ``start_s``.
        """
        scalar = np.ndim(start_s) == 0 and np.ndim(end_s) == 0
        start = np.atleast_1d(np.asarray(start_s, dtype=float))
        end = np.atleast_1d(np.asarray(end_s, dtype=float))
        if len(self.times) == 0:
            out = np.ones(np.broadcast(start, end).shape)
        else:
            span = end - start
            with np.errstate(divide="ignore", invalid="ignore"):
                mean = (self._integral(end) - self._integral(start)) / span
            out = np.where(span > 0, mean, self._value_at(start))
            out = np.maximum(out, 1.0)
        return float(out[0]) if scalar else out


def average_contention(rounds: Sequence[RoundRecord], start_s: float, end_s: float) -> float:
    """Time-weighted mean of ``RoundRecord.active_jobs`` over ``[start_s, end_s]`` (at least 1).

    This is ``N_avg`` in finish-time fairness: the fair share of a job is ``N_g / N_avg`` GPUs. Each
    round's count holds until the next round. For many jobs build a :class:`ContentionProfile` once instead.
    """
    return float(ContentionProfile.from_rounds(rounds).average(start_s, end_s))


# --------------------------------------------------------------------------------------------- summarize


def _utilization(jobs: Sequence[JobRecord], rounds: Sequence[RoundRecord], num_gpus: int,
                 first_submit: float, last_finish: float) -> float | None:
    """Fraction of GPU capacity held by jobs during the makespan window.

    When every job finished, the numerator is the jobs' own GPU-seconds (``JobRecord.gpu_s``, restarts
    included): the engine accounts those exactly, including jobs that finish part-way through a round,
    whereas a round record's ``allocated_gpus`` times the round length over-counts such partial rounds.
    All of a finished job's GPU time lies between its submit and finish, so it all falls in the window.
    A GPU shared by two packed jobs is held once: half of each job's ``shared_gpu_s`` is removed.

    When some jobs never finished, their GPU-seconds can lie after the last finish, outside the window, so
    we integrate ``RoundRecord.allocated_gpus`` (each round held until the next) over the window instead.
    """
    makespan = last_finish - first_submit
    if num_gpus <= 0 or makespan <= 0:
        return None
    if all(j.finish_s is not None for j in jobs) or not rounds:
        # a GPU two packed jobs share is in both jobs' gpu_s (at most two workers per GPU): count it once
        used = sum(j.gpu_s - 0.5 * j.shared_gpu_s for j in jobs)
    else:
        times = np.array([r.time_s for r in rounds], dtype=float)
        order = np.argsort(times, kind="stable")
        times = times[order]
        alloc = np.array([r.allocated_gpus for r in rounds], dtype=float)[order]
        ends = times + _round_lengths(times)
        overlap = np.clip(np.minimum(ends, last_finish) - np.maximum(times, first_submit), 0.0, None)
        used = float(np.sum(alloc * overlap))
    return float(used / (num_gpus * makespan))


def ftf_readings(jobs: Sequence[JobRecord]) -> dict[str, dict[str, float | None]]:
    """Worst rho and unfair fraction of the finished jobs under every reading of eq. 3.6.

    ``FtfDefinition.label`` -> ``{"ftf_max", "ftf_unfair_frac"}``, from each record's ``ftf_by_reading``: one
    run answers for every reading (the run's summary keeps the chosen one as ``ftf_max`` / ``ftf_unfair_frac``).
    """
    done = [j for j in jobs if j.finish_s is not None]
    out: dict[str, dict[str, float | None]] = {}
    for reading in FTF_READINGS:
        vals = [v for j in done if (v := j.ftf_by_reading.get(reading.label)) is not None]
        out[reading.label] = {"ftf_max": _f(max(vals)) if vals else None,
                              "ftf_unfair_frac": float(sum(1 for x in vals if x > 1.0) / len(vals)) if vals else None}
    return out


def summarize(jobs: list[JobRecord], rounds: list[RoundRecord], *, num_gpus: int,
              sim_wall_s: float) -> dict[str, Any]:
    """One run's headline metrics, keyed by :data:`SUMMARY_KEYS` (in that order).

    Conventions, chosen so that a partial run (some jobs unfinished at the horizon) still summarises:

    * JCT statistics, ``makespan_s`` and ``ftf_*`` cover completed jobs only; they are None when no job
      completed. ``makespan_s`` = last finish - first submit (first submit over all jobs).
    * ``avg_wait_s``, ``gpu_hours_per_job`` and ``restarts_per_job`` average over all jobs, since unfinished
      jobs did wait, use GPUs and restart. ``gpu_hours_per_job`` uses ``JobRecord.gpu_s``, which already
      includes checkpoint-restore GPU time (Sia counts that as spent GPU hours).
    * ``restarts_per_job`` counts restarts as the Sia thesis and its artifact's simulator do: a later
      placement whose GPU type or per-node GPU counts differ from the one before, a resume after preemption
      included; a move to other GPUs of the same type and shape is not one. ``checkpoint_restores_per_job``
      counts every checkpoint-restore the engine charges, those moves included.
    * ``utilization``: see :func:`_utilization` (jobs' GPU-seconds when all finished, else the rounds).
    * ``ftf_unfair_frac`` = share of completed jobs *with an ftf value* whose rho > 1 (Sia's unfair job
      fraction); ``latency_ratio_*`` over jobs with a latency ratio (Hops eqs. 6 and 9: the wait in the
      waiting queue, ``JobRecord.queue_wait_s``, over the run time expected over GPU types at the mean
      requirement); ``latency_ratio_best_max`` is the largest such wait over the best type's run time at the
      request; ``latency_ratio_submit_*`` count the wait from submission instead (``wait_s``, the earlier
      definition); None when there are none. ``avg_queue_wait_s`` averages ``queue_wait_s`` over all jobs.
    * ``fragments_per_round``: idle GPUs after a round's first plan while any job is not running (jobs being
      profiled or waiting for their profile included); ``fragments_waiting_per_round``: the Hops paper's
      count, idle GPUs while a job of the waiting queue is unassigned (``RoundRecord.fragments_waiting``).
    * ``raqlr`` and ``raqlr_max``: mean and largest of Hops's recent average queue latency ratio
      (:func:`raqlr_series`, window :data:`RAQLR_WINDOW_S`) over the completions; None without any.
    * ``deadline_met_frac`` = share of jobs with a deadline that finished by it (an unfinished job missed
      it); None when no job has a deadline so "no deadlines" is not mistaken for "all met".
    * Percentiles use numpy's default linear interpolation.
    """
    n_jobs = len(jobs)
    done = [j for j in jobs if j.finish_s is not None]
    jcts = np.array([j.finish_s - j.submit_s for j in jobs if j.finish_s is not None], dtype=float)

    makespan: float | None = None
    utilization: float | None = None
    if done:
        first_submit = min(j.submit_s for j in jobs)
        last_finish = max(j.finish_s for j in jobs if j.finish_s is not None)
        makespan = float(last_finish - first_submit)
        utilization = _utilization(jobs, rounds, num_gpus, first_submit, last_finish)

    ftfs = [j.ftf for j in done if j.ftf is not None]
    lrs = [j.latency_ratio for j in jobs if j.latency_ratio is not None]
    lrs_best = [j.latency_ratio_best for j in jobs if j.latency_ratio_best is not None]
    lrs_submit = [j.latency_ratio_submit for j in jobs if j.latency_ratio_submit is not None]
    queue_waits = [j.wait_s if j.queue_wait_s is None else j.queue_wait_s for j in jobs]
    raqlr = raqlr_series(jobs, RAQLR_WINDOW_S)
    with_deadline = [j for j in jobs if j.deadline_s is not None]
    met = sum(1 for j in with_deadline
              if j.finish_s is not None and j.deadline_s is not None and j.finish_s <= j.deadline_s + _DEADLINE_EPS_S)
    policy = np.array([r.policy_s for r in rounds], dtype=float)

    out: dict[str, Any] = {
        "jobs": n_jobs,
        "completed": len(done),
        "avg_jct_s": _mean(jcts),
        "p50_jct_s": _pct(jcts, 50),
        "p99_jct_s": _pct(jcts, 99),
        "makespan_s": makespan,
        "avg_wait_s": _mean([j.wait_s for j in jobs]),
        "avg_queue_wait_s": _mean(queue_waits),
        "gpu_hours_per_job": float(sum(j.gpu_s for j in jobs) / 3600.0 / n_jobs) if n_jobs else None,
        "utilization": utilization,
        "restarts_per_job": float(sum(j.restarts - j.moves for j in jobs) / n_jobs) if n_jobs else None,
        "checkpoint_restores_per_job": float(sum(j.restarts for j in jobs) / n_jobs) if n_jobs else None,
        "ftf_max": _f(max(ftfs)) if ftfs else None,
        "ftf_unfair_frac": float(sum(1 for x in ftfs if x > 1.0) / len(ftfs)) if ftfs else None,
        "latency_ratio_max": _f(max(lrs)) if lrs else None,
        "latency_ratio_avg": _mean(lrs),
        "latency_ratio_best_max": _f(max(lrs_best)) if lrs_best else None,
        "latency_ratio_submit_max": _f(max(lrs_submit)) if lrs_submit else None,
        "latency_ratio_submit_avg": _mean(lrs_submit),
        "raqlr": _mean(raqlr) if raqlr else None,
        "raqlr_max": _f(max(raqlr)) if raqlr else None,
        "fragments_per_round": _mean([r.fragments for r in rounds]),
        "fragments_waiting_per_round": _mean([r.fragments_waiting for r in rounds]),
        "deadline_met_frac": float(met / len(with_deadline)) if with_deadline else None,
        "policy_time_median_s": _pct(policy, 50),
        "policy_time_p99_s": _pct(policy, 99),
        "sim_wall_s": float(sim_wall_s),
    }
    assert tuple(out) == SUMMARY_KEYS
    return out


def _is_number(x: object) -> bool:
    """Numbers to average: ints and floats (numpy included) but not bools, which are flags, not counts."""
    return isinstance(x, Real) and not isinstance(x, bool | np.bool_)


def average_summaries(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of each numeric key over several seeds' summaries.

    A None (metric undefined for that seed, e.g. no job completed) is skipped rather than counted as 0,
    and the mean is None only when every seed has None. Counts such as ``jobs`` become float means.
    Non-numeric values (labels, policy names) are taken from the first summary that has the key. Key order
    follows the first summary, then keys first seen later.
    """
    if not summaries:
        return {}
    keys: list[str] = []
    for s in summaries:
        keys.extend(k for k in s if k not in keys)
    out: dict[str, Any] = {}
    for k in keys:
        present = [s[k] for s in summaries if k in s]
        numeric = [float(v) for v in present if _is_number(v)]
        if numeric:
            out[k] = float(np.mean(numeric))
        elif all(v is None for v in present):
            out[k] = None
        else:
            out[k] = next(v for v in present if v is not None)
    return out


# --------------------------------------------------------------------------------------------- frames


def jobs_frame(jobs: Sequence[JobRecord]) -> pd.DataFrame:
    """One row per job with :data:`JOB_COLUMNS` plus ``gpu_s_<type>`` per GPU type seen (0 if unused).

    For analysis and CSV export; GPU types are sorted by name so columns are stable across runs.
    """
    types = sorted({t for j in jobs for t in j.gpu_s_by_type})
    rows = []
    for j in jobs:
        row: dict[str, Any] = {
            "job_id": j.job_id, "model": j.model, "user": j.user, "adaptivity": j.adaptivity,
            "requested_gpus": j.requested_gpus, "submit_s": j.submit_s, "start_s": j.start_s,
            "finish_s": j.finish_s, "jct_s": j.jct_s, "wait_s": j.wait_s, "gpu_s": j.gpu_s,
            "restarts": j.restarts, "moves": j.moves, "restart_gpu_s": j.restart_gpu_s, "deadline_s": j.deadline_s,
            "ideal_runtime_s": j.ideal_runtime_s, "ftf": j.ftf, "latency_ratio": j.latency_ratio,
            "queue_wait_s": j.queue_wait_s, "latency_ratio_submit": j.latency_ratio_submit,
        }
        for t in types:
            row[f"gpu_s_{t}"] = float(j.gpu_s_by_type.get(t, 0.0))
        rows.append(row)
    return pd.DataFrame(rows, columns=[*JOB_COLUMNS, *(f"gpu_s_{t}" for t in types)])


def rounds_frame(rounds: Sequence[RoundRecord]) -> pd.DataFrame:
    """One row per round with :data:`ROUND_COLUMNS`, ``gpus_<type>`` per GPU type seen (0 if none) and one
    column per key the scheduler reported in ``RoundRecord.info`` (0 in rounds that did not report it)."""
    types = sorted({t for r in rounds for t in r.gpus_by_type})
    data: dict[str, list[Any]] = {c: [getattr(r, c) for r in rounds] for c in ROUND_COLUMNS}
    for t in types:
        data[f"gpus_{t}"] = [int(r.gpus_by_type.get(t, 0)) for r in rounds]
    keys = sorted({k for r in rounds for k in r.info})
    for k in keys:
        data[k] = [float(r.info.get(k, 0.0)) for r in rounds]
    return pd.DataFrame(data, columns=[*ROUND_COLUMNS, *(f"gpus_{t}" for t in types), *keys])
