"""Emulated GPU types: the fastest type of a cluster runs at real speed, the others slower by the measured
relative speeds the simulator's world uses too."""

from __future__ import annotations

import pytest

from dlsched.runtime.emulation import relative_speeds, slowdowns
from dlsched.runtime.workload import load_cluster


def test_ray_local_4_stretches_slower_types_by_their_measured_speed():
    speeds = relative_speeds()
    factors = slowdowns(load_cluster("ray-local-4"))
    assert set(factors) == {"t4", "rtx", "a100"}
    assert factors["a100"] == 1.0
    assert factors["t4"] == pytest.approx(speeds["a100"] / speeds["t4"])
    assert factors["t4"] > factors["rtx"] > factors["a100"]


def test_a_cluster_of_one_type_is_not_stretched():
    assert slowdowns(load_cluster("sia-homo-64")) == {"t4": 1.0}
