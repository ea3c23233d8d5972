"""A service's profiles in the fitted world: each job's measured profile length (``profiling`` event to its
last ``profiled`` event) is its model's ``profile_s``, and a replayed profile lasts that long."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sqlalchemy")

from test_whatif_inputs import T0, _job  # noqa: E402

from dlsched.replay.whatif import whatif  # noqa: E402
from dlsched.service.store import Store  # noqa: E402


def test_a_replayed_profile_lasts_as_long_as_the_services(tmp_path):
    state = tmp_path / "state"
    store = Store.open(state)
    store.add_user("alice")
    store.meta_set("service", json.dumps({"policy": "sia", "cluster": "ray-local-4", "round_s": 2.0}))
    profiled = _job(store, "a", 0.0, finish=15.0)
    plain = _job(store, "never", 2.0, finish=12.0, node="a100-3")
    # job-1 profiled on two types at once from 0.2 s; the service saw them end at 0.6 s and 0.9 s
    store.add_event(profiled, "profiling", "profiling on a100, t4", now_s=T0 + 0.2)
    store.add_event(profiled, "profiled", "profiled on a100: 3 step-time reports", now_s=T0 + 0.6)
    store.add_event(profiled, "profiled", "profiled on t4: 3 step-time reports", now_s=T0 + 0.9)
    store.close()
    result = whatif(state, policies="sia", workers=1)
    assert result.world["models"][f"svc-{profiled}"]["profile_s"] == pytest.approx(0.7)
    assert "profile_s" not in result.world["models"][f"svc-{plain}"]  # never profiled: the world's own
    run = result.runs[0]
    first = min(s.start_s for s in run.segments if s.job_id == profiled)
    profiles = [s for s in run.segments if s.job_id == profiled and s.start_s == first]
    assert len(profiles) >= 2 and all(s.end_s - s.start_s == pytest.approx(0.7) for s in profiles)
