"""The runtime on a real 2-node Ray cluster (two Ray nodes on this machine): real jobs under a scheduler
preset finish, survive a forced re-allocation and a killed worker, and never lose or repeat a step."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the runtime extra (Ray) is not installed")
pytest.importorskip("torch", reason="the runtime extra (PyTorch) is not installed")

from dlsched.core import Decision, Placement  # noqa: E402
from dlsched.policies import build_scheduler  # noqa: E402
from dlsched.runtime.driver import RuntimeJobFailed, RuntimeOptions, RuntimeRun  # noqa: E402
from dlsched.runtime.training import load_checkpoint  # noqa: E402
from dlsched.runtime.worker import node_resources  # noqa: E402
from dlsched.runtime.workload import RuntimeTrace, load_cluster  # noqa: E402
from raynodes import RayNodes  # noqa: E402
from testkit import Recorder  # noqa: E402

#: Every test that starts Ray runs on one pytest-xdist worker, one after another: Ray clusters started side
#: by side on a two-core machine starve each other's start-up and health checks.
pytestmark = pytest.mark.xdist_group("ray")

CLUSTER_YAML = """\
name: two-node
nodes:
  - {gpu_type: t4, count: 1, gpus_per_node: 2}
  - {gpu_type: a100, count: 1, gpus_per_node: 2}
"""


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    path = tmp_path_factory.mktemp("cluster") / "two-node.yaml"
    path.write_text(CLUSTER_YAML)
    cluster = load_cluster(str(path))
    res = node_resources(cluster)
    # two `ray start` nodes, each in a temporary folder of its own with every port picked free, so no other
    # Ray on the machine (another test's, a user's) shares a port or a session folder with them
    nodes = RayNodes(resources=res[0])
    try:
        nodes.add(res[1])
        ray.init(address=nodes.address, include_dashboard=False, log_to_driver=False, logging_level="warning")
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        yield cluster
    finally:
        ray.shutdown()
        nodes.shutdown()


def assert_sampler_audit(history, samples: int) -> None:
    assert [h[0] for h in history] == list(range(len(history)))
    epoch_, offset_ = 0, 0
    for _, epoch, offset, batch in history:
        assert (epoch, offset) == (epoch_, offset_)
        offset_ = offset + batch
        if offset_ == samples:
            epoch_, offset_ = epoch + 1, 0


class MoveOnce:
    """A preset whose decision in round ``at`` is shifted to the other node: a forced re-allocation."""

    def __init__(self, inner, at: int, num_gpus: int) -> None:
        self.inner, self.at, self.calls, self.num_gpus = inner, at, 0, num_gpus
        self.name, self.traits = inner.name, inner.traits
        self.moved: list[str] = []

    def describe(self) -> str:
        return self.inner.describe()

    def schedule(self, view) -> Decision:
        decision = self.inner.schedule(view)
        self.calls += 1
        if self.calls - 1 == self.at:
            half = self.num_gpus // 2
            for job_id, alloc in list(decision.allocations.items()):
                moved = Placement.of((g + half) % self.num_gpus for g in alloc.placement.gpus)
                decision.place(job_id, moved, alloc.batch_size, alloc.gpu_share)
                self.moved.append(job_id)
        return decision


def _trace(jobs) -> RuntimeTrace:
    return RuntimeTrace.model_validate({"jobs": jobs})


def _check_jobs_resumed_exactly(run_result, trace: RuntimeTrace, ckpt: Path) -> None:
    for job in trace.jobs:
        reports = run_result.reports[job.job_id]
        assert reports and reports[-1]["done"]
        state, _, _ = load_checkpoint(ckpt / job.job_id)
        assert state.done and len(state.history) == reports[-1]["step"]
        assert_sampler_audit(state.history, job.samples)
        assert state.samples_seen >= (job.epochs or 0) * job.samples or state.loss_ema <= (job.target_loss or 0)


def test_three_jobs_survive_a_forced_reallocation(two_nodes, tmp_path: Path):
    trace = _trace([
        {"job_id": "mlp", "model": "mlp", "gpus": 1, "samples": 4096, "epochs": 20, "adaptivity": "rigid"},
        {"job_id": "cnn", "model": "resnet", "gpus": 1, "samples": 512, "epochs": 6, "adaptivity": "rigid"},
        {"job_id": "lm", "model": "transformer", "gpus": 1, "samples": 1024, "epochs": 8, "adaptivity": "rigid"},
    ])
    scheduler = MoveOnce(build_scheduler("fifo", seed=0), at=1, num_gpus=two_nodes.num_gpus)
    run = RuntimeRun(two_nodes, trace, scheduler, RuntimeOptions(round_s=4.0, checkpoint_dir=tmp_path,
                                                                 checkpoint_every=10))
    result = run.run()
    assert all(j.finish_s is not None for j in result.jobs)
    assert scheduler.moved, "the forced re-allocation found no running job"
    by_id = {j.job_id: j for j in result.jobs}
    for job_id in scheduler.moved:
        assert by_id[job_id].restarts >= 1
        reports = result.reports[job_id]
        # every round resumed at exactly the step the previous round checkpointed, across the move too
        assert [r["resumed_step"] for r in reports[1:]] == [r["step"] for r in reports[:-1]]
        assert len(reports) >= 3
    _check_jobs_resumed_exactly(result, trace, tmp_path)
    assert result.summary["completed"] == 3
    # rounds keep the simulator's cadence: none starts sooner than round_s after the one before
    starts = [r.time_s for r in result.rounds]
    assert all(b - a >= 4.0 - 1e-6 for a, b in zip(starts, starts[1:], strict=False))


def test_a_killed_worker_resumes_from_its_checkpoint(two_nodes, tmp_path: Path):
    trace = _trace([
        {"job_id": "wide", "model": "mlp", "gpus": 2, "samples": 8192, "epochs": 25, "adaptivity": "rigid"},
        {"job_id": "small", "model": "mlp", "gpus": 1, "samples": 2048, "epochs": 10, "adaptivity": "rigid",
         "seed": 1},
    ])
    killed: list[int] = []

    def kill_mid_round(round_no: int, run: RuntimeRun) -> None:
        live = run.active.get("wide")
        if round_no == 1 and live is not None and live.pids:
            pid = live.pids[-1]
            timer = threading.Timer(2.0, lambda: (os.kill(pid, signal.SIGKILL), killed.append(pid)))
            timer.start()

    run = RuntimeRun(two_nodes, trace, build_scheduler("fifo", seed=0),
                     RuntimeOptions(round_s=5.0, checkpoint_dir=tmp_path, checkpoint_every=25),
                     on_round=kill_mid_round)
    result = run.run()
    assert killed, "the worker was not killed (the job finished too early)"
    assert result.failures["wide"] == 1
    assert all(j.finish_s is not None for j in result.jobs)
    reports = result.reports["wide"]
    # the round after the failure resumed from a checkpoint at or after the last completed round
    assert reports[1]["resumed_step"] >= reports[0]["step"]
    _check_jobs_resumed_exactly(result, trace, tmp_path)


def test_a_job_that_keeps_failing_ends_the_run_with_its_name_and_reason(two_nodes, tmp_path: Path):
    """A job whose worker dies every round does not keep the run going forever: past ``max_failures`` the run
    stops with an error naming the job and what failed last."""
    trace = _trace([{"job_id": "doomed", "model": "mlp", "gpus": 1, "samples": 8192, "epochs": 25,
                     "adaptivity": "rigid"}])

    def kill_every_round(round_no: int, run: RuntimeRun) -> None:
        live = run.active.get("doomed")
        if live is not None and live.pids:
            pid = live.pids[-1]
            threading.Timer(1.0, lambda: os.kill(pid, signal.SIGKILL)).start()

    run = RuntimeRun(two_nodes, trace, build_scheduler("fifo", seed=0),
                     RuntimeOptions(round_s=4.0, checkpoint_dir=tmp_path, max_failures=1),
                     on_round=kill_every_round)
    with pytest.raises(RuntimeJobFailed, match=r"job doomed failed 2 times \(max_failures 1\); last: a worker"):
        run.run()
    assert not run.active["doomed"].actors, "the failed job's workers are stopped"


class StealSamples:
    """Packing-capable FIFO that gives the first worker of every two-GPU job three quarters of its batch
    (Gimbal's stealing: the fast worker takes samples from the slow one)."""

    def __init__(self, inner) -> None:
        import dataclasses

        self.inner, self.name = inner, inner.name
        self.traits = dataclasses.replace(inner.traits, allows_packing=True)

    def describe(self) -> str:
        return self.inner.describe()

    def schedule(self, view) -> Decision:
        decision = self.inner.schedule(view)
        for job_id, alloc in list(decision.allocations.items()):
            if len(alloc.placement) == 2:
                decision.place(job_id, alloc.placement, alloc.batch_size, alloc.gpu_share,
                               batch_split=(0.75, 0.25))
        return decision


def test_a_decisions_batch_split_reaches_the_workers(two_nodes, tmp_path: Path):
    trace = _trace([{"job_id": "split", "model": "mlp", "gpus": 2, "samples": 2048, "epochs": 4,
                     "adaptivity": "rigid", "init_batch": 32}])
    run = RuntimeRun(two_nodes, trace, StealSamples(build_scheduler("fifo", seed=0)),
                     RuntimeOptions(round_s=4.0, checkpoint_dir=tmp_path, checkpoint_every=10))
    result = run.run()
    reports = result.reports["split"]
    assert reports[-1]["done"] and result.summary["completed"] == 1
    # the larger share is 3/4 of the 32-sample batch (equal shares would give 16 per worker)
    assert {r["local_bsz"] for r in reports if r["steps"] > 0} == {24}
    assert {o.local_bsz for o in result.throughput_obs["split"]} == {24}
    _check_jobs_resumed_exactly(result, trace, tmp_path)


def test_a_profiled_job_waits_in_the_waiting_queue_from_the_end_of_its_profile(two_nodes, tmp_path: Path):
    trace = _trace([{"job_id": "prof", "model": "mlp", "gpus": 1, "samples": 1024, "epochs": 3,
                     "adaptivity": "rigid"}])
    scheduler = Recorder(build_scheduler("sia", seed=0))
    result = RuntimeRun(two_nodes, trace, scheduler,
                        RuntimeOptions(round_s=4.0, checkpoint_dir=tmp_path, checkpoint_every=10)).run()
    assert result.summary["completed"] == 1
    # each round: (profiled types, profiling, wait since submission, wait in the waiting queue)
    seen = [(jv.profiled_types, jv.profiling, jv.wait_s, jv.queue_wait_s)
            for view, _ in scheduler.log for jv in view.jobs if jv.job_id == "prof"]
    before = [s for s in seen if not s[0]]
    after = [s for s in seen if s[0] and not s[1]]
    assert before and after, seen
    assert all(s[3] is None for s in before), "no waiting-queue wait before the profile ended"
    assert all(s[3] is not None and 0.0 <= s[3] <= s[2] + 1e-9 for s in after), after
    # the wait before entering the queue (submission to the profile's end) is the same in every later round
    lead = [s[2] - s[3] for s in after if s[3] is not None]
    assert max(lead) - min(lead) < 1e-6 and lead[0] > 0.0
