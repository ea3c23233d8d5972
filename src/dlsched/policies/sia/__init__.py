"""Sia (thesis chapter 3): the allocation stage, its placer and the pieces they are built from.

* :mod:`.configs` - the configuration set of a cluster;
* :mod:`.problem` - candidate options and their values (the optimisation problem);
* :mod:`.accounting` - restart factor and time-varying penalty, carried across rounds;
* :mod:`.profiling` - bootstrapped profiling of new jobs;
* :mod:`.allocation` - the allocation stage that solves the problem;
* :mod:`.placer` and :mod:`.placement` - exact GPUs for the chosen configurations.
"""

from dlsched.policies.sia.accounting import RESTART_PENALTY_S, restart_factor
from dlsched.policies.sia.allocation import DEFAULT_TAU_S, SiaAllocation
from dlsched.policies.sia.configs import ConfigSet, build_config_set
from dlsched.policies.sia.placement import SiaPlacement
from dlsched.policies.sia.problem import option_values

__all__ = ["DEFAULT_TAU_S", "RESTART_PENALTY_S", "ConfigSet", "SiaAllocation", "SiaPlacement",
           "build_config_set", "option_values", "restart_factor"]
