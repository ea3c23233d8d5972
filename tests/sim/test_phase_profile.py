"""Where a run's time goes: the engine's wall seconds per phase account for the run and agree with the rounds'
own policy times, so a profile of a 25,600-GPU run can be trusted to say what to speed up."""

from __future__ import annotations

import pytest

from dlsched.sim.config import RunConfig
from dlsched.sim.engine import PHASES
from dlsched.sim.run import simulate


@pytest.mark.parametrize("policy", ["fifo", "sia"])
def test_phases_cover_the_run_and_policy_time_is_the_rounds(policy):
    rec = simulate(RunConfig(trace="synthetic:rate=30,hours=1,seed=3", policy=policy, jobs=15))
    phases = rec.phase_s
    assert tuple(phases) == PHASES
    assert all(v >= 0 for v in phases.values())
    # the scheduler's phase is exactly the sum of the policy times the round records carry
    assert phases["policy"] == sum(r.policy_s for r in rec.rounds)
    # the phases are parts of the engine's run, which is part of the whole simulation's wall time
    assert sum(phases.values()) <= rec.summary["sim_wall_s"] <= rec.wall_s
    # a run that simulates anything spends time advancing it and writing its job records
    assert phases["advance"] > 0 and phases["job_records"] > 0
