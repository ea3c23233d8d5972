"""Cluster files: numbers are strict and bounded by what they mean, and a refusal names file, field, range."""

from __future__ import annotations

import pytest

from dlsched.clusters import load_cluster
from dlsched.core import InputError


def _cluster(tmp_path, group: str):
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\nnodes:\n  - {{gpu_type: v100, count: 2, {group}}}\n")
    return path


@pytest.mark.parametrize(("group", "field", "allowed"), [
    ("gpus_per_node: true", "nodes.0.gpus_per_node", "a whole number in [1, 64]"),
    ("gpus_per_node: 2.5", "nodes.0.gpus_per_node", "a whole number in [1, 64]"),
    ("gpus_per_node: 65", "nodes.0.gpus_per_node", "a whole number in [1, 64]"),
    ("gpus_per_node: 4, speed_factor: .inf", "nodes.0.speed_factor", "[0.01, 100]"),
    ("gpus_per_node: 4, speed_factor: .nan", "nodes.0.speed_factor", "[0.01, 100]"),
    ("gpus_per_node: 4, speed_factor: 1e-300", "nodes.0.speed_factor", "[0.01, 100]"),
    ("gpus_per_node: 4, speed_factor: true", "nodes.0.speed_factor", "[0.01, 100]"),
    ("gpus_per_node: 4, count: 100000000", "nodes.0.count", "a whole number in [1, 65536]"),
])
def test_out_of_range_groups_are_refused_with_the_range(tmp_path, group, field, allowed):
    path = _cluster(tmp_path, group)
    with pytest.raises(InputError) as err:
        load_cluster(str(path))
    assert str(err.value).startswith(f"{path} field '{field}': ")
    assert f"(allowed: {allowed})" in str(err.value)


def test_a_cluster_of_too_many_gpus_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: c\nnodes:\n  - {gpu_type: v100, count: 60000, gpus_per_node: 8}\n")
    with pytest.raises(InputError, match="480000 GPUs; a cluster may have at most 131072"):
        load_cluster(str(path))


def test_exponent_without_a_dot_is_a_number(tmp_path):
    cluster = load_cluster(str(_cluster(tmp_path, "gpus_per_node: 4, speed_factor: 5e-1")))
    assert cluster.nodes[0].speed_factor == 0.5
