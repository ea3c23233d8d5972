"""The Ray executor on a local Ray of its own: real Ray, real processes. Ranks run and exit with their
codes, logs gather each incarnation's output, stop is SIGTERM then SIGKILL, and a driver that is killed
(-9) or has gone leaves its workers running for the next one to find by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the runtime extra (Ray) is not installed")

from dlsched.runtime import ray_cluster  # noqa: E402
from dlsched.runtime.executor import LaunchSpec, RankState, RayExecutor  # noqa: E402
from dlsched.runtime.worker_host import free_port  # noqa: E402

HERE = Path(__file__).parent
RANK_PROGRAM = HERE / "executor_rank.py"
DRIVER = HERE / "executor_driver.py"
sys.path.insert(0, str(HERE))
from executor_driver import NODES  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("ray")]


def pid_alive(pid: int) -> bool:
    """Whether a process runs (a zombie left for init to reap does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def pids_of(tmp: Path, job_id: str, world: int) -> list[int]:
    """The ranks' process ids, once each has written its pid file."""
    files = [tmp / job_id / "out" / f"pid{r}" for r in range(world)]
    wait_for(lambda: all(f.exists() and f.read_text() for f in files), what=f"{job_id}'s pid files")
    return [int(f.read_text()) for f in files]


def make_spec(tmp: Path, job_id: str, mode: str, *, incarnation: int = 0, ranks=(("t4-0", (0,)), ("t4-0", (1,))),
              exit_code: int = 0) -> LaunchSpec:
    out = tmp / job_id / "out"
    out.mkdir(parents=True, exist_ok=True)
    env = {"OUT_DIR": str(out), "EXEC_MODE": mode, "EXIT_CODE": str(exit_code), "JOB_VAR": "from-the-job",
           "DLSCHED_JOB_ID": job_id, "PYTHONPATH": ""}
    return LaunchSpec(job_id, incarnation, f"exec {sys.executable} {RANK_PROGRAM}", str(tmp), env,
                      tuple(ranks), tmp / job_id)


def spec_json(spec: LaunchSpec) -> str:
    return json.dumps({"job_id": spec.job_id, "incarnation": spec.incarnation, "command": spec.command,
                       "working_dir": spec.working_dir, "env": spec.env, "ranks": spec.ranks,
                       "job_dir": str(spec.job_dir)})


def driver(state: Path, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd() / "src"), str(HERE)])}
    return subprocess.Popen([sys.executable, str(DRIVER), str(state), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kwargs)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """A driver that started the local Ray and a 2-rank job, then was killed with SIGKILL."""
    tmp = tmp_path_factory.mktemp("executor")
    state = tmp / "state"
    spec = make_spec(tmp, "survivor", "sleep")
    proc = driver(state, "launch-and-hang", spec_json(spec))
    try:
        line = proc.stdout.readline()
        assert line.strip() == "launched", proc.stderr.read()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    info = ray_cluster.read_ray_json(state)
    assert info is not None
    yield tmp, state, spec, info
    if ray_cluster.is_alive(info):  # the executor fixture failed before it could stop it
        ray_cluster.stop_local_ray(state, info)


@pytest.fixture(scope="module")
def executor(crashed):
    tmp, state, _, info = crashed
    ex = RayExecutor.local(state, NODES)
    yield ex
    ex.close(stop_ray=True)
    assert not ray_cluster.is_alive(info)
    assert not (state / "ray.json").exists()


def test_a_new_driver_reconnects_to_the_same_ray_and_attaches_after_a_kill_9(crashed, executor):
    tmp, state, spec, info = crashed
    assert executor.local_ray == info  # reconnected to the Ray of ray.json, not a new one
    pids = pids_of(tmp, "survivor", 2)
    assert all(pid_alive(p) for p in pids)
    assert executor.attach("survivor", 0, 2)
    assert [s.state for s in executor.poll("survivor")] == [RankState.RUNNING] * 2
    assert executor.hosted()["survivor"] == {0}
    executor.stop(["survivor"], grace_s=20)
    assert [(s.state, s.exit_code) for s in executor.poll("survivor")] == [(RankState.EXITED, 0)] * 2
    assert not any(pid_alive(p) for p in pids)
    assert "survivor" not in executor.hosted()


def test_ranks_run_then_exit_with_their_codes_and_log_each_incarnation(crashed, executor):
    tmp = crashed[0]
    assert executor.poll("nothing") == []
    for incarnation in (0, 1):
        spec = make_spec(tmp, "coded", "wait", incarnation=incarnation, exit_code=3)
        (tmp / "coded" / "out" / "go").unlink(missing_ok=True)
        executor.launch(spec)
        statuses = executor.poll("coded")
        assert [(s.rank, s.state, s.node) for s in statuses] == [(0, RankState.RUNNING, "t4-0"),
                                                                 (1, RankState.RUNNING, "t4-0")]
        (tmp / "coded" / "out" / "go").touch()
        final = wait_for(lambda: [s for s in executor.poll("coded") if s.state is RankState.EXITED]
                         if all(s.state is RankState.EXITED for s in executor.poll("coded")) else None,
                         what="both ranks to exit")
        assert [s.exit_code for s in final] == [3, 4]
    envs = []
    for rank in range(2):
        text = (tmp / "coded" / "logs" / f"rank{rank}.log").read_text()
        headers = [line for line in text.splitlines() if line.startswith("==== dlsched job coded")]
        assert [f"incarnation {k} rank {rank}/2 on t4-0" in h for k, h in enumerate(headers)] == [True, True]
        assert text.count("done") == 2
        envs.append(json.loads(text.splitlines()[1].removeprefix("env ")))
    assert [e["RANK"] for e in envs] == ["0", "1"] and [e["LOCAL_RANK"] for e in envs] == ["0", "1"]
    assert {e["WORLD_SIZE"] for e in envs} == {"2"} and {e["JOB_VAR"] for e in envs} == {"from-the-job"}
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}) == 1 and envs[0]["MASTER_PORT"].isdigit()
    assert envs[0]["DLSCHED_GPU_TYPE"] == "t4" and float(envs[0]["DLSCHED_SLOWDOWN"]) > 2.0
    assert envs[0]["CUDA_VISIBLE_DEVICES"] is None  # emulated GPUs: no devices to pick
    executor.forget("coded")
    assert executor.poll("coded") == [] and "coded" not in executor.hosted()


def test_stop_terms_then_kills_after_the_grace_for_jobs_together(crashed, executor):
    tmp = crashed[0]
    polite = make_spec(tmp, "polite", "sleep", ranks=(("a100-1", (0,)),))
    stubborn = make_spec(tmp, "stubborn", "stubborn", ranks=(("a100-1", (1,)), ("t4-0", (0,))))
    for spec in (polite, stubborn):
        executor.launch(spec)
    pids = pids_of(tmp, "stubborn", 2) + pids_of(tmp, "polite", 1)
    t0 = time.monotonic()
    executor.stop(["polite", "stubborn"], grace_s=3.0)
    took = time.monotonic() - t0
    assert 3.0 <= took < 20.0
    assert [(s.state, s.exit_code) for s in executor.poll("polite")] == [(RankState.EXITED, 0)]
    assert [(s.state, s.exit_code) for s in executor.poll("stubborn")] == [(RankState.EXITED, 137)] * 2
    assert "term: checkpointed" in (tmp / "polite" / "logs" / "rank0.log").read_text()
    assert not any(pid_alive(p) for p in pids)
    assert not {"polite", "stubborn"} & set(executor.hosted())


def test_attach_from_a_second_driver_after_the_launching_one_left(crashed, executor):
    tmp, state = crashed[0], crashed[1]
    spec = make_spec(tmp, "handover", "sleep")
    launcher = driver(state, "launch-and-exit", spec_json(spec))
    out, err = launcher.communicate(timeout=90)
    assert launcher.returncode == 0 and out.strip() == "launched", err
    attacher = driver(state, "attach", "handover", "0", "2", "stop")
    out, err = attacher.communicate(timeout=90)
    assert attacher.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["attached"] and report["address"] == executor.local_ray.address
    assert report["before"] == [[0, "running", None], [1, "running", None]]
    assert report["after"] == [[0, "exited", 0], [1, "exited", 0]]
    assert "handover" not in executor.hosted()


def test_attach_after_a_lost_rank_leaves_nothing_running(crashed, executor):
    tmp = crashed[0]
    spec = make_spec(tmp, "broken", "sleep")
    executor.launch(spec)
    pids = pids_of(tmp, "broken", 2)
    executor.ray.kill(executor.ray.get_actor("broken/0/1", namespace=executor.namespace))
    assert wait_for(lambda: not pid_alive(pids[1]), what="rank 1's process to die with its host")
    assert [s.state for s in executor.poll("broken")] == [RankState.RUNNING, RankState.LOST]
    assert not executor.attach("broken", 0, 2)
    assert wait_for(lambda: not pid_alive(pids[0]), what="rank 0's process to be stopped")
    assert executor.poll("broken") == [] and "broken" not in executor.hosted()
    assert not executor.attach("never-launched", 0, 1)


def test_a_rank_that_cannot_start_or_has_no_node(crashed, executor):
    tmp = crashed[0]
    spec = make_spec(tmp, "nowhere", "wait", ranks=(("no-such-node", (0,)),))
    executor.launch(spec)
    assert [(s.state, s.node) for s in executor.poll("nowhere")] == [(RankState.LOST, "no-such-node")]
    bad_dir = LaunchSpec("baddir", 0, "true", str(tmp / "missing"), {}, (("t4-0", (0,)),), tmp / "baddir")
    executor.launch(bad_dir)
    assert [(s.state, s.exit_code) for s in executor.poll("baddir")] == [(RankState.EXITED, 127)]
    assert "error: cannot start the command" in (tmp / "baddir" / "logs" / "rank0.log").read_text()
    for job in ("nowhere", "baddir"):
        executor.forget(job)


def test_a_dead_ray_in_ray_json_is_replaced_by_a_new_one(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    dead = ray_cluster.LocalRay(f"127.0.0.1:{free_port()}", str(tmp_path / "gone"), 2**22 - 1)
    (state / "ray.json").write_text(dead.to_json())
    proc = driver(state, "fresh")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["address"] != dead.address and report["nodes"] == 2
    assert not (state / "ray.json").exists()  # stopped on request, and forgotten
