"""Gimbal's evaluation traces: Table 2's class mix, Table 1's models, deadlines of section 7.1."""

from __future__ import annotations

import collections

import pytest

from dlsched.core import InputError
from dlsched.traces.gimbal import DURATION_RANGE_S, MODELS
from dlsched.traces.resolve import resolve_trace
from testkit import needs_data

pytestmark = [needs_data("sia", "traces", "philly.csv"),
              needs_data("alibaba", "gpu-v2023", "openb_pod_list_default.csv")]


@pytest.mark.parametrize(("spec", "mix"), [("gimbal-philly:seed=1", (43, 86, 21)),
                                           ("gimbal-alibaba:seed=3", (112, 132, 56))])
def test_the_class_mix_models_and_deadlines_are_the_papers(spec, mix):
    specs, _ = resolve_trace(spec)
    counts = collections.Counter(s.user for s in specs)
    assert (counts["small"], counts["medium"], counts["large"]) == mix
    for s in specs:
        assert s.model in MODELS[s.user]
        assert s.batch_size in MODELS[s.user][s.model]
        lo, hi = DURATION_RANGE_S[s.user]
        assert s.duration_s is not None and lo <= s.duration_s <= hi
        assert s.deadline_s is not None
        assert 1.5 * s.duration_s <= s.deadline_s - s.submit_time_s <= 2.5 * s.duration_s
        assert s.num_gpus in (1, 2, 4, 8) and s.reference_gpu == "a40"
    assert min(s.submit_time_s for s in specs) == 0.0
    large = [s.num_gpus for s in specs if s.user == "large"]
    small = [s.num_gpus for s in specs if s.user == "small"]
    assert sum(large) / len(large) > sum(small) / len(small)  # large jobs ask for more GPUs (Table 2)


def test_a_seed_gives_the_same_trace_and_another_seed_another():
    a, _ = resolve_trace("gimbal-philly:seed=4")
    b, _ = resolve_trace("gimbal-philly:seed=4")
    c, _ = resolve_trace("gimbal-philly:seed=5")
    assert a == b and a != c


def test_unknown_options_are_refused_naming_the_trace():
    with pytest.raises(InputError, match="gimbal-philly:rate=3"):
        resolve_trace("gimbal-philly:rate=3")
