"""Hops's learning rates per GPU count (section 2.2): given per count, or one and a linear / square-root rule."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, InputError, JobSpec
from dlsched.traces.schema import read_canonical, write_trace


def elastic(rates=(), rule="linear", counts=(2, 4, 8, 16)) -> JobSpec:
    return JobSpec(job_id="j", submit_time_s=0.0, model="wav2vec", num_gpus=4, batch_size=32,
                   adaptivity=Adaptivity.STRONG_SCALING, gpu_counts=counts, per_gpu_batch=True,
                   duration_s=3600.0, reference_gpu="1080ti", learning_rates=tuple(rates), lr_scaling=rule)


def test_no_rates_given_leaves_the_rate_to_the_trainer():
    assert elastic().learning_rate(4) is None


def test_a_rate_given_for_every_count_is_used_as_given():
    job = elastic([(2, 0.01), (4, 0.03), (8, 0.05), (16, 0.07)])
    assert [job.learning_rate(k) for k in (2, 4, 8, 16)] == [0.01, 0.03, 0.05, 0.07]


@pytest.mark.parametrize(("rule", "want"), [("linear", [0.05, 0.1, 0.2, 0.4]),
                                            ("sqrt", [0.1 / math.sqrt(2), 0.1, 0.1 * math.sqrt(2), 0.2])])
def test_one_rate_scales_to_the_other_counts_by_the_rule(rule, want):
    job = elastic([(4, 0.1)], rule)
    assert [job.learning_rate(k) for k in (2, 4, 8, 16)] == pytest.approx(want)


def test_a_count_without_a_rate_scales_from_the_nearest_given_count_below():
    job = elastic([(2, 0.02), (8, 0.1)], "linear")
    assert job.learning_rate(4) == pytest.approx(0.04)   # from 2
    assert job.learning_rate(16) == pytest.approx(0.2)   # from 8, not from 2


@settings(max_examples=40, deadline=None)
@given(k0=st.sampled_from((2, 4, 8, 16)), lr=st.floats(1e-4, 1.0), rule=st.sampled_from(("linear", "sqrt")))
def test_rates_grow_with_the_count_and_keep_the_given_one(k0, lr, rule):
    job = elastic([(k0, lr)], rule)
    rates = [job.learning_rate(k) for k in (2, 4, 8, 16)]
    assert rates == sorted(rates) and job.learning_rate(k0) == lr


def test_rates_and_rule_survive_a_round_trip_through_the_canonical_table(tmp_path):
    job = elastic([(4, 0.1), (16, 0.3333333333333333)], "sqrt")
    back, = read_canonical(write_trace([job], tmp_path / "t.csv"))
    assert back.learning_rates == job.learning_rates and back.lr_scaling == "sqrt"


HEADER = "job_id,submit_time_s,model,num_gpus,adaptivity,gpu_counts,duration_s,reference_gpu,learning_rates,lr_scaling\n"


@pytest.mark.parametrize(("rates", "rule", "field", "match"), [
    ("4-0.1", "", "learning_rates", "count:rate"),
    ("4:0", "", "learning_rates", r"\(0, 100\]"),
    ("4:0.1;4:0.2", "", "learning_rates", "two rates"),
    ("3:0.1", "", "learning_rates", "does not accept"),
    ("4:0.1", "cubic", "lr_scaling", "unknown rule"),
])
def test_a_bad_rate_cell_is_one_error_naming_the_line_and_field(tmp_path, rates, rule, field, match):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + f"j,0,wav2vec,4,strong-scaling,2;4;8,3600,1080ti,{rates},{rule}\n")
    with pytest.raises(InputError, match=match) as err:
        read_canonical(path)
    assert f"{path}:2" in str(err.value) and field in str(err.value)
