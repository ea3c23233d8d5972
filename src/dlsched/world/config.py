"""The knobs of the truth an experiment may sweep (:class:`WorldConfig`), checked when made.

Apart from :mod:`dlsched.world.base` because a run configuration (:mod:`dlsched.sim.config`) and a cluster's
defaults name these knobs without needing the world that plays them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dlsched.core import InputError
from dlsched.world.calibration import DEFAULT_CALIBRATION, calibration
from dlsched.world.sharing import DEFAULT_ISOLATION, SHARE_CHANGE_S, MpsCurve
from dlsched.world.sharing_worlds import SHARING_WORLDS
from dlsched.world.variability import GPU_SPEED_SOURCES


@dataclass(frozen=True)
class WorldConfig:
    """Knobs of the truth that an experiment may sweep."""

    #: Multiplier on iteration time when a rigid job spans nodes; None uses the per-model table.
    locality_penalty: float | None = None
    #: Apply per-GPU variability (only for clusters that declare a variability profile).
    variability: bool = True
    #: Where each simulated GPU's true per-class speed comes from: ``medians`` (a profiled GPU scored by
    #: the median of its runs) or ``single-runs`` (reproduces PAL's published simulator: single runs per
    #: class, stragglers included as permanent GPU speeds); see
    #: :meth:`dlsched.world.variability.GpuSpeeds.for_cluster`.
    gpu_speeds: str = "medians"
    #: Transient node-wide straggler episodes in time (:mod:`dlsched.world.stragglers`), for clusters with a
    #: variability profile whose runs show them (Longhorn). None (default): ``on`` with ``gpu_speeds=medians``,
    #: ``off`` with ``single-runs``, whose draw already holds the straggler runs (``on`` there is refused).
    straggler_episodes: Literal["on", "off"] | None = None
    #: Scale on every model's checkpoint-restore delay (0 disables restart costs).
    restart_delay_scale: float = 1.0
    #: Checkpoint-restore delay for jobs whose model has no measured value (PAL/Philly traces).
    default_restart_delay_s: float = 0.0
    #: Profiling a new job: local batch sizes tried per GPU type, and steps timed at each.
    profile_batches: int = 5
    profile_steps: int = 20
    #: Seconds a packed job pauses when the share restriction of one of its workers changes (Gimbal 7.4).
    share_change_s: float = SHARE_CHANGE_S
    #: Share of a packed pair's interference that non-overlapping share limits remove
    #: (:mod:`dlsched.world.sharing`).
    mps_isolation: float = DEFAULT_ISOLATION
    #: Curvature ``k`` of the speed-against-share curve (default: 90% of the speed at half the threads);
    #: ``experiments/mps`` fits a GPU's own.
    mps_curve_k: float = MpsCurve().k
    #: A measured curve file (``experiments/mps``) to fit the curve to instead of ``mps_curve_k``.
    mps_curve: str | None = None
    #: Which GPU generation's pair speeds and MPS curves the world plays packed jobs with
    #: (:mod:`dlsched.world.sharing_worlds`): ``old-gpus`` (the packaged Lucid/Gavel/PAL pair table, one MPS
    #: curve for every model) or ``h200`` (pairs measured on an H200, ``$DLSCHED_DATA/h200/gpu_profile.json``).
    sharing_world: str = "old-gpus"
    #: Relative standard deviation of a runtime monitor's reading of a worker's speed over one period
    #: (:class:`dlsched.sim.monitor.WorldMonitor`); 0 reads the truth.
    monitor_noise: float = 0.03
    #: Seconds between a runtime monitor's readings (Gimbal section 6: every 30 s); a trial plan runs at
    #: least this long before its effect is read.
    monitor_period_s: float = 30.0
    #: Calibration profile (``params/calibration.json``): per-model slowdowns of iteration time and restart
    #: delays. ``none`` plays the profiles as measured; ``sia-artifact`` plays them as Sia's simulator did.
    #: A cluster preset may name its own default (the ``sia-*`` presets: ``sia-artifact``).
    calibration: str = DEFAULT_CALIBRATION
    #: A profiles file (:mod:`dlsched.world.fitted`) adding fitted models to the throughput and efficiency
    #: tables, e.g. the runtime's jobs fitted to their own reports (experiments/runtime_fidelity.py).
    profiles: str | None = None

    def __post_init__(self) -> None:
        if self.gpu_speeds not in GPU_SPEED_SOURCES:
            raise InputError(f"unknown source of GPU speeds '{self.gpu_speeds}' (known: "
                             f"{', '.join(GPU_SPEED_SOURCES)})", field="gpu_speeds")
        if self.straggler_episodes not in (None, "on", "off"):
            raise InputError(f"expected on or off, got {self.straggler_episodes!r}", field="straggler_episodes")
        if self.straggler_episodes == "on" and self.gpu_speeds == "single-runs":
            raise InputError("episodes on top of gpu_speeds=single-runs would count the straggler runs twice "
                             "(single-runs already scores GPUs by them); use gpu_speeds=medians",
                             field="straggler_episodes")
        if self.sharing_world not in SHARING_WORLDS:
            raise InputError(f"unknown sharing world '{self.sharing_world}' (known: {', '.join(SHARING_WORLDS)})",
                             field="sharing_world")
        calibration(self.calibration)  # an unknown name is refused here, naming the field

    @property
    def episodes(self) -> str:
        """``on`` or ``off``: the effective straggler-episode setting (the default resolved)."""
        if self.straggler_episodes is not None:
            return self.straggler_episodes
        return "on" if self.gpu_speeds == "medians" else "off"
