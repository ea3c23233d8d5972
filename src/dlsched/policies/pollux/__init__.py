"""Pollux (OSDI'21) as Sia compares against it: speedups and virtual nodes (:mod:`.speedup`), the genetic
search (:mod:`.genetic`), the allocation stage (:mod:`.allocation`) and node-level placement
(:mod:`.placement`)."""

from dlsched.policies.pollux.allocation import PolluxAllocation
from dlsched.policies.pollux.genetic import AllocationProblem, power_mean
from dlsched.policies.pollux.placement import PolluxPlacement
from dlsched.policies.pollux.speedup import VirtualCluster, fix_mixed_types, speedup_table, trim_counts

__all__ = ["AllocationProblem", "PolluxAllocation", "PolluxPlacement", "VirtualCluster", "fix_mixed_types",
           "power_mean", "speedup_table", "trim_counts"]
