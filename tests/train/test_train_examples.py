"""The examples: each job spec names a script that exists, and a shipped-model example runs as a job."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from train_launch import SRC, Job, start, wait

from dlsched.train.reports import read_reports

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPECS = sorted(EXAMPLES.glob("*.yaml"))

pytestmark = pytest.mark.timeout(180)


def test_there_is_a_spec_per_example() -> None:
    assert {p.stem for p in SPECS} == {"mlp", "resnet", "transformer", "torchvision_resnet18", "plain_ddp"}


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_job_spec_names_its_script(spec: Path) -> None:
    data = yaml.safe_load(spec.read_text())
    # a dlsched.train example gives its batch; the unmodified script's batch is its own business
    assert set(data) >= {"name", "command", "gpus", "adaptivity"} | ({"batch_size"} if spec.stem != "plain_ddp" else set())
    words = shlex.split(data["command"])
    assert words[0] == "python"
    assert (spec.parent / data.get("working_dir", ".") / words[1]).is_file()
    if data["adaptivity"] == "adaptive":
        assert data["max_batch_size"] >= data["batch_size"]


def test_mlp_example_runs_as_a_two_rank_job(tmp_path: Path) -> None:
    job = Job(tmp_path / "job", tmp_path / "job" / "checkpoints")
    job.job_dir.mkdir()
    procs = start(job, 2, ["--epochs", "1", "--samples", "512"], script=EXAMPLES / "mlp.py",
                  DLSCHED_BATCH_SIZE="32")
    results = wait(procs)
    assert [rc for rc, _ in results] == [0, 0], results
    reports = read_reports(job.job_dir)
    assert reports[0]["type"] == "start" and reports[0]["batch_size"] == 32
    assert reports[-1] == {**reports[-1], "type": "done", "step": 16}
    assert "mlp: 1 epochs done after 16 steps" in results[0][1]


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is not None, reason="torchvision is installed")
def test_torchvision_example_says_it_needs_torchvision() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLES / "torchvision_resnet18.py")], capture_output=True,
                          text=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0
    assert "torchvision is not installed" in proc.stdout
