"""The dry-run executor (the service's load benchmark: the executor's API, no processes) and the executor's
Ray-free parts: actor names, device names mapped to catalog types, node types read from Ray's node table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dlsched.core import Cluster, InputError, Node
from dlsched.runtime.dry_run import DryRunExecutor
from dlsched.runtime.executor_api import LaunchSpec, RankState, actor_name, parse_actor_name
from dlsched.runtime.ray_cluster import check_declared, detect_type, gpu_type_of_device, node_name

NODES = [Node(0, "t4", 2, name="t4-0"), Node(1, "a100", 2, name="a100-1")]


class Clock:
    """A settable clock, so the test decides when time passes."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def spec(tmp: Path, job_id: str, env: dict[str, str], incarnation: int = 0) -> LaunchSpec:
    return LaunchSpec(job_id, incarnation, "unused", str(tmp), env, (("t4-0", (0,)), ("a100-1", (1,))),
                      tmp / job_id)


def test_a_dry_run_job_runs_for_its_seconds_then_exits_0(tmp_path):
    clock = Clock()
    ex = DryRunExecutor(NODES, clock=clock)
    assert [(n.name, n.gpu_type, n.real_gpus) for n in ex.nodes()] == [("t4-0", "t4", False),
                                                                      ("a100-1", "a100", False)]
    assert ex.nodes()[0].slowdown > 2.0 and ex.nodes()[1].slowdown == 1.0
    assert ex.poll("j") == []
    ex.launch(spec(tmp_path, "j", {"DLSCHED_DRY_RUN_S": "30"}))
    assert [(s.rank, s.state, s.node) for s in ex.poll("j")] == [(0, RankState.RUNNING, "t4-0"),
                                                                 (1, RankState.RUNNING, "a100-1")]
    clock.now += 29.9
    assert {s.state for s in ex.poll("j")} == {RankState.RUNNING}
    clock.now += 0.1
    assert [(s.state, s.exit_code) for s in ex.poll("j")] == [(RankState.EXITED, 0)] * 2
    assert "incarnation 0 rank 1/2 on a100-1" in (tmp_path / "j" / "logs" / "rank1.log").read_text()
    assert ex.attach("j", 0, 2) and not ex.attach("j", 1, 2)
    ex.forget("j")
    assert ex.poll("j") == [] and not ex.attach("j", 0, 2)


def test_a_dry_run_job_without_a_duration_runs_until_stopped(tmp_path):
    clock = Clock()
    ex = DryRunExecutor(Cluster("two", tuple(NODES)), clock=clock)
    ex.launch(spec(tmp_path, "forever", {}))
    clock.now += 1e9
    assert {s.state for s in ex.poll("forever")} == {RankState.RUNNING}
    assert ex.hosted() == {"forever": {0}}
    ex.stop(["forever", "unknown"], grace_s=0)
    assert [(s.state, s.exit_code) for s in ex.poll("forever")] == [(RankState.EXITED, 0)] * 2


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_dry_run_duration_names_the_variable(tmp_path, value):
    with pytest.raises(InputError, match="field 'DLSCHED_DRY_RUN_S'"):
        DryRunExecutor(NODES).launch(spec(tmp_path, "j", {"DLSCHED_DRY_RUN_S": value}))


def test_dry_run_needs_neither_ray_nor_torch():
    code = ("import sys; import dlsched.runtime.dry_run, dlsched.runtime.executor; "
            "print(sorted(m for m in ('ray', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_actor_names_round_trip_even_with_slashes_in_job_ids():
    assert parse_actor_name(actor_name("team/job-1", 3, 7)) == ("team/job-1", 3, 7)
    assert parse_actor_name("someone-else") is None and parse_actor_name("a/b/c") is None


@pytest.mark.parametrize(("device", "gpu"), [
    ("Tesla T4", "t4"), ("T4", "t4"), ("Tesla V100-SXM2-32GB", "v100"), ("NVIDIA A100-SXM4-40GB", "a100"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie"), ("A100-80G", "a100"), ("Quadro RTX 6000", "quad"),
    ("Quadro RTX 5000", "rtx5000"), ("NVIDIA GeForce RTX 2080 Ti", "rtx"), ("NVIDIA A40", "a40"),
    ("NVIDIA GeForce RTX 3090", "rtx3090"), ("NVIDIA TITAN Xp", "titanxp"),
    ("NVIDIA H100 80GB HBM3", None), ("Quadro RTX 4000", None), ("NVIDIA RTX A6000", None),
])
def test_cuda_device_names_map_to_catalog_types(device, gpu):
    assert gpu_type_of_device(device) == gpu


def ray_node(resources: dict[str, float]) -> dict:
    """A row of Ray's node table (``ray.nodes()``), as Ray reports it."""
    return {"NodeID": "ab12cd34ef56" * 4, "Alive": True, "NodeManagerHostname": "gpu-host",
            "NodeManagerAddress": "10.0.0.5", "Resources": {"CPU": 8.0, **resources}}


def test_node_types_come_from_ray_resources():
    cache: dict = {}
    assert detect_type(None, ray_node({"dlsched_gpus_t4": 2.0}), cache) == ("t4", 2, False)
    assert detect_type(None, ray_node({"GPU": 4.0, "accelerator_type:V100": 1.0}), {}) == ("v100", 4, True)
    assert detect_type(None, ray_node({}), {}) is None
    assert node_name(ray_node({})) == "gpu-host-ab12cd34"
    assert node_name(ray_node({"dlsched_node_rack1-3": 1.0})) == "rack1-3"


@pytest.mark.parametrize(("resources", "message"), [
    ({"dlsched_gpus_zz9": 1.0}, "Ray node gpu-host-ab12cd34 offers emulated GPUs of unknown type 'zz9'"),
    ({"dlsched_gpus_t4": 1.0, "dlsched_gpus_v100": 1.0}, "offers several emulated GPU types"),
])
def test_a_node_with_an_unknown_type_is_a_clear_error(resources, message):
    with pytest.raises(InputError, match=f"field 'address'.*{message}"):
        detect_type(None, ray_node(resources), {})


def test_a_node_type_the_cluster_file_does_not_declare_is_named():
    with pytest.raises(InputError, match="field 'cluster'.*Ray node n7 has GPU type t4, which cluster two"):
        check_declared("n7", "t4", Cluster("two", (Node(0, "a100", 2),)))


def test_a_rank_gets_torchrun_variables_and_on_gpu_nodes_its_devices(tmp_path):
    from dlsched.runtime.executor import rank_env
    from dlsched.runtime.executor_api import NodeInfo

    gpu_node = NodeInfo("g1", "a100", 8, "ray-id", True, 1.0)
    cpu_node = NodeInfo("c1", "t4", 2, "ray-id-2", False, 2.9)
    launch = LaunchSpec("j", 2, "train", str(tmp_path), {"DLSCHED_GPU_TYPE": "a100", "X": "1"},
                        (("g1", (3,)), ("g1", (5,)), ("c1", (1,))), tmp_path)
    env = rank_env(launch, 1, gpu_node, (5,), "10.0.0.1", 29500)
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                "CUDA_VISIBLE_DEVICES", "X")} == {
        "RANK": "1", "WORLD_SIZE": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
        "CUDA_VISIBLE_DEVICES": "5", "X": "1"}
    env = rank_env(launch, 2, cpu_node, (1,), "10.0.0.1", 29500)
    assert env["LOCAL_RANK"] == "0" and "CUDA_VISIBLE_DEVICES" not in env
    assert env["DLSCHED_GPU_TYPE"] == "a100"  # the service's value wins over the node's
    assert env["DLSCHED_SLOWDOWN"] == "2.9"


@pytest.mark.parametrize("address", ["not-an-address", "127.0.0.1:{port}"])
def test_joining_an_address_where_no_ray_answers_names_the_address(tmp_path, address):
    from dlsched.runtime.executor import RayExecutor
    from dlsched.runtime.worker_host import free_port

    address = address.format(port=free_port())
    with pytest.raises(InputError, match=f"field 'address': no Ray cluster answers at '{address}'"):
        RayExecutor.join(address, tmp_path / "state", None)
