"""Sia's accounting across rounds: the restart factor (eq. 3.3) and the time-varying no-allocation penalty
(section 3.5.6).

The restart factor discounts every configuration but a running job's current one by
``r_i = (T_i - N_i S_i) / (T_i + S_i)`` (age ``T_i``, restarts ``N_i``, restart cost ``S_i``), so jobs that
restarted often are moved less. The time-varying penalty lets a congested cluster time-share in bands of
``tau`` seconds: a job that held GPUs for the whole previous window gets ``lambda_i = 0`` for this one,
others ``lambda_ * (tau - s_i) / tau`` with ``s_i`` their service in the previous window.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from dlsched.core import ClusterView, JobView

#: Checkpoint-restore cost the scheduler assumes per model (seconds), as Sia's artifact configures it from
#: measurements on its physical cluster; other models use the stage's ``restart_penalty_s``.
RESTART_PENALTY_S = {"deepspeech2": 25.0, "imagenet": 250.0, "cifar10": 30.0, "bert": 120.0, "yolov3": 45.0}


def restart_factor(age_s: float, restarts: int, penalty_s: float, *, young_free: bool = True) -> float:
    """Eq. 3.3: ``(T - N S) / (T + S)``, clipped to [0, 1].

    ``young_free`` (the thesis's artifact): 1 while the job is younger than one restart, so a job changes
    configuration without a discount in its first S seconds; the thesis's text has no such exception (a job of
    age T < S is discounted to below one half)."""
    if young_free and age_s < penalty_s:
        return 1.0
    return float(min(1.0, max(0.0, (age_s - restarts * penalty_s) / (age_s + penalty_s))))


class TimeShare:
    """Per-job service history and the per-window penalties of section 3.5.6.

    State carried across rounds: ``_service`` (job -> (time, attained service) samples over the last
    window), ``_window`` (index of the current window) and ``_window_lambda`` (penalties fixed for it).
    """

    def __init__(self, lambda_: float, tau: float | None) -> None:
        self.lambda_ = lambda_
        self.tau = tau
        self._service: dict[str, deque[tuple[float, float]]] = {}
        self._window = -1
        self._window_lambda: dict[str, float] = {}

    def forget(self, active: set[str]) -> None:
        for table in (self._service, self._window_lambda):
            for jid in [k for k in table if k not in active]:
                del table[jid]

    def track(self, view: ClusterView) -> None:
        """Record each job's attained service (only needed when the penalty varies)."""
        if self.tau is None:
            return
        t = view.time_s
        for j in view.jobs:
            hist = self._service.setdefault(j.job_id, deque())
            hist.append((t, j.attained_service_s))
            while len(hist) > 2 and hist[1][0] <= t - self.tau:
                hist.popleft()

    def penalties(self, view: ClusterView, jobs: Sequence[JobView], congested: bool) -> np.ndarray:
        """Per job no-allocation penalty: ``lambda_``, or the time-varying one under congestion.

        The penalty is set per window of ``tau`` seconds (windows aligned to multiples of ``tau``) and held
        for the window, so a job chosen at a window's start keeps running through it: the bands of
        uninterrupted execution of figure 3.8. A job arriving inside a window gets ``lambda_``.
        """
        lam = np.full(len(jobs), float(self.lambda_))
        tau = self.tau
        if tau is None or not congested:
            return lam
        t = view.time_s
        window = math.floor(t / tau + 1e-9)
        if window != self._window:
            self._window = window
            self._window_lambda = {}
            for j in view.jobs:
                hist = self._service.get(j.job_id)
                if not hist:
                    continue
                t0, a0 = hist[0]
                if t0 > t - tau:  # younger than the window: count from its arrival
                    a0 = 0.0
                served = max(0.0, j.attained_service_s - a0)
                self._window_lambda[j.job_id] = 0.0 if served >= tau - 1e-6 else self.lambda_ * (tau - served) / tau
        for i, j in enumerate(jobs):
            lam[i] = self._window_lambda.get(j.job_id, self.lambda_)
        return lam
