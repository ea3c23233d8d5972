"""Run-level inputs outside their meaning are refused before a run starts, naming the field and its range."""

from __future__ import annotations

import pytest

from dlsched.core import InputError
from dlsched.sim.config import RunConfig


@pytest.mark.parametrize(("fields", "field", "allowed"), [
    ({"round_s": float("nan")}, "round_s", "[1, 86400]"),
    ({"round_s": float("inf")}, "round_s", "[1, 86400]"),
    ({"round_s": 1e-9}, "round_s", "[1, 86400]"),
    ({"round_s": "abc"}, "round_s", "[1, 86400]"),
    ({"max_time_s": -1}, "max_time_s", "(0, 315360000]"),
    ({"max_time_s": 1e300}, "max_time_s", "(0, 315360000]"),
    ({"stall_rounds": 0}, "stall_rounds", "a whole number in [1, 10000000]"),
    ({"stall_rounds": True}, "stall_rounds", "a whole number in [1, 10000000]"),
    ({"seed": 1.5}, "seed", "a whole number in [0, "),
    ({"seed": "1.5"}, "seed", "a whole number in [0, "),
    ({"jobs": "2.5"}, "jobs", "a whole number in [1, 1000000]"),
    ({"jobs": 0}, "jobs", "a whole number in [1, 1000000]"),
    ({"world": {"locality_penalty": "1e300"}}, "world.locality_penalty", "[1, 100]"),
    ({"world": {"locality_penalty": "nan"}}, "world.locality_penalty", "[1, 100]"),
    ({"world": {"restart_delay_scale": "-1"}}, "world.restart_delay_scale", "[0, 1000]"),
    ({"world": {"default_restart_delay_s": "-1"}}, "world.default_restart_delay_s", "[0, 86400]"),
    ({"world": {"profile_steps": "0"}}, "world.profile_steps", "a whole number in [1, 100000]"),
])
def test_out_of_range_run_fields_name_field_and_range(fields, field, allowed):
    with pytest.raises(InputError) as err:
        RunConfig(**fields)
    assert err.value.field == field
    assert f"(allowed: {allowed}" in str(err.value), str(err.value)


def test_numbers_given_as_text_are_read_as_the_command_line_gives_them():
    cfg = RunConfig(seed="3", jobs="12", round_s="120", max_time_s="7200")
    assert (cfg.seed, cfg.jobs, cfg.round_s, cfg.max_time_s) == (3, 12, 120.0, 7200.0)
