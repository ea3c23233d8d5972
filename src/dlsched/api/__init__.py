"""The Python API: :func:`simulate`, :func:`compare` and :func:`configure`, and what they return."""

from dlsched.api.results import ComparisonResult, SimulationResult
from dlsched.api.runs import compare, configure, simulate

__all__ = ["ComparisonResult", "SimulationResult", "compare", "configure", "simulate"]
