"""A Hops run is a function of its configuration: two processes give the same summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys

#: Every summary key but the wall-clock ones.
_CLOCK = {"policy_time_median_s", "policy_time_p99_s", "sim_wall_s"}


def _summary(hash_seed: str) -> dict:
    # Branch and bound on every plan (solver=milp), cut short by a work limit of a few nodes: the plans are
    # the limit's, not the optimum's, and must still not depend on the process or the machine's load.
    args = ["simulate", "--cluster", "hops-64", "--trace", "hops-table3:seed=3", "--jobs", "6", "--policy", "hops",
            "--set", "solver=milp", "--set", "mip_node_limit=2", "--format", "json"]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run([sys.executable, "-c", "from dlsched.cli import app; app()", *args], env=env,
                         capture_output=True, text=True, timeout=600, check=True)
    summary = json.loads(out.stdout.splitlines()[0])
    return {k: v for k, v in summary.items() if k not in _CLOCK}


def test_two_processes_give_the_same_summary():
    first, second = _summary("1"), _summary("2")
    assert first["completed"] == 6
    assert first == second
