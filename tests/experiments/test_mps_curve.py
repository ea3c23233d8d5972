"""experiments/mps on CPU: parsing a measurement log, fitting the curve, and the world reading the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlsched.core import InputError
from dlsched.world.sharing import MpsCurve

MPS = Path(__file__).resolve().parents[2] / "experiments" / "mps"
sys.path.insert(0, str(MPS))

from curve import curve_file, parse_log, write  # noqa: E402


def log_of(curve: MpsCurve, base: float = 2000.0) -> str:
    lines = ["warming up"]
    for pct in range(10, 101, 10):
        lines.append(f"pct={pct} solo samples_per_s={base * curve.speed(pct / 100):.4f}")
        lines.append(f"pct={pct} pair samples_per_s={0.7 * base * curve.speed(pct / 100):.4f}")
    return "\n".join(lines)


def test_a_measured_log_becomes_a_curve_file_the_world_reads(tmp_path):
    truth = MpsCurve(6.0)
    content = curve_file(parse_log(log_of(truth)), gpu="NVIDIA A40", model="resnet18")
    assert content["points"][-1] == [100.0, 1.0] and len(content["points"]) == 10
    assert content["k"] == pytest.approx(6.0, rel=1e-2)
    path = tmp_path / "curve.json"
    write(content, path)
    assert MpsCurve.from_file(str(path)).k == pytest.approx(6.0, rel=1e-2)
    from dlsched.world.base import World, WorldConfig
    from testkit import small_cluster

    world = World(small_cluster((("a40", 1, 2),)), WorldConfig(mps_curve=str(path)))
    assert world.sharing.curve.speed(0.5) == pytest.approx(truth.speed(0.5), rel=1e-2)


def test_malformed_lines_and_missing_baseline_are_refused_naming_the_line():
    with pytest.raises(InputError, match="log.txt:2"):
        parse_log("ok\npct=50 solo samples_per_s=abc", source="log.txt")
    with pytest.raises(InputError, match="pct=100"):
        curve_file(parse_log("pct=50 solo samples_per_s=10"), gpu="x", model="y")


def test_a_bad_curve_file_stops_the_run_before_it_starts(tmp_path):
    from dlsched.world.base import World, WorldConfig
    from testkit import small_cluster

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"points": [[50, 0.9], [150, 1.0]]}))
    with pytest.raises(InputError, match=r"points\[1\]"):
        World(small_cluster((("a40", 1, 2),)), WorldConfig(mps_curve=str(path)))


def test_measuring_without_a_gpu_says_so():
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present: this test covers machines without one")
    except ImportError:
        pass
    got = subprocess.run([sys.executable, str(MPS / "measure.py"), "--steps", "1"], capture_output=True, text=True)
    assert got.returncode == 2
    assert got.stderr.startswith("error:") and "GPU" in got.stderr and "Traceback" not in got.stderr
