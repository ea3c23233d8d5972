"""Gavel (OSDI'20): its LPs (:mod:`.lp`) and its lease mechanism as an allocation stage (:mod:`.allocation`)."""

from dlsched.policies.gavel.allocation import GavelAllocation, rigid_batch, rigid_view
from dlsched.policies.gavel.lp import OBJECTIVES, solve_allocation

__all__ = ["OBJECTIVES", "GavelAllocation", "rigid_batch", "rigid_view", "solve_allocation"]
