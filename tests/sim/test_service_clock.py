"""A service's clock in the simulator (what ``dlsched whatif`` replays with): rounds shifted by
``round_offset_s``, and completions seen at the round's end (``completion_at_round``). Off by default, where a
run is what it always was."""

from __future__ import annotations

import math

import pytest

from dlsched.core import InputError
from dlsched.sim.config import RunConfig, route_settings
from dlsched.sim.run import simulate

TRACE = "synthetic:rate=30,hours=1,seed=3"


def _run(**fields):
    return simulate(RunConfig(trace=TRACE, policy="fifo", jobs=12, round_s=60, **fields))


def _on_round(t: float, offset: float, round_s: float) -> bool:
    k = (t - offset) / round_s
    return math.isclose(k, round(k), abs_tol=1e-6)


def test_the_defaults_leave_a_run_as_it_was():
    base = _run()
    same = _run(round_offset_s=0.0, completion_at_round=False)
    assert base.config.round_offset_s == 0.0 and base.config.completion_at_round is False
    assert [(j.job_id, j.start_s, j.finish_s, j.gpu_s) for j in base.jobs] == \
        [(j.job_id, j.start_s, j.finish_s, j.gpu_s) for j in same.jobs]
    # completions at the last step: most are not on a round boundary
    assert any(not _on_round(j.finish_s, 0.0, 60.0) for j in base.jobs)


def test_rounds_start_at_the_offset():
    rec = _run(round_offset_s=17.5)
    assert rec.rounds and all(_on_round(r.time_s, 17.5, 60.0) for r in rec.rounds)
    assert all(_on_round(s.start_s, 17.5, 60.0) for s in rec.segments)
    assert all(j.finish_s is not None for j in rec.jobs)


def test_completions_are_seen_at_the_round_end_and_hold_the_gpus_until_then():
    base = _run()
    seen = _run(completion_at_round=True)
    assert all(j.finish_s is not None and _on_round(j.finish_s, 0.0, 60.0) for j in seen.jobs)
    first = {j.job_id: j for j in base.jobs}
    # the first job to finish ran the same in both runs until its last step: seen at the next boundary
    j0 = min(base.jobs, key=lambda j: j.finish_s)
    got = next(j for j in seen.jobs if j.job_id == j0.job_id)
    assert got.start_s == first[j0.job_id].start_s
    assert got.finish_s == pytest.approx(math.ceil(j0.finish_s / 60.0 - 1e-9) * 60.0)
    last = max((s for s in seen.segments if s.job_id == j0.job_id), key=lambda s: s.end_s)
    assert got.finish_s > j0.finish_s
    assert got.gpu_s == pytest.approx(j0.gpu_s + (got.finish_s - j0.finish_s) * last.num_gpus, rel=1e-9)
    for s in seen.segments:
        assert _on_round(s.end_s, 0.0, 60.0)


def test_bad_values_are_refused_naming_the_field():
    with pytest.raises(InputError, match="round_offset_s"):
        simulate(RunConfig(trace=TRACE, policy="fifo", jobs=2, round_s=60, round_offset_s=60))
    with pytest.raises(InputError, match="round_offset_s"):
        RunConfig(round_offset_s=-1)
    with pytest.raises(InputError, match="completion_at_round"):
        RunConfig(completion_at_round="sometimes")
    routed = route_settings({"completion_at_round": "true", "round_offset_s": "5"})
    cfg = RunConfig(**routed)
    assert cfg.completion_at_round is True and cfg.round_offset_s == 5.0 and routed["settings"] == {}
