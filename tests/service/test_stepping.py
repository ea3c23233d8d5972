"""How the service's stepping fraction is counted (``dlsched.service.session.stepping_fraction``): held from
placement to the last report, stepping from the first step to the last report less checkpoint writes, both
times the workers; reports of incarnations never placed are ignored."""

from __future__ import annotations

import pytest

from dlsched.service.session import stepping_fraction


def test_start_up_and_checkpoints_are_held_but_not_stepping():
    reports = [
        {"type": "start", "incarnation": 1, "time": 104.0, "world_size": 2},
        {"type": "progress", "incarnation": 1, "time": 110.0, "first_step": 1, "last_step": 50, "world_size": 2},
        {"type": "checkpoint", "incarnation": 1, "time": 110.5, "step": 50, "seconds": 0.5},
        {"type": "stopped", "incarnation": 1, "time": 114.0, "step": 80},
        {"type": "start", "incarnation": 2, "time": 125.0, "world_size": 1},
        {"type": "done", "incarnation": 2, "time": 135.0, "step": 120},
        {"type": "progress", "incarnation": 9, "time": 500.0, "first_step": 1, "last_step": 2},  # never placed
    ]
    stepping, held = stepping_fraction(reports, [(1, 100.0), (2, 120.0)])
    assert held == pytest.approx(2 * 14.0 + 1 * 15.0)
    assert stepping == pytest.approx(2 * (10.0 - 0.5) + 1 * 10.0)


def test_an_incarnation_that_never_started_a_step_holds_without_stepping():
    stepping, held = stepping_fraction([{"type": "error", "incarnation": 1, "time": 103.0, "message": "x"}],
                                       [(1, 100.0)])
    assert stepping == 0.0 and held == pytest.approx(3.0)
