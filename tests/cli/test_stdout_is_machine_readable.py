"""stdout carries only the result, even where a native library writes to the process's file descriptor 1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("policy", ["gavel", "sia"])
def test_json_output_of_lp_based_policies_parses_line_by_line(policy):
    # Gavel and Sia solve with HiGHS, whose banner goes to C-level stdout on the first solver instance.
    cmd = [sys.executable, "-c", "from dlsched.cli import main; main()", "simulate", "--policy", policy,
           "--trace", "synthetic:rate=20,hours=1,seed=3", "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    assert lines, out.stderr
    for line in lines:
        row = json.loads(line)
        assert row["policy"] == policy and row["completed"] >= 1
