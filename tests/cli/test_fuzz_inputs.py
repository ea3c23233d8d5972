"""Fuzzing the input files: a valid trace and a valid cluster file, one field mutated at a time.

Whatever the mutation, a run either works or is refused the way the hostile-input corpus demands: exit code
2, exactly one ``error:`` line naming the file at fault, no traceback, nothing written to ``--out``, and in
bounded time (never a hang).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dlsched.cli import app

runner = CliRunner()
#: Seconds after which a test of all its fuzzed inputs counts as hanging (a guard, not a speed measurement).
HANG_S = 1800

TRACE_COLUMNS = ["job_id", "submit_time_s", "model", "num_gpus", "batch_size", "min_gpus", "max_gpus", "adaptivity",
                 "duration_s", "iterations", "gpu_types", "gpu_unit", "priority"]
TRACE_ROWS = [
    ["a", "0", "philly", "2", "", "", "", "rigid", "600", "", "", "", ""],
    ["b", "30", "cifar10", "1", "128", "1", "4", "adaptive", "", "", "t4;a100", "", "2"],
    ["c", "90", "philly", "4", "", "", "", "rigid", "", "", "", "2", ""],
]
TRACE_ROWS[2][8] = "1200"

CLUSTER_FIELDS = ["gpu_type", "count", "gpus_per_node", "speed_factor"]
CLUSTER_GROUPS = [["t4", "2", "4", "1.0"], ["a100", "1", "8", "1.0"]]

#: Values a careless or hostile user might type into any field.
HOSTILE = st.sampled_from([
    "", "0", "-1", "1.5", "nan", "inf", "-inf", "1e300", "1e-300", "1e17", "abc", "true", "null", "[]", "{}",
    "9" * 40, "a100", "t4;nosuch", "rigid", "adaptive", "strong-scaling", "é", "a,b", '"', "  ", "0x10",
])


def write_trace(path, rows) -> None:
    lines = [",".join(TRACE_COLUMNS)]
    for row in rows:
        cells = ['"' + c.replace('"', '""') + '"' if ("," in c or '"' in c) else c for c in row]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")


def write_cluster(path, groups) -> None:
    body = ["name: fuzz", "nodes:"]
    for g in groups:
        body.append("  - " + ", ".join(f"{k}: {v if v.strip() else repr(v)}" for k, v in zip(CLUSTER_FIELDS, g,
                                                                                             strict=True)))
    path.write_text("\n".join(body) + "\n")


def run_and_check(tmp_path, args: list[str], culprit: str) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, [*args, "--out", str(out)])  # a hang is caught by pytest-timeout
    assert res.exit_code in (0, 2), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output
    if res.exit_code == 0:
        assert (out / "summary.json").exists()
        return
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, res.output
    assert culprit in errors[0], errors[0]
    assert not out.exists()


SIM = ["simulate", "--round-s", "3600", "--set", "max_time_s=172800", "--policy", "fifo"]


@pytest.mark.timeout(HANG_S)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=st.integers(0, len(TRACE_ROWS) - 1), col=st.integers(0, len(TRACE_COLUMNS) - 1), value=HOSTILE)
def test_a_mutated_trace_runs_or_is_refused_naming_the_file(tmp_path_factory, row, col, value):
    tmp_path = tmp_path_factory.mktemp("trace")
    rows = [list(r) for r in TRACE_ROWS]
    rows[row][col] = value
    write_trace(tmp_path / "trace.csv", rows)
    run_and_check(tmp_path, [*SIM, "--cluster", "sia-hetero-64", "--trace", str(tmp_path / "trace.csv")],
                  "trace.csv")


@pytest.mark.timeout(HANG_S)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=st.integers(0, len(CLUSTER_GROUPS) - 1), col=st.integers(0, len(CLUSTER_FIELDS) - 1), value=HOSTILE)
def test_a_mutated_cluster_file_runs_or_is_refused_naming_the_file(tmp_path_factory, group, col, value):
    tmp_path = tmp_path_factory.mktemp("cluster")
    groups = [list(g) for g in CLUSTER_GROUPS]
    groups[group][col] = value
    write_cluster(tmp_path / "cluster.yaml", groups)
    trace = tmp_path / "trace.csv"
    write_trace(trace, [TRACE_ROWS[0]])
    run_and_check(tmp_path, [*SIM, "--cluster", str(tmp_path / "cluster.yaml"), "--trace", str(trace)],
                  "cluster.yaml")
