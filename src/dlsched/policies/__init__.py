"""Scheduling policies: stages, their registry, and the schedulers composed from them.

Importing this package registers every built-in scheduler.
"""

from dlsched.policies import baselines as _baselines  # noqa: F401  (registers built-ins)
from dlsched.policies import pal_presets as _pal_presets  # noqa: F401  (registers PM-First and PAL)
from dlsched.policies import pollux_gavel_presets as _pollux_gavel  # noqa: F401  (registers Pollux and Gavel)
from dlsched.policies import sia_presets as _sia_presets  # noqa: F401  (registers Sia)
from dlsched.policies.registry import SCHEDULERS, build_scheduler, scheduler_tunables
from dlsched.policies.stages import Demand, Scheduler, StagedScheduler

__all__ = ["Demand", "SCHEDULERS", "Scheduler", "StagedScheduler", "build_scheduler", "scheduler_tunables"]
