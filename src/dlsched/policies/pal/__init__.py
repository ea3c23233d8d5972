"""PAL (SC'24): variability-aware placement. :mod:`.pools` holds the binned GPU layout and a round's free
counts, :mod:`.choice` the GPU choice of PM-First and PAL, :mod:`.placement` the two placement stages."""

from dlsched.policies.pal.choice import pal_gpus, pm_first_gpus, pm_first_singles
from dlsched.policies.pal.placement import PalPlacement, PmFirstPlacement, cut_queue
from dlsched.policies.pal.pools import RoundPool, build_pools

__all__ = ["PalPlacement", "PmFirstPlacement", "RoundPool", "build_pools", "cut_queue", "pal_gpus",
           "pm_first_gpus", "pm_first_singles"]
