"""The example stages in examples/stages/: what each decides on hand-made views, and each run through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlsched
from dlsched.core import Adaptivity, ClusterView, JobSpec, JobStatus, JobView, Placement
from dlsched.policies import build_scheduler
from dlsched.policies.stages import Demand, Plan
from testkit import small_cluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "stages"
edf = dlsched.load_plugin_file(EXAMPLES / "edf.py")
bestfit = dlsched.load_plugin_file(EXAMPLES / "bestfit.py")


def job(job_id: str, submit: float, gpus: int = 1, deadline: float | None = None,
        placement: tuple[int, ...] = ()) -> JobView:
    spec = JobSpec(job_id=job_id, submit_time_s=submit, model="cifar10", num_gpus=gpus, duration_s=600.0,
                   deadline_s=deadline, adaptivity=Adaptivity.RIGID)
    return JobView(spec=spec, status=JobStatus.RUNNING if placement else JobStatus.QUEUED,
                   placement=Placement.of(placement), batch_size=None, age_s=0.0, wait_s=0.0, attained_gpu_s=0.0,
                   attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                   start_time_s=0.0 if placement else None)


def view(jobs: list[JobView], groups: tuple = (("v100", 3, 4),)) -> ClusterView:
    return ClusterView(time_s=1000.0, round_s=60.0, cluster=small_cluster(groups), jobs=jobs)


# -- earliest deadline first ---------------------------------------------------------------------------------


def test_edf_orders_by_deadline_then_jobs_without_one_by_submit_time() -> None:
    jobs = [job("late", 0.0, deadline=3000.0), job("none-b", 5.0), job("soon-b", 9.0, deadline=1000.0),
            job("none-a", 1.0), job("soon-a", 8.0, deadline=1000.0), job("sooner", 20.0, deadline=500.0)]
    ordered = edf.EarliestDeadlineFirst().order(view(jobs), jobs)
    assert [j.job_id for j in ordered] == ["sooner", "soon-a", "soon-b", "late", "none-a", "none-b"]


def test_edf_agrees_with_the_shipped_edf_ordering() -> None:
    rng = np.random.default_rng(4)
    jobs = [job(f"j{i}", float(rng.integers(0, 50)), deadline=None if rng.random() < 0.3 else float(rng.integers(0, 9)))
            for i in range(40)]
    mine = build_scheduler("fifo", ordering="my-edf").ordering.order(view(jobs), jobs)
    shipped = build_scheduler("fifo", ordering="edf").ordering.order(view(jobs), jobs)
    assert [j.job_id for j in mine] == [j.job_id for j in shipped]


def test_edf_grace_window_keeps_submission_order_within_a_window() -> None:
    jobs = [job("first", 0.0, deadline=1190.0), job("second", 10.0, deadline=1010.0), job("far", 5.0, deadline=1300.0)]
    exact = build_scheduler("fifo", ordering="my-edf").ordering
    graced = build_scheduler("fifo", ordering="my-edf", settings={"grace_s": "600"}).ordering
    assert [j.job_id for j in exact.order(view(jobs), jobs)] == ["second", "first", "far"]
    # 1190 and 1010 both round down to 600: one window, served in submission order
    assert [j.job_id for j in graced.order(view(jobs), jobs)] == ["first", "second", "far"]
    with pytest.raises(dlsched.InputError, match="grace_s must be"):
        build_scheduler("fifo", ordering="my-edf", settings={"grace_s": "-1"})


# -- best fit ------------------------------------------------------------------------------------------------


def place(stage: dlsched.PlacementStage, jobs: list[JobView], reserved: list[int] = (),  # type: ignore[assignment]
          groups: tuple = (("v100", 3, 4),)) -> dict[str, tuple[int, ...]]:
    v = view(jobs, groups)
    mask = np.zeros(v.cluster.num_gpus, dtype=bool)
    mask[list(reserved)] = True
    plan = Plan(demands=[Demand(job=j, num_gpus=j.spec.num_gpus) for j in jobs], reserved=mask)
    return {k: a.placement.gpus for k, a in stage.place(v, plan).allocations.items()}


def test_best_fit_puts_each_job_where_the_fewest_free_gpus_are_left() -> None:
    # free GPUs: node 0 has 2 (0-1 reserved), node 1 has 4, node 2 has 1 (8-10 reserved)
    got = place(bestfit.BestFitPlacement(), [job("two", 0.0, 2), job("one", 1.0, 1), job("three", 2.0, 3)],
                reserved=[0, 1, 8, 9, 10])
    assert got == {"two": (2, 3), "one": (11,), "three": (4, 5, 6)}


def test_best_fit_looks_across_gpu_types() -> None:
    # node 0: a100 with 4 free; node 1: v100 with 1 free (5-7 reserved)
    got = place(bestfit.BestFitPlacement(), [job("one", 0.0, 1)], reserved=[5, 6, 7],
                groups=(("a100", 1, 4), ("v100", 1, 4)))
    assert got == {"one": (4,)}


def test_best_fit_spans_the_fewest_nodes_and_ends_on_the_tightest() -> None:
    # free: node 0 has 4, node 1 has 2 (4-5 reserved), node 2 has 3 (8 reserved): 6 GPUs need two nodes
    got = place(bestfit.BestFitPlacement(), [job("six", 0.0, 6)], reserved=[4, 5, 8])
    assert got == {"six": (0, 1, 2, 3, 6, 7)}


def test_sticky_best_fit_keeps_a_running_job_where_it_is() -> None:
    running = job("run", 0.0, 1, placement=(1,))
    assert place(bestfit.BestFitPlacement(sticky=True), [running]) == {"run": (1,)}
    assert place(bestfit.BestFitPlacement(sticky=False), [running]) == {"run": (0,)}


def test_best_fit_leaves_a_job_it_cannot_fit_waiting() -> None:
    got = place(bestfit.BestFitPlacement(), [job("big", 0.0, 12), job("small", 1.0, 2)], reserved=[0])
    assert got == {"small": (1, 2)}


# -- through the CLI -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("plugin", "flags", "stage"), [
    ("edf.py", ["--ordering", "my-edf"], "my-edf"),
    ("bestfit.py", ["--placement", "best-fit", "--set", "sticky=off"], "best-fit"),
])
def test_each_example_runs_from_the_cli(plugin: str, flags: list[str], stage: str) -> None:
    run = subprocess.run([sys.executable, "-m", "dlsched", "simulate", "--plugin", f"examples/stages/{plugin}",
                          *flags, "--jobs", "20"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert run.returncode == 0, run.stderr
    header = run.stdout.split("┏")[0]
    assert stage in header and "20/20" in run.stdout


def test_both_examples_compose_in_one_compare() -> None:
    run = subprocess.run([sys.executable, "-m", "dlsched", "compare", "--plugin", "examples/stages/edf.py",
                          "--plugin", "examples/stages/bestfit.py", "--policies", "fifo,fifo@best-fit",
                          "--ordering", "my-edf", "--jobs", "10", "--workers", "2", "--format", "json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert '"policy": "fifo+my-edf"' in run.stdout and '"policy": "fifo+my-edf@best-fit"' in run.stdout
