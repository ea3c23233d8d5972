"""Gimbal's coordinator: primitives keep every job's global batch, the search stops after three gainless
attempts, its cost is charged to the jobs it pauses, and it improves its packing set's objective."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, ClusterView, Decision, JobSpec, JobStatus, JobView, Placement
from dlsched.core.packing import packing_sets
from dlsched.policies import build_scheduler
from dlsched.policies.gimbal import CalibrationPlan, GimbalCoordination, balanced, job_speed, squeeze, swell
from dlsched.sim.engine import Engine, SimConfig
from dlsched.sim.monitor import WorldMonitor
from dlsched.sim.run import attach_oracle
from dlsched.world.base import World, WorldConfig
from testkit import Recorder, assert_round_invariants, small_cluster

CLUSTER = small_cluster((("a40", 2, 2),))


def spec(job_id: str, model: str, gpus: int, duration: float, submit: float = 0.0) -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=submit, model=model, num_gpus=gpus, duration_s=duration,
                   adaptivity=Adaptivity.RIGID, reference_gpu="a40", deadline_s=submit + 2 * duration)


def view_of(jobs: dict[str, tuple[str, int, float]], placements: dict[str, Placement]) -> ClusterView:
    views = [JobView(spec=spec(j, m, k, d), status=JobStatus.RUNNING, placement=placements[j], batch_size=None,
                     age_s=0.0, wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0, restarts=0,
                     progress_fraction=0.0, start_time_s=0.0, estimated_duration_s=d)
             for j, (m, k, d) in jobs.items()]
    return ClusterView(time_s=0.0, round_s=60.0, cluster=CLUSTER, jobs=views)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 10).map(lambda k: 10 * k), min_size=1, max_size=8),
       st.lists(st.floats(0.05, 1.0), min_size=8, max_size=8), st.booleans())
def test_squeeze_and_swell_keep_every_jobs_global_batch(pcts, speeds, up):
    plan = CalibrationPlan({"j": list(pcts)}, {})
    workers = [("j", i) for i in range(0, len(pcts), 2)]
    moved = swell(plan, workers, 10) if up else squeeze(plan, workers, 10, 10)
    assert all(10 <= p <= 100 for p in plan.pct["j"])
    assert moved == (plan.pct["j"] != list(pcts))
    split = balanced(speeds[: len(pcts)])
    assert sum(split) == pytest.approx(1.0)  # sample stealing moves samples, never adds or drops them
    assert job_speed(speeds[: len(pcts)], split) >= job_speed(speeds[: len(pcts)], ()) - 1e-12


class FlatMonitor:
    """Every plan measures the same: no attempt can gain."""

    def __init__(self) -> None:
        self.calls = 0

    def worker_speeds(self, members):
        self.calls += 1
        return {j: [0.5] * len(p) for j, (_, p, _) in members.items()}


def test_the_search_stops_after_three_gainless_attempts():
    jobs = {"big": ("resnet50", 4, 3000.0), "small": ("vgg16", 2, 600.0)}
    placements = {"big": Placement.of([0, 1, 2, 3]), "small": Placement.of([0, 1])}
    (ps,) = packing_sets(placements)
    coord = GimbalCoordination()
    coord.attach_monitor(FlatMonitor())
    _, attempts, _ = coord.search(view_of(jobs, placements), ps, placements,
                                  {j.job_id: j for j in view_of(jobs, placements).jobs})
    assert attempts == 3
    full = GimbalCoordination(early_exit=0)
    full.attach_monitor(FlatMonitor())
    _, attempts_full, _ = full.search(view_of(jobs, placements), ps, placements,
                                      {j.job_id: j for j in view_of(jobs, placements).jobs})
    assert attempts_full > 3  # without early exit it squeezes until no move is left


def test_the_search_improves_its_sets_objective_and_charges_its_cost():
    world = World(CLUSTER, WorldConfig(variability=False), seed=0)
    jobs = {"big": ("resnet50", 4, 30000.0), "small": ("vgg16", 2, 600.0)}
    placements = {"big": Placement.of([0, 1, 2, 3]), "small": Placement.of([0, 1])}
    view = view_of(jobs, placements)
    coord = GimbalCoordination()
    coord.attach_monitor(WorldMonitor(world))
    d = Decision()
    for j, p in placements.items():
        d.place(j, p)
    out = coord.coordinate(view, d)
    by = {j.job_id: j for j in view.jobs}
    plan = CalibrationPlan({j: list(out.allocations[j].mps_pct or (100,) * len(p)) for j, p in placements.items()},
                           {j: out.allocations[j].batch_split for j in placements})
    free = CalibrationPlan({j: [100] * len(p) for j, p in placements.items()}, {})
    assert coord.set_objective(view, list(jobs), by, plan, placements) < \
        coord.set_objective(view, list(jobs), by, free, placements)
    assert out.info["gimbal_attempts"] >= 1 and out.info["gimbal_search_s"] > 0
    for j in placements:
        split = out.allocations[j].batch_split
        assert not split or sum(split) == pytest.approx(1.0)
    # a second round with the same packing reuses the plan: no new search, no new pause
    again = coord.coordinate(view, d)
    assert again.info["gimbal_attempts"] == 0
    assert all(a.pause_s == 0.0 for a in again.allocations.values())


def test_gimbal_under_lucid_keeps_the_invariants_and_packs_unequal_jobs():
    specs = [spec("big", "resnet50", 4, 3000.0), spec("small", "efficientnet", 2, 600.0, submit=30.0),
             spec("other", "mobilenetv2", 2, 900.0, submit=30.0)]
    sched = build_scheduler("lucid", coordination="gimbal")
    assert sched.placement.relaxed  # Gimbal runs the base scheduler's packing relaxed
    rec = Recorder(sched)
    world = World(CLUSTER, WorldConfig(variability=False), seed=0)
    engine = Engine(CLUSTER, specs, rec, world, SimConfig(round_s=60.0))
    attach_oracle(rec, world, engine)
    res = {r.job_id: r for r in engine.run().jobs}
    assert_round_invariants(CLUSTER, rec.log, specs, exact_gangs=True, packing=True)
    assert res["small"].start_s == 60.0 and res["other"].start_s == 60.0  # both packed onto the big job
    assert any(a.mps_pct or a.batch_split for _, d in rec.log for a in d.allocations.values())


@pytest.mark.parametrize(("policy", "objective"), [("lucid", "jct"), ("gandiva", "deadline"),
                                                  ("gavel-packing", "makespan"), ("slurm", "jct")])
def test_gimbal_serves_the_base_schedulers_objective_unless_told_otherwise(policy, objective):
    # `--policy gavel-packing --coordinator gimbal` minimises makespan without a --set: section 7.1 pairs
    # each scheduler with its own objective (Slurm names none, and Gimbal's default, JCT, stays)
    assert build_scheduler(policy, coordination="gimbal").coordination.objective == objective
    for key in ("objective", "coordination.objective", "gimbal.objective"):
        chosen = build_scheduler(policy, coordination="gimbal", settings={key: "jct"})
        assert chosen.coordination.objective == "jct"


def test_an_unknown_objective_is_refused():
    from dlsched.core import InputError

    with pytest.raises(InputError, match="objective"):
        build_scheduler("lucid", coordination="gimbal", settings={"objective": "fairness"})


def _searched(objective: str, jobs: dict[str, tuple[str, int, float, float]]) -> dict[str, tuple[int, ...]]:
    """Share limits Gimbal settles on for a 4-GPU job with a 2-GPU partner under ``objective``; jobs map to
    (model, GPUs, remaining seconds, deadline)."""
    world = World(CLUSTER, WorldConfig(variability=False), seed=0)
    placements = {j: Placement.of(range(k)) for j, (_, k, _, _) in jobs.items()}
    views = [JobView(spec=JobSpec(job_id=j, submit_time_s=0.0, model=m, num_gpus=k, duration_s=t,
                                  adaptivity=Adaptivity.RIGID, reference_gpu="a40", deadline_s=dl),
                     status=JobStatus.RUNNING, placement=placements[j], batch_size=None, age_s=0.0, wait_s=0.0,
                     attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                     start_time_s=0.0, estimated_duration_s=t) for j, (m, k, t, dl) in jobs.items()]
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=CLUSTER, jobs=views)
    coord = GimbalCoordination(objective=objective)
    coord.attach_monitor(WorldMonitor(world))
    d = Decision()
    for j, p in placements.items():
        d.place(j, p)
    out = coord.coordinate(view, d)
    return {j: out.allocations[j].mps_pct or (100,) * len(placements[j]) for j in jobs}


def test_makespan_squeezes_the_shorter_job_to_finish_the_longer_one_sooner():
    got = _searched("makespan", {"long": ("resnet50", 4, 7200.0, 1e9), "short": ("vgg16", 2, 600.0, 1e9)})
    assert min(got["short"]) < 100 and set(got["long"]) == {100}


def test_deadlines_squeeze_the_job_with_more_headroom():
    got = _searched("deadline", {"roomy": ("resnet50", 4, 3000.0, 90000.0), "tight": ("vgg16", 2, 3000.0, 3500.0)})
    assert min(got["roomy"]) < 100 and set(got["tight"]) == {100}


def test_jct_squeezes_the_more_utilising_job():
    # ResNet-50 profiles at 99.8% utilisation, MobileNetV2 at 49%: the busier job gives way (equation 2)
    got = _searched("jct", {"busy": ("resnet50", 4, 3000.0, 1e9), "light": ("mobilenetv2", 2, 3000.0, 1e9)})
    assert min(got["busy"]) < 100 and set(got["light"]) == {100}


@pytest.mark.parametrize("reuse", [True, False])
def test_a_set_that_forms_again_elsewhere_reuses_its_plan_only_when_asked(reuse):
    world = World(CLUSTER, WorldConfig(variability=False), seed=0)
    jobs = {"a": ("resnet50", 2, 30000.0), "b": ("vgg16", 2, 600.0)}

    def round_on(gpus: list[int]) -> Decision:
        placements = {"a": Placement.of(gpus), "b": Placement.of(gpus)}
        d = Decision()
        for j, p in placements.items():
            d.place(j, p)
        return coord.coordinate(view_of(jobs, placements), d)

    coord = GimbalCoordination(reuse_plans=reuse)
    coord.attach_monitor(WorldMonitor(world))
    first = round_on([0, 1])
    assert first.info["gimbal_searches"] == 1
    moved = round_on([2, 3])  # the same two jobs, fully overlapped on the other node
    assert moved.info["gimbal_searches"] == (0 if reuse else 1)
    if reuse:
        assert {j: a.mps_pct for j, a in moved.allocations.items()} == \
            {j: a.mps_pct for j, a in first.allocations.items()}


class TableMonitor:
    """Job speeds by whether job ``hopeless`` is restricted: restricting it lets ``feasible`` go faster."""

    def worker_speeds(self, members):
        squeezed = any(p < 100 for p in members["hopeless"][2])
        speed = {"hopeless": 0.8 if squeezed else 1.0, "feasible": 1.0 if squeezed else 0.9}
        return {j: [speed[j]] * len(p) for j, (_, p, _) in members.items()}


@pytest.mark.parametrize(("goal", "prefers_squeezed"), [("lateness", False), ("met", True)])
def test_the_deadline_goal_met_keeps_a_feasible_deadline_that_lateness_gives_up(goal, prefers_squeezed):
    # "hopeless" misses its deadline either way; "feasible" makes its deadline only if "hopeless" gives way.
    # Equation 3 (lateness) keeps "hopeless" fast to shorten its lateness; the met goal saves "feasible".
    placements = {"hopeless": Placement.of([0]), "feasible": Placement.of([0])}
    views = [JobView(spec=JobSpec(job_id=j, submit_time_s=0.0, model="resnet50", num_gpus=1, duration_s=t,
                                  adaptivity=Adaptivity.RIGID, reference_gpu="a40", deadline_s=dl),
                     status=JobStatus.RUNNING, placement=placements[j], batch_size=None, age_s=0.0, wait_s=0.0,
                     attained_gpu_s=0.0, attained_service_s=0.0, restarts=0, progress_fraction=0.0,
                     start_time_s=0.0, estimated_duration_s=t)
             for j, t, dl in (("hopeless", 1000.0, 500.0), ("feasible", 1000.0, 1050.0))]
    view = ClusterView(time_s=0.0, round_s=60.0, cluster=CLUSTER, jobs=views)
    by = {v.job_id: v for v in views}
    coord = GimbalCoordination(objective="deadline", deadline_goal=goal)
    coord.attach_monitor(TableMonitor())
    free = CalibrationPlan({"hopeless": [100], "feasible": [100]}, {})
    squeezed = CalibrationPlan({"hopeless": [50], "feasible": [100]}, {})
    obj = {name: coord.set_objective(view, list(placements), by, plan, placements)
           for name, plan in (("free", free), ("squeezed", squeezed))}
    assert (obj["squeezed"] < obj["free"]) is prefers_squeezed


def test_an_unknown_deadline_goal_is_refused():
    with pytest.raises(ValueError, match="deadline_goal"):
        GimbalCoordination(objective="deadline", deadline_goal="most")


class TradeMonitor:
    """Restricting job ``short`` speeds ``long`` up, but the pair does less work per second than free."""

    def worker_speeds(self, members):
        squeezed = any(p < 100 for p in members["short"][2])
        speed = {"long": 1.0, "short": 0.4} if squeezed else {"long": 0.8, "short": 0.8}
        return {j: [speed[j]] * len(p) for j, (_, p, _) in members.items()}


@pytest.mark.parametrize(("goal", "prefers_squeezed"), [("longest", True), ("work", False)])
def test_the_makespan_goal_work_keeps_the_set_doing_the_most_work(goal, prefers_squeezed):
    # equation 5 (longest) squeezes "short" to finish "long" sooner (2000 s instead of 2500 s); the work
    # goal keeps free competition, which clears the pair's 2500 s of work at 1.6 instead of 1.4
    placements = {"long": Placement.of([0]), "short": Placement.of([0])}
    view = view_of({"long": ("resnet50", 1, 2000.0), "short": ("resnet18", 1, 500.0)}, placements)
    by = {v.job_id: v for v in view.jobs}
    coord = GimbalCoordination(objective="makespan", makespan_goal=goal)
    coord.attach_monitor(TradeMonitor())
    free = CalibrationPlan({"long": [100], "short": [100]}, {})
    squeezed = CalibrationPlan({"long": [100], "short": [50]}, {})
    obj = {name: coord.set_objective(view, list(placements), by, plan, placements)
           for name, plan in (("free", free), ("squeezed", squeezed))}
    assert (obj["squeezed"] < obj["free"]) is prefers_squeezed
    if goal == "work":
        assert obj["free"] == pytest.approx(2500.0 / 1.6)


def test_an_unknown_makespan_goal_is_refused():
    with pytest.raises(ValueError, match="makespan_goal"):
        GimbalCoordination(objective="makespan", makespan_goal="shortest")
