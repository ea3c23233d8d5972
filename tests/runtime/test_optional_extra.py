"""Ray and PyTorch are an optional extra: the simulator, compare and the CLI never import them."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from typer.testing import CliRunner
from dlsched.cli import app
res = CliRunner().invoke(app, ["compare", "--policies", "fifo,sia", "--cluster", "sia-physical-44",
                               "--trace", "synthetic:rate=10,hours=0.3,seed=1", "--workers", "2",
                               "--format", "json"])
assert res.exit_code == 0, res.output
assert len(res.stdout.strip().splitlines()) == 2
loaded = sorted(m for m in ("ray", "torch") if m in sys.modules)
print(",".join(loaded) or "none")
"""


def test_compare_with_workers_runs_without_ray_or_torch():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "none"
