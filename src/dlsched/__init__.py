"""dlsched: schedule deep-learning training jobs on shared, heterogeneous GPU clusters.

From Python::

    import dlsched
    r = dlsched.simulate(cluster="sia-hetero-64", trace="sia-philly:1", policy="sia", jobs=20)
    r.summary["avg_jct_s"], r.jobs, r.rounds, r.config

``dlsched.Client(server, token)`` talks to a running ``dlsched serve`` (submit, jobs, show, cancel, logs,
explain, wait; :mod:`dlsched.client`).

``simulate``, ``compare``, ``configure``, ``Client``, ``RunConfig``, ``register_stage`` and the stage contracts
(``Ordering``, ``AllocationStage``, ``PlacementStage``, ...) are imported on first use, so ``import dlsched``
stays cheap for the CLI and for tools that only read ``__version__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dlsched.version import __version__

#: Public name -> the module that defines it (imported when the name is first used).
_LAZY: dict[str, str] = {
    "simulate": "dlsched.api.runs", "compare": "dlsched.api.runs", "configure": "dlsched.api.runs",
    "SimulationResult": "dlsched.api.results", "ComparisonResult": "dlsched.api.results",
    "RunConfig": "dlsched.sim.config",
    "register_stage": "dlsched.plugins", "load_plugin_file": "dlsched.plugins",
    "Admission": "dlsched.policies.stages", "Ordering": "dlsched.policies.stages",
    "AllocationStage": "dlsched.policies.stages", "PlacementStage": "dlsched.policies.stages",
    "Coordination": "dlsched.policies.stages", "AllocationTraits": "dlsched.policies.stages",
    "PlacementTraits": "dlsched.policies.stages", "Plan": "dlsched.policies.stages",
    "Demand": "dlsched.policies.stages", "Shape": "dlsched.policies.stages",
    "ProfileRequest": "dlsched.policies.stages",
    "ClusterView": "dlsched.core", "JobView": "dlsched.core", "Decision": "dlsched.core",
    "Placement": "dlsched.core", "InputError": "dlsched.core",
    "whatif": "dlsched.replay.whatif", "WhatIfResult": "dlsched.replay.whatif",
    "Client": "dlsched.client", "ServiceError": "dlsched.client",
}

__all__ = [
    "Admission", "AllocationStage", "AllocationTraits", "Client", "ClusterView", "ComparisonResult", "Coordination", "Decision",
    "Demand", "InputError", "JobView", "Ordering", "Placement", "PlacementStage", "PlacementTraits", "Plan",
    "ProfileRequest", "RunConfig", "ServiceError", "Shape", "SimulationResult", "__version__", "compare",
    "configure", "explain", "load_plugin_file", "register_stage", "simulate", "whatif", "WhatIfResult",
]

if TYPE_CHECKING:
    from dlsched.api.results import ComparisonResult, SimulationResult
    from dlsched.api.runs import compare, configure, simulate
    from dlsched.client import Client, ServiceError
    from dlsched.core import ClusterView, Decision, InputError, JobView, Placement
    from dlsched.plugins import load_plugin_file, register_stage
    from dlsched.policies.stages import (
        Admission,
        AllocationStage,
        AllocationTraits,
        Coordination,
        Demand,
        Ordering,
        PlacementStage,
        PlacementTraits,
        Plan,
        ProfileRequest,
        Shape,
    )
    from dlsched.replay.whatif import WhatIfResult, whatif
    from dlsched.sim.config import RunConfig


def __getattr__(name: str) -> Any:
    if name == "explain":  # a callable package: dlsched.explain(run_dir_or_result, job, round=None)
        return importlib.import_module("dlsched.explain")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dlsched' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "explain"})
