"""``dlsched run``: bad input is one error line before Ray starts; a small real run prints simulate's keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli import app

runner = CliRunner()
pytest.importorskip("ray", reason="the runtime extra (Ray) is not installed")
pytest.importorskip("torch", reason="the runtime extra (PyTorch) is not installed")

#: Ray tests run one after another on one xdist worker (see tests/runtime/test_ray_runtime.py).
pytestmark = pytest.mark.xdist_group("ray")

TINY = """\
jobs:
  - {job_id: a, model: mlp, gpus: 1, samples: 1024, epochs: 3}
  - {job_id: b, model: transformer, gpus: 2, samples: 256, epochs: 2, submit_s: 1}
"""


def _refused(*args: str) -> str:
    res = runner.invoke(app, ["run", *args], catch_exceptions=False)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


@pytest.mark.parametrize(("trace_text", "args", "words"), [
    (None, ("--trace", "no-such-trace"), ("no runtime trace 'no-such-trace'", "runtime-demo")),
    ("jobs:\n  - {job_id: a, model: mlp}\n", (), ("trace.yaml", "field 'jobs.0'", "epochs or target_loss")),
    ("jobs:\n  - {job_id: a, model: vgg, epochs: 1}\n", (), ("trace.yaml", "field 'jobs.0.model'",)),
    ("jobs:\n  - {job_id: a, model: mlp, epochs: -1}\n", (), ("field 'jobs.0.epochs'", "greater than 0")),
    ("jobs: [\n", (), ("trace.yaml:", "not YAML")),
    ("jobs:\n  - {job_id: a, model: mlp, epochs: 1, gpus: 9}\n", (), ("job a asks for 9 GPUs",)),
    (None, ("--policy", "nope"), ("unknown policy 'nope'",)),
    (None, ("--cluster", "no-such-cluster"), ("no-such-cluster",)),
    (None, ("--round-s", "0"), ("field 'round_s'", "[1, 86400]")),
])
def test_bad_input_is_one_error_line(tmp_path: Path, trace_text, args, words):
    if trace_text is not None:
        (tmp_path / "trace.yaml").write_text(trace_text)
        args = ("--trace", str(tmp_path / "trace.yaml"), *args)
    line = _refused(*args)
    for w in words:
        assert w in line, line


def test_small_real_run_prints_the_summary_keys_of_simulate(tmp_path: Path):
    (tmp_path / "tiny.yaml").write_text(TINY)
    res = runner.invoke(app, ["run", "--trace", str(tmp_path / "tiny.yaml"), "--policy", "fifo", "--round-s", "4",
                              "--checkpoint-dir", str(tmp_path / "ckpt"), "--format", "json",
                              "--out", str(tmp_path / "out")],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    sim = runner.invoke(app, ["simulate", "--cluster", "sia-physical-44", "--trace",
                              "synthetic:rate=10,hours=0.2,seed=1", "--format", "json",
                              "--out", str(tmp_path / "sim")], catch_exceptions=False)
    sim_keys = set(json.loads(sim.stdout.strip().splitlines()[-1]))
    assert sim_keys <= set(summary)
    assert summary["completed"] == summary["jobs"] == 2
    assert summary["gpu_emulation"].startswith("emulated")
    assert (tmp_path / "ckpt" / "a" / "checkpoint.pt").is_file()

    # --out: simulate's tables with simulate's columns (the per-GPU-type ones are the cluster's types), the
    # summary printed, the command's configuration
    import pandas as pd

    out = tmp_path / "out"
    for name, per_type in (("jobs.csv", "gpu_s_"), ("rounds.csv", "gpus_")):
        real, simulated = pd.read_csv(out / name), pd.read_csv(tmp_path / "sim" / name)
        assert [c for c in real.columns if not c.startswith(per_type)] == \
            [c for c in simulated.columns if not c.startswith(per_type)]
        assert {c.removeprefix(per_type) for c in real.columns if c.startswith(per_type)} <= {"t4", "rtx", "a100"}
    jobs = pd.read_csv(out / "jobs.csv")
    assert sorted(jobs["job_id"]) == ["a", "b"] and jobs["finish_s"].notna().all()
    assert json.loads((out / "summary.json").read_text()) == summary
    config = json.loads((out / "config.json").read_text())
    assert config["policy"] == "fifo" and config["round_s"] == 4 and [j["job_id"] for j in config["trace_jobs"]] == ["a", "b"]
    reports = json.loads((out / "reports.json").read_text())
    assert reports["reports"]["a"][-1]["done"] and reports["throughput_obs"]["b"][0]["num_gpus"] == 2


def test_a_bad_out_folder_is_refused_before_ray_starts(tmp_path: Path):
    (tmp_path / "taken").write_text("a file, not a folder")
    line = _refused("--out", str(tmp_path / "taken"))
    assert "taken" in line
