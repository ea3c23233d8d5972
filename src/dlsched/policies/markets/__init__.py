"""Market-based fair schedulers for rigid jobs: Themis's finish-time-fair auction (:mod:`.themis`) and
Shockwave's schedule planned over future rounds (:mod:`.shockwave`), on a common lease mechanism (:mod:`.lease`)."""

from dlsched.policies.markets.shockwave import ShockwaveAllocation, plan_window
from dlsched.policies.markets.themis import ThemisAllocation, partial_allocation, solve_auction

__all__ = ["ShockwaveAllocation", "ThemisAllocation", "partial_allocation", "plan_window", "solve_auction"]
