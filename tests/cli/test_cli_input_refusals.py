"""Unusual inputs on the command line: each is refused before any work with one line naming what to change."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dlsched.cli import app

runner = CliRunner()


def refused(*args: str) -> str:
    """Run the command, check it failed cleanly (exit 2, one error line), return that line."""
    res = runner.invoke(app, list(args), catch_exceptions=False)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "words"), [
    (("--seed", "1.5"), ("field 'seed'", "'1.5'", "a whole number in [0, ")),
    (("--jobs", "2.5"), ("field 'jobs'", "a whole number in [1, 1000000]")),
    (("--round-s", "nan"), ("field 'round_s'", "(allowed: [1, 86400])")),
    (("--round-s", "1e-9"), ("field 'round_s'", "(allowed: [1, 86400])")),
    (("--set", "locality_penalty=abc"), ("field 'world.locality_penalty'", "(allowed: [1, 100])")),
    (("--policy", "pal", "--set", "l_across=0"), ("field 'l_across'", "[1, 100]")),
    (("--policy", "tiresias", "--set", "queue_limits_gpu_s=100,10"), ("strictly increasing", "100,10")),
    (("--trace", "synthetic:rate=20,hours=8,seed=1.5"), ("seed", "whole number")),
    (("--trace", "synthetic:hours=1e300"), ("hours", "(0, 8760]")),
    (("--trace", "sia-philly:1.5"), ("sia-philly:1.5", "workload number")),
])
def test_simulate_refuses(args, words):
    line = refused("simulate", "--cluster", "sia-hetero-64", *args)
    for w in words:
        assert w in line, line


def test_compare_refuses_the_same_policy_twice_and_no_workers(tmp_path):
    line = refused("compare", "--policies", "fifo,tiresias,fifo", "--jobs", "2")
    assert "field 'policies'" in line and "fifo more than once" in line
    assert "field 'workers'" in refused("compare", "--policies", "fifo", "--workers", "0")


@pytest.fixture
def trace(tmp_path):
    def make(text: str):
        path = tmp_path / "t.csv"
        path.write_text(text)
        return str(path)
    return make


def test_trace_validate_reports_what_a_run_would_refuse(trace):
    head = "job_id,submit_time_s,model,num_gpus,duration_s\n"
    header_only = trace(head)
    assert f"{header_only}: the trace holds no jobs" in refused("trace", "validate", header_only)
    late = trace(head + "a,0,philly,1,100\nb,4e7,philly,1,100\n")
    assert f"{late}:3 field 'submit_time_s': must be in [0, 31536000]" in refused("trace", "validate", late)
    big = trace(head + "a,0,philly,512,100\n")
    assert runner.invoke(app, ["trace", "validate", big]).exit_code == 0  # fits some cluster
    line = refused("trace", "validate", big, "--cluster", "sia-hetero-64")
    assert f"{big}:2 field 'num_gpus'" in line and "has at most 24" in line
    unknown = trace("job_id,submit_time_s,model,num_gpus\na,0,resnet9000,1\n")
    assert f"{unknown}:2 field 'model': unknown model 'resnet9000'" in refused("trace", "validate", unknown)


@pytest.mark.parametrize(("args", "words"), [
    (("--k-min", "0"), ("--k-min must be in [2, 64]",)),
    (("--k-min", "9", "--k-max", "3"), ("--k-min (9) must not exceed --k-max (3)",)),
    (("--l-across", "nan"), ("--l-across must be in [1, 100]",)),
    (("--gpus", "100000000"), ("--gpus must be in [1, 65536]",)),
])
def test_variability_flags_take_the_ranges_of_pal(args, words):
    line = refused("variability", "show", "longhorn", *args)
    for w in words:
        assert w in line, line
