"""Trace fields outside what a trace can mean are refused at load time, naming file:line, field and range."""

from __future__ import annotations

import pytest

from dlsched.core import InputError
from dlsched.traces import read_canonical, read_trace

HEAD = "job_id,submit_time_s,model,num_gpus,duration_s,iterations,batch_size,priority,deadline_s"


@pytest.mark.parametrize(("row", "field", "message"), [
    ("j,1e17,m,1,100,,,,", "submit_time_s", "must be in [0, 31536000] (a trace spans at most a year), got 1e+17"),
    ("j,0,m,1,1e300,,,,", "duration_s", "must be in (0, 31536000] (a trace spans at most a year), got 1e+300"),
    ("j,0,m,1,1e-300,,,,", "duration_s", None),  # tiny but positive: allowed
    ("j,0,m,1,0,,,,", "duration_s", "must be in (0, 31536000]"),
    ("j,0,m,1,,1e300,,,", "iterations", "must be in (0, 1000000000], got 1e+300"),
    ("j,0,m,1,,,1e9,,", "batch_size", "must be in [1, 1048576], got 1000000000"),
    ("j,0,m,1,100,,,1e300,", "priority", "must be in (0, 1000000], got 1e+300"),
    ("j,0,m,1,100,,,,inf", "deadline_s", "must be finite, got 'inf' (allowed: [0, 63072000])"),
    ("j,0,m,100000,100,,,,", "num_gpus", "must be in [1, 65536], got 100000"),
    ("j,0,m,1,100,1000,,,", "iterations", "either duration_s (run time) or iterations (iteration count), not both"),
])
def test_out_of_range_cells_name_line_field_and_range(write, row, field, message):
    path = write("t.csv", f"{HEAD}\n{row}\n")
    if message is None:
        assert len(read_canonical(path)) == 1
        return
    with pytest.raises(InputError) as err:
        read_canonical(path)
    assert (err.value.source, err.value.line, err.value.field) == (str(path), 2, field)
    assert message in str(err.value), str(err.value)


def test_a_missing_required_column_is_named_not_called_an_unknown_header(write):
    path = write("t.csv", "job_id,model,num_gpus,duration_s\nj1,resnet50,1,100\n")
    with pytest.raises(InputError) as err:
        read_trace(path)
    assert err.value.line == 1 and err.value.field == "submit_time_s"
    assert "missing column(s) submit_time_s" in str(err.value)
    assert "unrecognised" not in str(err.value)
