"""experiments/sia_restart_counts.py: how it sorts placement changes and what it runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlsched.core import Adaptivity, ClusterView, Decision, JobSpec, JobStatus, JobView, Placement
from experiment_modules import import_experiments
from testkit import small_cluster


@pytest.fixture(scope="module")
def counts():
    (module,) = import_experiments("sia_restart_counts")
    return module


@pytest.fixture(scope="module")
def cluster():
    # nodes 0-1: t4 x 4 GPUs (GPUs 0-7); nodes 2-3: v100 x 4 GPUs (GPUs 8-15)
    return small_cluster((("t4", 2, 4), ("v100", 2, 4)))


def at(*gpus: int) -> Placement:
    return Placement.of(gpus)


def test_each_kind_of_change_is_told_apart(counts, cluster):
    kind = counts.PlacementChanges.kind
    assert kind(cluster, at(), at(0, 1)) == "resume"
    assert kind(cluster, at(0, 1), at(0, 1)) is None
    assert kind(cluster, at(0, 1), at(8, 9)) == "type"
    assert kind(cluster, at(0, 1), at(3, 4)) == "shape"  # (2) -> (1, 1)
    assert kind(cluster, at(0, 1, 2, 4), at(3, 4, 5, 6)) == "reorder"  # (3, 1) -> (1, 3)
    assert kind(cluster, at(0, 1), at(6, 7)) == "move"  # (2) on another node


def test_the_artifacts_count_adds_reorders_to_ours(counts, cluster):
    def view(placements):
        jobs = [JobView(spec=JobSpec(job_id=k, submit_time_s=0.0, model="cifar10", num_gpus={"a": 4, "b": 1}[k],
                                     batch_size=256, adaptivity=Adaptivity.RIGID),
                        status=JobStatus.RUNNING if p else JobStatus.QUEUED, placement=p, batch_size=None,
                        age_s=0.0, wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0,
                        progress_fraction=0.0, start_time_s=None, estimated_duration_s=None)
                for k, p in placements.items()]
        return ClusterView(time_s=0.0, round_s=360.0, cluster=cluster, jobs=jobs)

    def decision(placements):
        d = Decision()
        for k, p in placements.items():
            if p:
                d.place(k, p, 256)
        return d

    rounds = [{"a": at(0, 1, 2, 4), "b": at(8)},
              {"a": at(3, 4, 5, 6), "b": at()},     # a: (3, 1) -> (1, 3) in node order; b preempted
              {"a": at(3, 4, 5, 6), "b": at(9)},    # b resumes
              {"a": at(8, 9, 10, 11), "b": at(9)}]  # a changes type
    watch = counts.PlacementChanges()
    watch(view({"a": at(), "b": at()}), decision(rounds[0]))  # both start: not restarts
    for now, nxt in zip(rounds, rounds[1:], strict=False):
        watch(view(now), decision(nxt))
    records = SimpleNamespace(jobs=[SimpleNamespace(requested_gpus=4), SimpleNamespace(requested_gpus=1)])
    s = watch.summary(records)
    assert (s["resume_per_job"], s["type_per_job"], s["reorder_per_job"], s["preempt_per_job"]) == (0.5, 0.5, 0.5, 0.5)
    assert s["shape_per_job"] == 0.0 and s["move_per_job"] == 0.0
    assert s["artifact_restarts_per_job"] == 1.5  # resume + type + reorder; ours (resume + type) is 1.0
    assert s["requested_gpus_per_job"] == 2.5


def test_the_gavel_rows_run_our_tunedjobs_or_the_workload_files_own(counts):
    runs = {s["tag"]: s["config"] for s in counts.specs(1, 0)}
    assert runs["philly/Gavel+TJ"].trace == "sia-philly:1@tuned"
    assert runs["philly/Gavel, workload's TJ"].trace == "sia-philly:1"
    assert runs["philly/Gavel+TJ, in-order"].settings == {"placement.assign": "in-order"}
    assert runs["philly/Sia"].trace == "sia-philly:1" and runs["philly/Sia"].settings == {}
    assert all(c.cluster == "sia-hetero-64" and c.world.calibration == "sia-artifact" for c in runs.values())


def test_the_table_puts_the_thesiss_figures_beside_each_row(counts):
    summary = {"avg_jct_s": 2 * 3600.0, "p99_jct_s": 20 * 3600.0, "restarts_per_job": 6.0,
               "artifact_restarts_per_job": 6.5}
    runs = counts.specs(1, 0, ("Gavel, workload's TJ", "Sia"))
    data = {"runs": [{"tag": s["tag"], "summary": summary} for s in runs],
            "configs": [s["config"].model_dump(mode="json") for s in runs]}
    lines = counts.tables(data)["table"].splitlines()
    gavel = next(line for line in lines if "workload's TJ" in line)
    assert "| 6.0 " in gavel and "| 6.5 " in gavel and "1.9 ± 0.3 / 30.0 / 33.8 ± 8.6 / 9.0 ± 6.3 / 5.7" in gavel
    assert "0.6 ± 0.1 / 9.5 / 14.2 ± 1.9 / 4.0 ± 0.7 / 2.9" in next(line for line in lines if "philly/Sia" in line)
