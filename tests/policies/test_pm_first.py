"""PM-First placement (Algorithm 1): class order inside the cut queue, best PM-scores first."""

from __future__ import annotations

import numpy as np
from test_pal_placement import job, placed, view

from dlsched.policies import SCHEDULERS, build_scheduler
from dlsched.policies.pal import RoundPool, build_pools, cut_queue, pm_first_gpus, pm_first_singles
from dlsched.policies.registry import PLACEMENTS
from dlsched.policies.stages import Demand, Plan
from testkit import small_cluster


def test_no_job_outside_the_cut_queue_runs_ahead_of_one_inside():
    cluster = small_cluster((("v100", 2, 4),))
    scores = {c: np.linspace(0.9, 1.2, 8) for c in ("classA", "classB", "classC", "classD")}
    # FIFO queue: two class D jobs fill the cluster; the class A job behind them lies outside the cut.
    jobs = [job("d1", 4, "PointNet", 0.0), job("d2", 4, "PointNet", 1.0), job("a1", 1, "resnet50", 2.0)]
    for policy in ("pm-first", "pal"):
        d = build_scheduler(policy).schedule(view(cluster, jobs, scores))
        assert set(d.allocations) == {"d1", "d2"}


def test_cut_queue_is_resorted_by_class_so_class_a_picks_first():
    cluster = small_cluster((("v100", 2, 4),))
    scores = {c: np.array([1.3, 1.2, 1.1, 1.0, 0.9, 0.95, 1.25, 1.15]) for c in ("classA", "classD")}
    jobs = [job("d1", 1, "PointNet", 0.0), job("a1", 1, "resnet50", 1.0), job("a2", 1, "resnet50", 2.0)]
    d = build_scheduler("pm-first", settings={"binned": "false"}).schedule(view(cluster, jobs, scores))
    # a1 and a2 (class A) take the two best GPUs (4: 0.9, 5: 0.95) in FIFO order; d1 gets the next best.
    assert placed(d) == {"a1": (4,), "a2": (5,), "d1": (3,)}


def test_cut_queue_stops_at_first_overflow():
    jobs = [job("a", 3), job("b", 4), job("c", 1)]
    demands = [Demand(job=j, num_gpus=j.spec.num_gpus) for j in jobs]
    assert [d.job.job_id for d in cut_queue(demands, 6)] == ["a"]
    assert [d.job.job_id for d in cut_queue(demands, 8)] == ["a", "b", "c"]
    # Handed an overflowing list (e.g. by an allocation with backfill), placement still cuts it.
    cluster = small_cluster((("v100", 2, 4),))
    from dlsched.policies.pal import PmFirstPlacement

    d = PmFirstPlacement().place(view(cluster, jobs), Plan(demands[:2] + [Demand(job=job("z", 8), num_gpus=8)]
                                                          + demands[2:]))
    assert set(d.allocations) == {"a", "b"}


def test_best_match_locality_breaks_ties_within_a_bin():
    cluster = small_cluster((("v100", 3, 4),))
    # All GPUs score the same. Node 1 has exactly two free GPUs: a 2-GPU job goes there.
    busy = job("r", 2, "PointNet", 0.0, placement=(4, 5))
    sched = build_scheduler("pm-first")
    v = view(cluster, [busy, job("x", 2, "resnet50", 1.0)], None)
    d = sched.schedule(v)
    assert len({g // 4 for g in placed(d)["x"]}) == 1


def test_single_gpu_runs_match_one_by_one_picks():
    cluster = small_cluster((("v100", 10, 4),))
    rng = np.random.default_rng(11)
    for _ in range(100):
        scores = {"classA": rng.choice([0.9, 1.0, 1.1, 1.3], 40)}
        pools = build_pools(cluster, scores, ("classA",), {"k_min": 2, "k_max": 0, "outlier_sigma": 0.0})
        batch, single = RoundPool(pools["v100"]), RoundPool(pools["v100"])
        busy = np.flatnonzero(rng.random(40) < 0.4)
        if len(busy):
            batch.take(busy)
            single.take(busy)
        m = int(rng.integers(1, 30))
        got = pm_first_singles(batch, "classA", m).tolist()
        one_by_one = []
        for _ in range(min(m, single.free_total)):
            g = pm_first_gpus(single, "classA", 1)
            one_by_one.append(int(g[0]))
            single.take(g)
        assert got == one_by_one


def test_registry_presets_and_overrides():
    assert {"pal", "pm-first"} <= set(PLACEMENTS) and {"pal", "pm-first"} <= set(SCHEDULERS)
    assert SCHEDULERS["pal"].ordering == "fifo" and SCHEDULERS["tiresias"].placement == "packed-sticky"
    s = build_scheduler("pal", ordering="las")
    assert s.ordering.name == "las" and s.placement.name == "pal"
    s = build_scheduler("fifo", placement="pm-first")
    assert s.placement.name == "pm-first"
    s = build_scheduler("srtf", placement="pal", settings={"placement.l_across": "1.7", "k_max": "5"})
    assert s.placement.l_across == 1.7 and s.placement.k_max == 5
