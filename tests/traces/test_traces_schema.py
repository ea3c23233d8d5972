"""The canonical table: round trips, validation with file/line/field, atomic writes."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core import KNOWN_GPU_TYPES, Adaptivity, InputError, JobSpec
from dlsched.traces import COLUMNS, from_frame, read_canonical, read_trace, to_frame, write_trace
from dlsched.traces.schema import strip_origin

FULL = JobSpec(job_id="job, \"quoted\" 1", submit_time_s=12.5, model="bert", num_gpus=4, batch_size=96,
               min_gpus=2, max_gpus=8, adaptivity=Adaptivity.STRONG_SCALING, deadline_s=3600.25, user="alice",
               duration_s=1234.5678, reference_gpu="a100", gpu_types=("a100", "v100"),
               gpu_unit=2, priority=0.3)
MINIMAL = JobSpec(job_id="j2", submit_time_s=0.0, model="philly", num_gpus=1)
#: A job gives a run time or an iteration count, never both.
ITERATIONS = JobSpec(job_id="j3", submit_time_s=20.0, model="resnet50", num_gpus=2, iterations=1e6 + 0.5)

HEADER = ",".join(COLUMNS)


def test_round_trip_preserves_every_field(tmp_path):
    path = write_trace([FULL, MINIMAL, ITERATIONS], tmp_path / "t.csv")
    back = read_canonical(path)
    # sorted by submit time: MINIMAL (t=0) first
    assert strip_origin(back) == [MINIMAL, FULL, ITERATIONS]
    assert back[0].origin == f"{path}:3" and back[1].origin == f"{path}:2"
    assert read_trace(path) == back  # detected as canonical


def test_frame_round_trip():
    df = to_frame([FULL, MINIMAL])
    assert list(df.columns) == list(COLUMNS)
    assert df["batch_size"].dtype == "Int64" and pd.isna(df.loc[1, "batch_size"])
    assert df.loc[0, "gpu_types"] == "a100;v100"
    back = from_frame(df, "frame")
    assert strip_origin(back) == [MINIMAL, FULL]
    assert back[1].origin == "frame:2"


def test_minimal_columns_take_defaults(write):
    path = write("m.csv", "job_id,submit_time_s,model,num_gpus\na,5,cifar10,2\n")
    (spec,) = read_canonical(path)
    assert spec == JobSpec("a", 5.0, "cifar10", 2, origin=f"{path}:2")


def test_blank_lines_and_quoted_cells_keep_line_numbers(write):
    path = write("b.csv", "job_id,submit_time_s,model,num_gpus\n\n\"x,1\",1,m,1\n\nb,2,m,0\n")
    with pytest.raises(InputError) as err:
        read_canonical(path)
    assert err.value.line == 5 and err.value.field == "num_gpus" and err.value.source == str(path)


@pytest.mark.parametrize(("row", "field", "needle"), [
    ("a,,m,1", "submit_time_s", "missing"),
    ("a,abc,m,1", "submit_time_s", "not a number"),
    ("a,-1,m,1", "submit_time_s", "must be in [0, 31536000] (a trace spans at most a year), got -1"),
    ("a,1e17,m,1", "submit_time_s", "must be in [0, 31536000] (a trace spans at most a year), got 1e+17"),
    ("a,nan,m,1", "submit_time_s", "finite"),
    ("a,1,m,0", "num_gpus", "must be in [1, 65536], got 0"),
    ("a,1,m,1.5", "num_gpus", "whole number"),
    ("a,1,,1", "model", "missing"),
])
def test_bad_cells_name_file_line_field(write, row, field, needle):
    path = write("bad.csv", f"job_id,submit_time_s,model,num_gpus\nok,0,m,1\n{row}\n")
    with pytest.raises(InputError) as err:
        read_canonical(path)
    assert (err.value.source, err.value.line, err.value.field) == (str(path), 3, field)
    assert needle in str(err.value) and f"{path}:3" in str(err.value)


@pytest.mark.parametrize(("cells", "field"), [
    ({"adaptivity": "elastic"}, "adaptivity"),
    ({"gpu_types": "v100;h999"}, "gpu_types"),
    ({"reference_gpu": "k80"}, "reference_gpu"),
    ({"deadline_s": "0.5"}, "deadline_s"),
    ({"duration_s": "0"}, "duration_s"),
    ({"priority": "-1"}, "priority"),
    ({"min_gpus": "4", "max_gpus": "2"}, "max_gpus"),
    ({"adaptivity": "adaptive", "max_gpus": "2"}, "num_gpus"),
    ({"gpu_unit": "3"}, "num_gpus"),
])
def test_inconsistent_jobs_are_rejected(tmp_path, cells, field):
    row = {"job_id": "a", "submit_time_s": "1", "model": "m", "num_gpus": "4", **cells}
    path = tmp_path / "c.csv"
    path.write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n")
    with pytest.raises(InputError) as err:
        read_canonical(path)
    assert (err.value.line, err.value.field) == (2, field)


def test_missing_unknown_and_duplicate(write):
    p = write("a.csv", "job_id,submit_time_s,model\na,1,m\n")
    with pytest.raises(InputError, match="missing column.*num_gpus") as err:
        read_canonical(p)
    assert err.value.line == 1
    p = write("b.csv", "job_id,submit_time_s,model,num_gpus,deadline\na,1,m,1,5\n")
    with pytest.raises(InputError, match="unknown column.*deadline"):
        read_canonical(p)
    p = write("c.csv", "job_id,submit_time_s,model,num_gpus\na,1,m,1\nb,1,m,1\na,2,m,1\n")
    with pytest.raises(InputError, match="duplicate job_id 'a'") as err:
        read_canonical(p)
    assert err.value.line == 4


def test_malformed_line(write):
    p = write("m.csv", "job_id,submit_time_s,model,num_gpus\na,1,m,1,extra\n")
    with pytest.raises(InputError, match="malformed line") as err:
        read_canonical(p)
    assert err.value.line == 2


def test_write_is_atomic_and_validates(tmp_path):
    target = tmp_path / "keep.csv"
    target.write_text("previous content\n")
    with pytest.raises(InputError):
        write_trace([MINIMAL, replace(MINIMAL, job_id="bad", num_gpus=0)], target)
    assert target.read_text() == "previous content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.csv"]  # no temp file left behind
    with pytest.raises(InputError, match="duplicate"):
        write_trace([MINIMAL, MINIMAL], target)


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="pyarrow"):
            write_trace([MINIMAL], tmp_path / "t.parquet")
    else:
        path = write_trace([FULL, MINIMAL], tmp_path / "t.parquet")
        assert strip_origin(read_canonical(path)) == [MINIMAL, FULL]


# -- property: any valid JobSpec survives the canonical CSV --------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=12).filter(
    lambda s: s.strip() != "")
_YEAR_S = 365 * 86400.0
_times = st.floats(min_value=0, max_value=_YEAR_S, allow_nan=False, allow_infinity=False)
_pos = st.floats(min_value=1e-6, max_value=_YEAR_S, allow_nan=False, allow_infinity=False)
_iterations = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)
_priority = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
_gpu = st.sampled_from(sorted(KNOWN_GPU_TYPES))


@st.composite
def job_specs(draw) -> JobSpec:
    unit = draw(st.integers(1, 4))
    num = unit * draw(st.integers(1, 16))
    mode = draw(st.sampled_from(list(Adaptivity)))
    min_gpus = draw(st.integers(1, num))
    max_gpus = draw(st.none() | st.integers(num, 256))
    if mode is Adaptivity.RIGID:
        min_gpus = draw(st.integers(1, 64))
        max_gpus = draw(st.none() | st.integers(min_gpus, 256))
    submit = draw(_times)
    deadline = draw(st.none() | st.floats(min_value=submit, max_value=2 * _YEAR_S, allow_nan=False))
    duration = draw(st.none() | _pos)
    iterations = None if duration is not None else draw(st.none() | _iterations)
    return JobSpec(
        job_id=draw(_text), submit_time_s=submit, model=draw(_text), num_gpus=num,
        batch_size=draw(st.none() | st.integers(1, 1 << 20)), min_gpus=min_gpus, max_gpus=max_gpus,
        adaptivity=mode, deadline_s=deadline, user=draw(_text), duration_s=duration,
        iterations=iterations, reference_gpu=draw(_gpu),
        gpu_types=tuple(draw(st.lists(_gpu, max_size=3, unique=True))), gpu_unit=unit, priority=draw(_priority),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(job_specs(), min_size=1, max_size=6, unique_by=lambda s: s.job_id))
def test_property_random_specs_round_trip(tmp_path, specs):
    path = write_trace(specs, tmp_path / "prop.csv")
    back = read_canonical(path)
    expected = sorted(specs, key=lambda s: s.submit_time_s)
    assert strip_origin(back) == expected
    for spec in back:
        assert math.isfinite(spec.submit_time_s) and spec.origin.startswith(f"{path}:")
