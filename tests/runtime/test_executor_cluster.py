"""The Ray executor joined to a real multi-node Ray cluster on this machine (a head and CPU nodes offering
emulated GPUs through ``dlsched_gpus_<type>``): it sees the nodes with their types, a job on a node that is
killed shows LOST ranks and leaves no orphan training, and membership follows nodes leaving and joining."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the runtime extra (Ray) is not installed")

from dlsched.core import Cluster, InputError, Node  # noqa: E402
from dlsched.runtime.emulation import relative_speeds  # noqa: E402
from dlsched.runtime.executor import LaunchSpec, RankState, RayExecutor  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_executor import RANK_PROGRAM, pid_alive, pids_of, wait_for  # noqa: E402

from raynodes import RayNodes  # noqa: E402

pytestmark = [pytest.mark.timeout(180), pytest.mark.xdist_group("ray")]

@pytest.fixture(scope="module")
def ray_nodes():
    cluster = RayNodes()
    try:
        t4 = cluster.add({"dlsched_gpus_t4": 2})
        big = cluster.add({"dlsched_gpus_a100": 2, "dlsched_node_big": 1})
        yield cluster, t4, big
    finally:
        ray.shutdown()
        cluster.shutdown()


def node_id_with(resource: str) -> str:
    return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"])


def test_join_checks_node_types_against_the_cluster_file(ray_nodes, tmp_path):
    cluster = ray_nodes[0]
    only_a100 = Cluster("only-a100", (Node(0, "a100", 2, name="a"),))
    with pytest.raises(InputError, match=r"field 'cluster'.*GPU type t4, which cluster only-a100 does not declare"):
        RayExecutor.join(cluster.address, tmp_path / "state", only_a100)


def test_a_killed_node_loses_its_ranks_and_their_processes_and_membership_follows(ray_nodes, tmp_path):
    cluster, t4, _ = ray_nodes
    ex = RayExecutor.join(cluster.address, tmp_path / "state", None)
    try:
        nodes = {n.gpu_type: n for n in ex.nodes()}
        assert set(nodes) == {"t4", "a100"}  # the head offers no GPUs and is no dlsched node
        speeds = relative_speeds()
        assert nodes["a100"].name == "big" and nodes["a100"].slowdown == 1.0
        assert nodes["t4"].slowdown == pytest.approx(speeds["a100"] / speeds["t4"])
        assert nodes["t4"].num_gpus == 2 and not nodes["t4"].real_gpus
        t4_id = node_id_with("dlsched_gpus_t4")
        assert nodes["t4"].ray_node_id == t4_id and nodes["t4"].name.endswith("-" + t4_id[:8])

        out = tmp_path / "job" / "out"
        out.mkdir(parents=True)
        # the shell forks a grandchild (sleep) that the parent-death signal alone would not reach
        command = f"sleep 300 & echo $! > {out}/gc$RANK; exec {sys.executable} {RANK_PROGRAM}"
        spec = LaunchSpec("split", 0, command, str(tmp_path), {"OUT_DIR": str(out), "EXEC_MODE": "sleep"},
                          (("big", (0,)), (nodes["t4"].name, (1,))), tmp_path / "job")
        ex.launch(spec)
        pids = pids_of(tmp_path, "job", 2)
        wait_for(lambda: all((out / f"gc{r}").exists() and (out / f"gc{r}").read_text() for r in range(2)),
                 what="the grandchildren's pid files")
        grandchildren = [int((out / f"gc{r}").read_text()) for r in range(2)]
        assert [s.state for s in ex.poll("split")] == [RankState.RUNNING] * 2

        cluster.kill_raylet(t4)
        statuses = wait_for(lambda: (lambda s: s if s[1].state is RankState.LOST else None)(ex.poll("split")),
                            timeout_s=60, what="rank 1 to be lost")
        assert statuses[0].state is RankState.RUNNING and statuses[1].node == nodes["t4"].name
        wait_for(lambda: not pid_alive(pids[1]) and not pid_alive(grandchildren[1]), timeout_s=20,
                 what="the killed node's training processes to die")
        assert pid_alive(pids[0]) and pid_alive(grandchildren[0])
        wait_for(lambda: {n.gpu_type for n in ex.nodes()} == {"a100"}, what="the dead node to leave")

        cluster.add({"dlsched_gpus_v100": 1})
        joined = wait_for(lambda: [n for n in ex.nodes() if n.gpu_type == "v100"], what="the new node")
        assert joined[0].num_gpus == 1 and joined[0].slowdown == pytest.approx(speeds["a100"] / speeds["v100"])

        t0 = time.monotonic()
        ex.stop(["split"], grace_s=20)
        assert time.monotonic() - t0 < 15
        final = ex.poll("split")
        assert [(s.state, s.exit_code) for s in final] == [(RankState.EXITED, 0), (RankState.LOST, None)]
        wait_for(lambda: not pid_alive(pids[0]) and not pid_alive(grandchildren[0]), what="rank 0 to end")
    finally:
        ex.close(stop_ray=False)
