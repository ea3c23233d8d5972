"""The runtime monitor a coordinator such as Gimbal measures trial plans with, answered from the world.

On a real cluster Gimbal applies a plan (share limits per worker), lets the jobs run under it, and reads each
worker's utilisation and speed at its monitor's next reading (every 30 s, section 6). The simulator plays
both halves:

* **a reading is a measurement, not the truth**: each worker's speed over one period, with a seeded relative
  error of standard deviation ``world.monitor_noise`` (the speed counted over a window of a few dozen to a
  few hundred steps whose times vary), drawn from a generator seeded by the world's seed, so a run replays
  exactly;
* **a trial runs for real**: while a plan is tried, its jobs train under it for ``period_s``, at the speeds the
  world gives that plan. :meth:`WorldMonitor.trial_delays` says what that costs each job against the plan the
  search kept: the time the job would have needed at the kept plan's speed to make up what it lost (or
  gained) during the trials, which the coordinator charges as a pause. A trial lasts until the next reading,
  at most the coordinator's own collection limit.

The adapter lives in ``sim`` so policies never import the world.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from dlsched.core import Placement
from dlsched.world.base import World
from dlsched.world.sharing import WorkerShare, job_speed

#: Job id -> (model, placement, share limit % per worker in placement order).
Members = Mapping[str, tuple[str, Placement, tuple[int, ...]]]
#: One plan as it ran: its members, and per job its batch split (absent or empty: equal).
Trial = tuple[Members, Mapping[str, tuple[float, ...]]]
#: Tag mixed into the world's seed so the monitor's noise stream is its own.
_STREAM = 0x6D6F6E


class WorldMonitor:
    """Readings of a packing set's workers under trial share limits, relative to running alone."""

    def __init__(self, world: World, *, noise: float | None = None, period_s: float | None = None,
                 seed: int | None = None) -> None:
        self.sharing = world.sharing
        self.noise = world.config.monitor_noise if noise is None else noise
        #: Seconds between readings: how long a trial plan runs before the monitor reports it.
        self.period_s = world.config.monitor_period_s if period_s is None else period_s
        self._rng = np.random.default_rng([_STREAM, world.seed if seed is None else seed])
        #: Readings taken so far (each one period of a trial).
        self.readings = 0

    def true_speeds(self, members: Members) -> dict[str, list[float]]:
        """Each worker's speed as the world plays it under the members' limits (no measurement error)."""
        on_gpu: dict[int, list[tuple[str, str, int]]] = {}
        for job, (model, placement, pct) in members.items():
            for g, p in zip(placement.gpus, pct, strict=True):
                on_gpu.setdefault(g, []).append((job, model, p))
        out: dict[str, list[float]] = {}
        for job, (model, placement, pct) in members.items():
            speeds = []
            for g, p in zip(placement.gpus, pct, strict=True):
                other = next(((m, q) for o, m, q in on_gpu[g] if o != job), None)
                worker = WorkerShare(p) if other is None else WorkerShare(p, other[0], other[1])
                speeds.append(self.sharing.worker_speed(model, worker))
            out[job] = speeds
        return out

    def worker_speeds(self, members: Members) -> dict[str, list[float]]:
        """One reading: every worker's speed over one period, with the measurement's error."""
        self.readings += 1
        truth = self.true_speeds(members)
        if self.noise <= 0:
            return truth
        out = {}
        for job in sorted(truth):  # a fixed order, so the draws do not depend on the mapping's order
            errors = self._rng.normal(0.0, self.noise, size=len(truth[job]))
            out[job] = [max(0.0, v * (1.0 + float(e))) for v, e in zip(truth[job], errors, strict=True)]
        return {job: out[job] for job in truth}

    def trial_delays(self, trials: Sequence[Trial], kept: Trial, duration_s: float) -> dict[str, float]:
        """Seconds each job loses to ``trials`` against the ``kept`` plan: every trial ran ``duration_s`` (at
        most one period) at the trial's true speed instead of the kept plan's, so the job is
        ``duration_s * (1 - v_trial / v_kept)`` behind per trial (ahead when negative); the sum is floored at
        0 (a pause cannot be negative)."""
        kept_speeds = self._job_speeds(kept)
        lost = dict.fromkeys(kept_speeds, 0.0)
        for trial in trials:
            for job, v in self._job_speeds(trial).items():
                ref = kept_speeds.get(job, 0.0)
                if ref > 0:
                    lost[job] += duration_s * (1.0 - v / ref)
        return {job: max(0.0, s) for job, s in lost.items()}

    def _job_speeds(self, trial: Trial) -> dict[str, float]:
        members, splits = trial
        speeds = self.true_speeds(members)
        return {job: job_speed(v, splits.get(job, ())) for job, v in speeds.items()}
