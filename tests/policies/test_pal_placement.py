"""PAL placement (Algorithm 2): the L x V matrix decides between packing and better PM-scores."""

from __future__ import annotations

import numpy as np
import pytest

from dlsched.core import Adaptivity, ClusterView, JobSpec, JobStatus, JobView, Placement, make_cluster
from dlsched.core.gpu import KNOWN_GPU_TYPES
from dlsched.estimators.pm_scores import lv_matrix
from dlsched.policies import build_scheduler
from dlsched.policies.pal import PalPlacement
from dlsched.policies.stages import Demand, Plan
from testkit import small_cluster

CLASSES = {"resnet50": "classA", "BERT": "classB", "vgg19": "classC", "PointNet": "classD"}


def job(jid: str, gpus: int, model: str = "resnet50", submit: float = 0.0, placement=()) -> JobView:
    spec = JobSpec(job_id=jid, submit_time_s=submit, model=model, num_gpus=gpus, iterations=100.0,
                   adaptivity=Adaptivity.RIGID)
    return JobView(spec=spec, status=JobStatus.QUEUED, placement=Placement.of(placement), batch_size=None,
                   age_s=0.0, wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0,
                   progress_fraction=0.0, start_time_s=None)


def view(cluster, jobs, scores=None) -> ClusterView:
    return ClusterView(time_s=0.0, round_s=360.0, cluster=cluster, jobs=jobs, gpu_scores=scores,
                       model_class=CLASSES)


def placed(decision) -> dict[str, tuple[int, ...]]:
    return {k: a.placement.gpus for k, a in decision.allocations.items()}


# Two nodes of four GPUs. Each node has one fast GPU (1.0) and three slow ones (1.5): a 2-GPU job either
# packs on one node (worst GPU 1.5) or splits over the two fast GPUs (worst 1.0, pays L_across).
TWO_NODES = {"classA": np.array([1.0, 1.5, 1.5, 1.5, 1.0, 1.5, 1.5, 1.5])}


@pytest.mark.parametrize("l_across", [1.0, 1.2, 1.49, 1.5, 1.51, 1.7, 3.0])
def test_pal_packs_exactly_when_the_lv_matrix_says_so(l_across):
    cluster = small_cluster((("v100", 2, 4),))
    sched = build_scheduler("pal", settings={"l_across": str(l_across), "binned": "false"})
    gpus = placed(sched.schedule(view(cluster, [job("a", 2)], TWO_NODES)))["a"]
    packed = len({g // 4 for g in gpus}) == 1
    # The matrix: the first feasible entry of the traversal decides.
    m = lv_matrix([1.0, 1.5], l_across)
    first = next((li, vi) for li, vi in m.traversal() if (li, vi) in {(0, 1), (1, 0), (1, 1)})
    assert packed == (first[0] == 0)
    assert packed == (1.5 <= l_across * 1.0)
    if packed:
        assert gpus[0] % 4 == 0  # the node's fast GPU is one of the two
    else:
        assert gpus == (0, 4)


def test_pm_first_always_takes_the_best_scores():
    cluster = small_cluster((("v100", 2, 4),))
    sched = build_scheduler("pm-first", settings={"binned": "false"})
    assert placed(sched.schedule(view(cluster, [job("a", 2)], TWO_NODES)))["a"] == (0, 4)


def test_per_model_penalties_from_pal_table():
    # PAL's table has no entry for resnet50 on 2 GPUs: spreading costs 1.0, so PAL splits like PM-First;
    # a constant penalty of 1.7 makes it pack.
    cluster = small_cluster((("v100", 2, 4),))
    per_model = build_scheduler("pal", settings={"binned": "false"})
    assert placed(per_model.schedule(view(cluster, [job("a", 2)], TWO_NODES)))["a"] == (0, 4)
    assert per_model.placement.penalties_for("PointNet", 16)[2] == pytest.approx(1.25)
    const = build_scheduler("pal", settings={"binned": "false", "l_across": "1.7"})
    assert len({g // 4 for g in placed(const.schedule(view(cluster, [job("a", 2)], TWO_NODES)))["a"]}) == 1


def test_large_jobs_use_pm_first_and_best_packed_node_is_best_fit():
    cluster = small_cluster((("v100", 3, 4),))
    scores = {"classA": np.array([1.0] * 4 + [1.2] * 4 + [1.0, 1.0, 1.2, 1.2])}
    sched = build_scheduler("pal", settings={"binned": "false", "l_across": "2.0"})
    # 6 GPUs > one node: PM-First, the six 1.0 GPUs.
    got = placed(sched.schedule(view(cluster, [job("big", 6)], scores)))["big"]
    assert got == (0, 1, 2, 3, 8, 9)
    # Two 2-GPU jobs: both nodes 0 and 2 offer two 1.0 GPUs; the fuller node (fewest free) goes first.
    busy = job("run", 2, model="PointNet", placement=(10, 11))
    d = sched.schedule(view(cluster, [busy, job("x", 2, submit=1.0)], scores))
    assert placed(d)["x"] == (0, 1) or placed(d)["x"] == (8, 9)


def test_rack_level_is_used_when_the_cluster_names_racks():
    from dlsched.core.cluster import Cluster, Node

    types = {"v100": KNOWN_GPU_TYPES["v100"]}
    nodes = tuple(Node(node_id=i, gpu_type="v100", num_gpus=2, rack=f"r{i // 2}") for i in range(4))
    cluster = Cluster(name="racks", nodes=nodes, gpu_types=types)
    # A 4-GPU job cannot pack on one node (2 GPUs each). Rack r0 (GPUs 0-3) is mediocre, the best four GPUs
    # straddle racks. With a cheap rack penalty PAL keeps the job in a rack; with an expensive one it does too
    # unless the spread allocation is better even after the cross-rack penalty.
    scores = {"classA": np.array([1.1, 1.1, 1.1, 1.1, 1.0, 1.0, 1.3, 1.3])}
    scores["classA"][[0, 1]] = 1.0  # rack r0: 1.0 1.0 1.1 1.1 ; rack r1: 1.0 1.0 1.3 1.3
    sched = build_scheduler("pal", settings={"binned": "false", "l_across": "1.5", "l_rack": "1.05"})
    gpus = placed(sched.schedule(view(cluster, [job("a", 4)], scores)))["a"]
    assert gpus == (0, 1, 2, 3)  # within rack r0: 1.05 x 1.1 beats 1.5 x 1.1 across racks
    assert sched.placement.last_levels["rack"] == 1


def test_no_profile_means_all_gpus_equal_and_pal_packs():
    cluster = small_cluster((("v100", 2, 4),))
    sched = build_scheduler("pal", settings={"l_across": "1.7"})
    busy = job("r", 3, model="PointNet", placement=(0, 1, 2))
    d = sched.schedule(view(cluster, [busy, job("a", 2, submit=1.0)], None))
    assert all(len({g // 4 for g in p}) == 1 for p in placed(d).values())


def test_placements_are_valid_on_random_queues():
    rng = np.random.default_rng(7)
    cluster = make_cluster("c", [("v100", 6, 4)], {"v100": KNOWN_GPU_TYPES["v100"]})
    models = list(CLASSES)
    for _ in range(30):
        scores = {c: np.exp(rng.normal(0, 0.1, 24)) for c in ("classA", "classB", "classC", "classD")}
        jobs = [job(str(i), int(rng.choice([1, 1, 2, 3, 4, 6, 8])), models[int(rng.integers(4))], float(i))
                for i in range(int(rng.integers(1, 15)))]
        for policy in ("pal", "pm-first"):
            sched = build_scheduler(policy, settings={} if policy == "pm-first" else {"l_across": "1.7"})
            d = sched.schedule(view(cluster, jobs, scores))
            used = [g for a in d.allocations.values() for g in a.placement.gpus]
            assert len(used) == len(set(used)) and all(0 <= g < 24 for g in used)
            for j in jobs:
                if j.job_id in d.allocations:
                    assert len(d.allocations[j.job_id].placement) == j.spec.num_gpus
            # FIFO + gang: placed jobs are exactly a prefix of the queue (all of the cut queue fits).
            cum = np.cumsum([j.spec.num_gpus for j in jobs])
            assert set(d.allocations) == {j.job_id for j, c in zip(jobs, cum, strict=True) if c <= 24}


def test_matrix_report_and_stage_reuse():
    cluster = small_cluster((("v100", 2, 4),))
    pal = PalPlacement(l_across=1.7, binned=False)
    v = view(cluster, [job("a", 2)], TWO_NODES)
    m = pal.matrix(v, "resnet50", 2)
    assert m.values == (1.0, 1.5) and m.penalties == (1.0, 1.7)
    d1 = pal.place(v, Plan([Demand(job=v.jobs[0], num_gpus=2)]))
    d2 = pal.place(v, Plan([Demand(job=v.jobs[0], num_gpus=2)]))
    assert placed(d1) == placed(d2)  # deterministic, layout cached across rounds
