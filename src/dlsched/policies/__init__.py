"""Scheduling policies: stages, their registry, and the schedulers composed from them.

Importing this package registers every built-in stage and scheduler.
"""

from dlsched.policies import baselines as _baselines  # noqa: F401  (registers built-ins)
from dlsched.policies import packing_presets as _packing_presets  # noqa: F401  (registers Slurm, Lucid)
from dlsched.policies import quota as _quota  # noqa: F401  (registers the quota admission)
from dlsched.policies.gavel import presets as _gavel_presets  # noqa: F401  (registers Gavel)
from dlsched.policies.hops import presets as _hops_presets  # noqa: F401  (registers Hops, latency-ratio)
from dlsched.policies.markets import presets as _markets_presets  # noqa: F401  (registers Themis, Shockwave)
from dlsched.policies.pal import presets as _pal_presets  # noqa: F401  (registers PM-First and PAL)
from dlsched.policies.pollux import presets as _pollux_presets  # noqa: F401  (registers Pollux)
from dlsched.policies.registry import SCHEDULERS, build_scheduler, describe_scheduler, scheduler_tunables
from dlsched.policies.sia import presets as _sia_presets  # noqa: F401  (registers Sia)
from dlsched.policies.stages import Demand, Plan, Scheduler, StagedScheduler

__all__ = ["Demand", "Plan", "SCHEDULERS", "Scheduler", "StagedScheduler", "build_scheduler",
           "describe_scheduler", "scheduler_tunables"]
