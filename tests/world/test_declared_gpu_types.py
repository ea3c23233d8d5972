"""GPU types a cluster file declares: validated with one clear error, carried by the cluster, run by the world
and by ``dlsched simulate`` without any packaged file changing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.clusters import load_cluster
from dlsched.core import KNOWN_GPU_TYPES, InputError
from dlsched.world.base import World
from dlsched.world.throughput import ThroughputModel

runner = CliRunner()

MY_LAB = """\
name: my-lab
gpu_types:
  l40s: {like: a100, speed: 0.8, memory_gb: 48}     # speed relative to the known type named by 'like'
nodes:
  - {gpu_type: l40s, count: 2, gpus_per_node: 8}
  - {gpu_type: h100, count: 1, gpus_per_node: 8}
"""


def _write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _one_type(tmp_path: Path, decl: str, name: str) -> Path:
    text = f"name: {name}\ngpu_types:\n  mine: {decl}\nnodes:\n  - {{gpu_type: mine, count: 2, gpus_per_node: 8}}\n"
    return _write(tmp_path, text, f"{name}.yaml")


def _simulate(*args: str) -> dict:
    res = runner.invoke(app, ["simulate", "--jobs", "10", "--seed", "1", "--format", "json", *args],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_cluster_carries_the_declared_type(tmp_path: Path) -> None:
    cluster = load_cluster(str(_write(tmp_path, MY_LAB)))
    l40s = cluster.gpu_types["l40s"]
    assert (l40s.like, l40s.speed, l40s.memory_gb) == ("a100", 0.8, 48.0)
    assert l40s.rank == KNOWN_GPU_TYPES["a100"].rank and l40s.interconnect == "NVLink 3"
    assert cluster.gpu_types["h100"] is KNOWN_GPU_TYPES["h100"]
    assert "l40s" not in KNOWN_GPU_TYPES


def test_the_world_derives_the_declared_type_from_its_like(tmp_path: Path) -> None:
    world = World(load_cluster(str(_write(tmp_path, MY_LAB))))
    tm, packaged = world.throughput, ThroughputModel.load()
    assert "l40s" not in packaged.known_types()  # nothing shared was patched
    assert tm.relative_speed("l40s") == pytest.approx(0.8 * tm.relative_speed("a100"))
    for model in tm.models():
        mine, _ = tm.step_time(model, "l40s", (tm.stages(model, "a100"),), 2)
        base, _ = tm.step_time(model, "a100", (tm.stages(model, "a100"),), 2)
        if tm.stages(model, "a100") == 1:
            assert mine == pytest.approx(base / 0.8, rel=1e-12), model
        assert tm.max_local_bsz(model, "l40s") == max(1, int(tm.max_local_bsz(model, "a100") * 48 / 40))
        assert tm.provenance("l40s")[model]["kind"] == "declared"
    # a second world of the same declarations shares the derived model (and its batch cache)
    assert World(load_cluster(str(_write(tmp_path, MY_LAB, "again.yaml")))).throughput is tm


def test_simulate_runs_a_cluster_file_with_a_declared_type(tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = runner.invoke(app, ["simulate", "--cluster", str(_write(tmp_path, MY_LAB)), "--jobs", "10",
                              "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    with (out / "jobs.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 10
    assert sum(float(r["gpu_s_l40s"]) for r in rows) > 0  # jobs ran on the declared type


def test_a_declared_type_at_speed_1_is_its_like_and_a_slower_one_is_slower(tmp_path: Path) -> None:
    plain = _write(tmp_path, "name: plain\nnodes:\n  - {gpu_type: a100, count: 2, gpus_per_node: 8}\n",
                   "plain.yaml")
    same = _simulate("--cluster", str(_one_type(tmp_path, "{like: a100, speed: 1}", "same")))
    base = _simulate("--cluster", str(plain))
    slow = _simulate("--cluster", str(_one_type(tmp_path, "{like: a100, speed: 0.25}", "slow")))
    skip = {"cluster", "sim_wall_s", "policy_time_median_s", "policy_time_p99_s"}
    assert {k: v for k, v in same.items() if k not in skip} == {k: v for k, v in base.items() if k not in skip}
    assert slow["completed"] == 10 and slow["avg_jct_s"] > 1.5 * base["avg_jct_s"]


@pytest.mark.parametrize(("decl", "field", "words"), [
    ("{like: b200, speed: 0.8}", "gpu_types.mine.like", "unknown GPU type 'b200'"),
    ("{like: a100, speed: 0}", "gpu_types.mine.speed", "(allowed: [0.01, 100])"),
    ("{like: a100, speed: -1}", "gpu_types.mine.speed", "got -1"),
    ("{like: a100, speed: true}", "gpu_types.mine.speed", "must be a number"),
    ("{like: a100}", "gpu_types.mine.speed", "Field required"),
    ("{like: a100, speed: 1, memory_gb: 0}", "gpu_types.mine.memory_gb", "(allowed: [1, 4096])"),
    ("{like: a100, speed: 1, sped: 2}", "gpu_types.mine.sped", "Extra inputs"),
])
def test_a_bad_declaration_is_one_error_line_naming_file_and_field(tmp_path: Path, decl: str, field: str,
                                                                   words: str) -> None:
    path = _one_type(tmp_path, decl, "bad")
    res = runner.invoke(app, ["simulate", "--cluster", str(path), "--jobs", "2"], catch_exceptions=False)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: {path} field '{field}': ") and words in lines[0], lines[0]


@pytest.mark.parametrize(("text", "words"), [
    ("gpu_types:\n  a100: {like: v100, speed: 2}\nnodes:\n  - {gpu_type: a100, count: 1, gpus_per_node: 8}\n",
     "'a100' is a known GPU type"),
    ("gpu_types:\n  L40S: {like: a100, speed: 1}\nnodes:\n  - {gpu_type: L40S, count: 1, gpus_per_node: 8}\n",
     "must be lowercase"),
    ("nodes:\n  - {gpu_type: l40s, count: 1, gpus_per_node: 8}\n", "or declare it under gpu_types"),
])
def test_names_are_new_and_node_types_known_or_declared(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(InputError, match=words):
        load_cluster(str(_write(tmp_path, "name: c\n" + text)))


def test_the_runtime_emulates_a_declared_type_by_its_speed(tmp_path: Path) -> None:
    """``dlsched run`` stretches steps by the world's relative speeds; a declared type has one too."""
    from dlsched.runtime.emulation import slowdowns

    cluster = load_cluster(str(_write(tmp_path, MY_LAB)))
    tm = ThroughputModel.load()
    factors = slowdowns(cluster)
    assert factors["h100"] == 1.0
    assert factors["l40s"] == pytest.approx(tm.relative_speed("h100") / (0.8 * tm.relative_speed("a100")))
