"""Scenario tables: small hand-made clusters and jobs, one scheduler, and the decision it must make.

Each row names what it shows. One driver builds the scheduler the row names (preset, stage overrides,
``--set`` tunables, a deterministic stand-in estimator for adaptive allocations), hands it the row's view
(after any earlier rounds the row lists) and compares the decision with the row's expectations: which jobs
run, on which GPU type, on how many GPUs, on which nodes and, where it matters, on exactly which GPUs.
Every job of a row has an expectation, so a job that runs when it should wait fails the row too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest

from dlsched.core import Adaptivity, ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.estimators.base import GoodputEstimate
from dlsched.policies import build_scheduler
from dlsched.sim.invariants import check_decision
from testkit import StandInEstimator, small_cluster

# -- clusters (GPU ids in node order) ---------------------------------------------------------------------
ONE_NODE = small_cluster((("v100", 1, 4),))  # node 0: GPUs 0-3
TWO_NODES = small_cluster((("v100", 2, 4),))  # node 0: 0-3, node 1: 4-7
MIXED = small_cluster((("t4", 1, 4), ("a100", 1, 4)))  # node 0: t4 0-3, node 1: a100 4-7
PAIRS = small_cluster((("t4", 1, 2), ("v100", 1, 2)))  # node 0: t4 0-1, node 1: v100 2-3
SMALL_V100 = small_cluster((("v100", 1, 2),))  # node 0: 0-1
T4_PAIR_A100_QUAD = small_cluster((("t4", 1, 2), ("a100", 1, 4)))  # node 0: t4 0-1, node 1: a100 2-5
SIA = small_cluster((("t4", 2, 4), ("a100", 1, 8)))  # nodes 0-1: t4 0-7, node 2: a100 8-15

MODEL_CLASS = {"resnet50": "classA", "BERT": "classB", "vgg19": "classC", "PointNet": "classD"}
# Each node has one fast GPU (PM-score 1.0, the first) and three slow ones (1.5): a 2-GPU job packs on one
# node (worst GPU 1.5, no cross-node penalty) or spreads over the two fast GPUs (worst 1.0, pays l_across).
FAST_FIRST = {"classA": np.array([1.0, 1.5, 1.5, 1.5, 1.0, 1.5, 1.5, 1.5])}
# The same scores for every class; the best GPU is 4 (0.9), then 5 (0.95), then 3 (1.0).
RANKED = {c: np.array([1.3, 1.2, 1.1, 1.0, 0.9, 0.95, 1.25, 1.15]) for c in ("classA", "classD")}
# On MIXED's a100 node, GPUs 6 and 7 score best.
A100_67 = {"classA": np.array([1.0, 1.0, 1.0, 1.0, 1.4, 1.3, 1.0, 1.05])}


# -- jobs ------------------------------------------------------------------------------------------------
def job(job_id: str, gpus: int, *, submit: float = 0.0, on: tuple[int, ...] = (), model: str = "resnet50",
        adaptive: Adaptivity = Adaptivity.RIGID, min_gpus: int = 1, batch_size: int | None = None,
        gpu_types: tuple[str, ...] = (), gpu_s: float = 0.0, service: float | None = None,
        progress: float = 0.0, estimate: float | None = None, age: float = 600.0, wait: float = 0.0,
        restarts: int = 0, profiled: tuple[str, ...] = (), status: JobStatus | None = None) -> JobView:
    """A job as a scheduler sees it: its request and its state (where it runs, service, age, restarts)."""
    spec = JobSpec(job_id=job_id, submit_time_s=submit, model=model, num_gpus=gpus, batch_size=batch_size,
                   min_gpus=min_gpus, adaptivity=adaptive, gpu_types=gpu_types,
                   iterations=None if adaptive is not Adaptivity.RIGID else 1000.0)
    placement = Placement.of(on)
    if status is None:
        status = JobStatus.RUNNING if placement else JobStatus.QUEUED
    return JobView(spec=spec, status=status, placement=placement, batch_size=batch_size if placement else None,
                   age_s=age, wait_s=wait, attained_gpu_s=gpu_s,
                   attained_service_s=gpu_s / max(gpus, 1) if service is None else service,
                   restarts=restarts, progress_fraction=progress,
                   start_time_s=0.0 if (placement or restarts) else None, estimated_duration_s=estimate,
                   profiled_types=profiled,
                   batch_limits=None if adaptive is Adaptivity.RIGID else (64, 4096))


def elastic(job_id: str, gpus: int = 4, **kw) -> JobView:
    """An adaptive job (GPU count, type and batch size may change) that was profiled on every type."""
    kw.setdefault("profiled", ("t4", "v100", "a100"))
    kw.setdefault("model", "cifar10")
    kw.setdefault("batch_size", 256)
    return job(job_id, gpus, adaptive=Adaptivity.ADAPTIVE, **kw)


class SpeedTable(StandInEstimator):
    """Deterministic goodput: ``speed[type] * k**alpha``, ``node_loss`` less per extra node.

    ``per_job`` overrides the speeds of some jobs. With ``profiled_only`` (as a bootstrapped estimator) a type
    the job was not profiled on is unknown.
    """

    def __init__(self, speed: dict[str, float], *, per_job: dict[str, dict[str, float]] | None = None,
                 alpha: float = 0.9, node_loss: float = 0.03, profiled_only: bool = True) -> None:
        self.speed, self.per_job = speed, per_job or {}
        self.alpha, self.node_loss, self.profiled_only = alpha, node_loss, profiled_only

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        if self.profiled_only and gpu_type not in job.profiled_types:
            return None
        s = self.per_job.get(job.job_id, self.speed).get(gpu_type, 0.0)
        if s <= 0 or num_gpus < num_nodes or not job.spec.allows_gpu_count(num_gpus):
            return None
        g = s * num_gpus ** self.alpha * (1.0 - self.node_loss) ** (num_nodes - 1)
        return GoodputEstimate(goodput=g, batch_size=job.spec.batch_size or 128, throughput_sps=g, efficiency=1.0)


# -- expectations ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Runs:
    """The job gets GPUs; every field given must match."""

    gpu_type: str | None = None
    gpus: int | None = None
    nodes: tuple[int, ...] | None = None
    ids: tuple[int, ...] | None = None
    batch_size: int | None = None


@dataclass(frozen=True)
class Profiled:
    """The job gets no allocation but is profiled on ``gpus`` GPUs covering ``types``."""

    types: tuple[str, ...]
    gpus: int


WAITS = "waits"


@dataclass(frozen=True)
class Round:
    """An earlier round: the view the scheduler saw then (its decision only shapes the stage's state)."""

    time_s: float
    jobs: tuple[JobView, ...]


@dataclass(frozen=True)
class Scenario:
    cluster: object
    jobs: tuple[JobView, ...]
    expect: dict[str, Runs | Profiled | str] = field(default_factory=dict)
    policy: str = "fifo"
    ordering: str | None = None
    placement: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    estimator: StandInEstimator | None = None
    scores: dict[str, np.ndarray] | None = None
    time_s: float = 600.0
    history: tuple[Round, ...] = ()
    #: How many jobs run on each GPU type (when which job gets which type is a tie).
    jobs_per_type: dict[str, int] | None = None
    #: Gavel: the allocation stage's time fractions, job -> {type: fraction}.
    fractions: dict[str, dict[str, float]] | None = None
    #: The stage names an InputError must name (the combination cannot work).
    refused: tuple[str, ...] = ()


def row(name: str, *jobs: JobView, expect=None, marks=(), **kw):
    return pytest.param(Scenario(jobs=jobs, expect=expect or {}, **kw), id=name, marks=marks)


# -- the tables ------------------------------------------------------------------------------------------
ORDERING = [
    row("fifo: the earlier submission runs",
        job("a", 4, submit=10.0), job("b", 4, submit=5.0),
        cluster=ONE_NODE, expect={"a": WAITS, "b": Runs("v100", 4, (0,), (0, 1, 2, 3))}),
    row("fifo: equal submit times break by job id",
        job("b", 4), job("a", 4),
        cluster=ONE_NODE, expect={"a": Runs("v100", 4, (0,), (0, 1, 2, 3)), "b": WAITS}),
    row("sjf: the shortest expected run time runs",
        job("a", 4, estimate=1000.0), job("b", 4, submit=5.0, estimate=100.0),
        cluster=ONE_NODE, ordering="sjf", expect={"a": WAITS, "b": Runs(gpus=4)}),
    row("sjf: equal estimates break by submit time",
        job("a", 4, submit=5.0, estimate=100.0), job("b", 4, submit=1.0, estimate=100.0),
        cluster=ONE_NODE, ordering="sjf", expect={"a": WAITS, "b": Runs(gpus=4)}),
    row("sjf: a job without an estimate goes last",
        job("a", 4), job("b", 4, submit=9.0, estimate=5000.0),
        cluster=ONE_NODE, policy="sjf", expect={"a": WAITS, "b": Runs(gpus=4)}),
    row("srtf: least remaining time runs, not the shortest total",
        job("a", 4, estimate=1000.0, progress=0.9), job("b", 4, submit=5.0, estimate=500.0),
        cluster=ONE_NODE, policy="srtf", expect={"a": Runs(gpus=4), "b": WAITS}),
    row("sjf: same jobs, the shorter total runs",
        job("a", 4, estimate=1000.0, progress=0.9), job("b", 4, submit=5.0, estimate=500.0),
        cluster=ONE_NODE, policy="sjf", expect={"a": WAITS, "b": Runs(gpus=4)}),
    row("srtf: equal remaining time breaks by job id",
        job("b", 4, estimate=400.0, progress=0.5), job("a", 4, estimate=200.0),
        cluster=ONE_NODE, policy="srtf", expect={"a": Runs(gpus=4), "b": WAITS}),
    row("las: least attained GPU-seconds runs",
        job("a", 4, gpu_s=1000.0), job("b", 4, submit=5.0, gpu_s=10.0),
        cluster=ONE_NODE, policy="las", expect={"a": WAITS, "b": Runs(gpus=4)}),
    row("las: equal service breaks by submit time",
        job("a", 4, submit=5.0, gpu_s=100.0), job("b", 4, submit=2.0, gpu_s=100.0),
        cluster=ONE_NODE, policy="las", expect={"a": WAITS, "b": Runs(gpus=4)}),
    row("las: preempts a running job that has more service",
        job("a", 4, on=(0, 1, 2, 3), gpu_s=5000.0), job("b", 4, submit=5.0),
        cluster=ONE_NODE, policy="las", expect={"a": WAITS, "b": Runs("v100", 4, (0,), (0, 1, 2, 3))}),
    row("tiresias-2dlas: within one queue FIFO, unlike LAS",
        job("a", 4, gpu_s=3000.0), job("b", 4, submit=5.0, gpu_s=10.0),
        cluster=ONE_NODE, policy="tiresias", expect={"a": Runs(gpus=4), "b": WAITS}),
    row("tiresias-2dlas: a lower queue runs first",
        job("a", 4, gpu_s=4000.0), job("b", 4, submit=5.0, gpu_s=10.0),
        cluster=ONE_NODE, policy="tiresias", expect={"a": WAITS, "b": Runs(gpus=4)}),
    row("tiresias-2dlas: equal queue and submit time break by job id",
        job("b", 4, gpu_s=50.0), job("a", 4, gpu_s=3500.0),
        cluster=ONE_NODE, ordering="tiresias-2dlas", expect={"a": Runs(gpus=4), "b": WAITS}),
    row("tiresias-2dlas: a starved job is promoted back to queue 0",
        job("a", 4, gpu_s=4000.0, service=1000.0, wait=2500.0), job("b", 4, submit=5.0, gpu_s=10.0),
        cluster=ONE_NODE, policy="tiresias", settings={"starvation_factor": "2"},
        expect={"a": Runs(gpus=4), "b": WAITS}),
]

GANG = [
    row("gang: a rigid job larger than the free GPUs gets nothing",
        job("r", 4, on=(0, 1, 2, 3)), job("big", 6, submit=1.0),
        cluster=TWO_NODES, expect={"r": Runs("v100", 4, (0,), (0, 1, 2, 3)), "big": WAITS}),
    row("gang: one free GPU of each type is not a two-GPU gang",
        job("a", 3), job("b", 3, submit=1.0), job("c", 2, submit=2.0),
        cluster=MIXED, expect={"a": Runs("a100", 3, (1,), (4, 5, 6)), "b": Runs("t4", 3, (0,), (0, 1, 2)),
                               "c": WAITS}),
    row("gang: the cut queue stops at the first overflow",
        job("a", 6), job("b", 4, submit=1.0), job("c", 2, submit=2.0),
        cluster=TWO_NODES, expect={"a": Runs("v100", 6, (0, 1), (0, 1, 2, 3, 4, 5)), "b": WAITS, "c": WAITS}),
    row("gang backfill: a smaller job behind the overflow runs",
        job("a", 6), job("b", 4, submit=1.0), job("c", 2, submit=2.0),
        cluster=TWO_NODES, settings={"backfill": "true"},
        expect={"a": Runs("v100", 6, (0, 1), (0, 1, 2, 3, 4, 5)), "b": WAITS, "c": Runs("v100", 2, (1,), (6, 7))}),
    row("gang: a job the user restricts to t4 waits for t4 although a100s are free",
        job("a", 4, gpu_types=("t4",), on=(0, 1, 2, 3)), job("b", 2, submit=1.0, gpu_types=("t4",)),
        cluster=MIXED, expect={"a": Runs("t4", 4, (0,), (0, 1, 2, 3)), "b": WAITS}),
]

STICKINESS = [
    row("packed-sticky keeps a running job's GPUs",
        job("a", 1, on=(5,)), job("b", 4, submit=1.0),
        cluster=TWO_NODES, expect={"a": Runs(ids=(5,)), "b": Runs("v100", 4, (0,), (0, 1, 2, 3))}),
    row("packed (fifo-packed) re-places a running job to consolidate",
        job("a", 1, on=(5,)), job("b", 4, submit=1.0),
        cluster=TWO_NODES, policy="fifo-packed", expect={"a": Runs(ids=(0,)), "b": Runs("v100", 4, (1,), (4, 5, 6, 7))}),
    row("packed: a new job goes to the fullest node that holds it (best fit)",
        job("r", 3, on=(4, 5, 6)), job("x", 1, submit=1.0),
        cluster=TWO_NODES, expect={"r": Runs(ids=(4, 5, 6)), "x": Runs("v100", 1, (1,), (7,))}),
    row("random-sticky keeps a running job's GPUs",
        job("a", 1, on=(5,)), job("b", 3, submit=1.0),
        cluster=TWO_NODES, policy="random-sticky", expect={"a": Runs(ids=(5,)), "b": Runs("v100", 3)}),
    row("random: a job restricted to t4 gets t4 GPUs",
        job("a", 2, gpu_types=("t4",)), job("b", 4, submit=1.0, gpu_types=("a100",)),
        cluster=MIXED, policy="random", expect={"a": Runs("t4", 2, (0,)), "b": Runs("a100", 4, (1,), (4, 5, 6, 7))}),
    row("sticky placement after LAS preemption: the surviving job keeps its GPUs",
        job("a", 2, on=(0, 1), gpu_s=50.0), job("b", 2, on=(4, 5), gpu_s=9000.0), job("c", 6, submit=3.0),
        cluster=TWO_NODES, policy="las", expect={"a": Runs(ids=(0, 1)), "b": WAITS,
                                                 "c": Runs("v100", 6, (0, 1), (2, 3, 4, 5, 6, 7))}),
]

PAL = [
    row("pal: a high l_across packs on one node despite its slow GPUs",
        job("a", 2),
        cluster=TWO_NODES, policy="pal", scores=FAST_FIRST, settings={"l_across": "1.7", "binned": "false"},
        expect={"a": Runs("v100", 2, (0,), (0, 1))}),
    row("pal: a low l_across spreads over the two best GPUs",
        job("a", 2),
        cluster=TWO_NODES, policy="pal", scores=FAST_FIRST, settings={"l_across": "1.2", "binned": "false"},
        expect={"a": Runs("v100", 2, (0, 1), (0, 4))}),
    row("pal: l_across equal to the score ratio packs (the within-node entry comes first)",
        job("a", 2),
        cluster=TWO_NODES, policy="pal", scores=FAST_FIRST, settings={"l_across": "1.5", "binned": "false"},
        expect={"a": Runs("v100", 2, (0,), (0, 1))}),
    row("pal: without a variability profile pal packs class A first and re-places the rest",
        job("r", 3, on=(0, 1, 2), model="PointNet"), job("a", 2, submit=1.0),
        cluster=TWO_NODES, policy="pal", settings={"l_across": "1.7"},
        expect={"a": Runs("v100", 2, (0,), (0, 1)), "r": Runs("v100", 3, (1,), (4, 5, 6))}),
    row("pm-first: takes the best-scored GPUs whatever the nodes",
        job("a", 2),
        cluster=TWO_NODES, policy="pm-first", scores=FAST_FIRST, settings={"binned": "false"},
        expect={"a": Runs("v100", 2, (0, 1), (0, 4))}),
    row("pm-first: class A picks before an earlier class D job",
        job("d1", 1, model="PointNet"), job("a1", 1, submit=1.0), job("a2", 1, submit=2.0),
        cluster=TWO_NODES, policy="pm-first", scores=RANKED, settings={"binned": "false"},
        expect={"a1": Runs(ids=(4,)), "a2": Runs(ids=(5,)), "d1": Runs(ids=(3,))}),
    row("pm-first: a job outside the cut queue does not run ahead",
        job("d1", 4, model="PointNet"), job("d2", 4, submit=1.0, model="PointNet"), job("a1", 1, submit=2.0),
        cluster=TWO_NODES, policy="pm-first", scores=RANKED,
        expect={"d1": Runs(gpus=4), "d2": Runs(gpus=4), "a1": WAITS}),
    row("pal placement under las ordering: ordering picks who, pal picks where",
        job("a", 2, gpu_s=900.0), job("b", 2, submit=5.0, gpu_s=10.0), job("c", 6, submit=6.0, gpu_s=20.0),
        cluster=TWO_NODES, policy="pal", ordering="las", scores=FAST_FIRST,
        settings={"l_across": "1.2", "binned": "false"},
        expect={"b": Runs("v100", 2, (0, 1), (0, 4)), "c": Runs("v100", 6, (0, 1), (1, 2, 3, 5, 6, 7)),
                "a": WAITS}),
]

SIA_EST = SpeedTable({"t4": 1.0, "a100": 3.0})
SIA_ROWS = [
    row("sia: the job that gains most on the fast type gets it",
        elastic("x", min_gpus=4), elastic("y", min_gpus=4),
        cluster=MIXED, policy="sia",
        estimator=SpeedTable({}, per_job={"x": {"t4": 1.0, "a100": 3.0}, "y": {"t4": 1.0, "a100": 1.1}}),
        expect={"x": Runs("a100", 4, (1,), (4, 5, 6, 7)), "y": Runs("t4", 4, (0,), (0, 1, 2, 3))}),
    row("sia: the doubling limit grows a 2-GPU job to 4, not 8",
        elastic("a", 8, on=(8, 9)),
        cluster=SIA, policy="sia", estimator=SIA_EST, expect={"a": Runs("a100", 4, (2,))}),
    row("sia: without the doubling limit a lone job takes the whole fast node",
        elastic("a", 8, on=(8, 9)),
        cluster=SIA, policy="sia", estimator=SIA_EST, settings={"max_doubling": "false"},
        expect={"a": Runs("a100", 8, (2,), tuple(range(8, 16)))}),
    row("sia: queued jobs start at their minimum GPU count, two on the fast type",
        elastic("j0", min_gpus=4), elastic("j1", min_gpus=4), elastic("j2", min_gpus=4),
        cluster=SIA, policy="sia", estimator=SIA_EST,
        expect={"j0": Runs(gpus=4), "j1": Runs(gpus=4), "j2": Runs(gpus=4)}, jobs_per_type={"a100": 2, "t4": 1}),
    row("sia: a rigid job gets exactly its count on its best type",
        job("r", 4, adaptive=Adaptivity.RIGID, batch_size=512, profiled=("t4", "a100")),
        cluster=SIA, policy="sia", estimator=SIA_EST, expect={"r": Runs("a100", 4, (2,), batch_size=512)}),
    row("sia: a strong-scaling job keeps its batch size",
        job("s", 4, adaptive=Adaptivity.STRONG_SCALING, batch_size=1024, profiled=("t4", "a100")),
        cluster=SIA, policy="sia", estimator=SIA_EST, expect={"s": Runs("a100", 1, (2,), batch_size=1024)}),
    row("sia: a new job is profiled on one GPU of each type first",
        elastic("n", profiled=(), age=0.0),
        cluster=SIA, policy="sia", estimator=SIA_EST, expect={"n": Profiled(("a100", "t4"), 2)}),
    row("sia: a job that restarted often keeps its slow GPUs",
        elastic("a", on=(0, 1), restarts=30, age=1000.0),
        cluster=SIA, policy="sia", estimator=SIA_EST, expect={"a": Runs("t4", 2, (0,), (0, 1))}),
    row("sia: with the restart factor off the same job moves to the fast type",
        elastic("a", on=(0, 1), restarts=30, age=1000.0),
        cluster=SIA, policy="sia", estimator=SIA_EST, settings={"restart_factor": "off"},
        expect={"a": Runs("a100", 4, (2,))}),
    row("sia: reserved fast GPUs stay idle, the job takes the slow ones",
        elastic("a", min_gpus=4),
        cluster=MIXED, policy="sia", estimator=SpeedTable({"t4": 1.0, "a100": 3.0}), settings={"reserve": "a100:4"},
        expect={"a": Runs("t4", 4, (0,), (0, 1, 2, 3))}),
]

GAVEL_EST = SpeedTable({}, per_job={"A": {"t4": 1.0, "v100": 4.0}, "B": {"t4": 1.0, "v100": 2.0}},
                       profiled_only=False)


def gavel_job(job_id: str, gpus: int, **kw) -> JobView:
    kw.setdefault("profiled", ("t4", "v100"))
    kw.setdefault("estimate", 3600.0)
    return elastic(job_id, gpus, **kw)


GAVEL = [
    row("gavel: max-sum-throughput gives the fast type to the job that gains most",
        gavel_job("A", 2), gavel_job("B", 2, submit=1.0),
        cluster=PAIRS, policy="gavel", estimator=GAVEL_EST,
        expect={"A": Runs("v100", 2, (1,), (2, 3), batch_size=256), "B": Runs("t4", 2, (0,), (0, 1), batch_size=256)},
        fractions={"A": {"t4": 0.0, "v100": 1.0}, "B": {"t4": 1.0, "v100": 0.0}}),
    row("gavel: three equal jobs share two GPUs by time, two run this lease",
        gavel_job("j0", 1, profiled=("v100",)), gavel_job("j1", 1, submit=1.0, profiled=("v100",)),
        gavel_job("j2", 1, submit=2.0, profiled=("v100",)),
        cluster=SMALL_V100, policy="gavel", estimator=SpeedTable({"v100": 1.0}, profiled_only=False),
        expect={"j0": Runs(gpus=1), "j1": Runs(gpus=1), "j2": WAITS},
        fractions={"j0": {"v100": 2 / 3}, "j1": {"v100": 2 / 3}, "j2": {"v100": 2 / 3}}),
    row("gavel: a lease holds inside the round; the newcomer waits",
        gavel_job("A", 2, on=(0, 1), profiled=("v100",)), gavel_job("B", 2, submit=30.0, profiled=("v100",)),
        cluster=SMALL_V100, policy="gavel", estimator=SpeedTable({"v100": 1.0}, profiled_only=False),
        time_s=60.0, history=(Round(0.0, (gavel_job("A", 2, profiled=("v100",)),)),),
        expect={"A": Runs(ids=(0, 1)), "B": WAITS}),
    row("gavel: the next lease goes to the job that received least time",
        gavel_job("A", 2, on=(0, 1), profiled=("v100",)), gavel_job("B", 2, submit=30.0, profiled=("v100",)),
        cluster=SMALL_V100, policy="gavel", estimator=SpeedTable({"v100": 1.0}, profiled_only=False),
        time_s=360.0, history=(Round(0.0, (gavel_job("A", 2, profiled=("v100",)),)),),
        expect={"A": WAITS, "B": Runs("v100", 2, (0,), (0, 1))}),
    row("gavel: with bootstrapped throughputs a new job is profiled on one GPU of each type before it runs",
        gavel_job("n", 2, profiled=()),
        cluster=PAIRS, policy="gavel", estimator=GAVEL_EST, settings={"throughputs": "bootstrap"},
        expect={"n": Profiled(("t4", "v100"), 2)}),
]

MARKETS = [
    row("themis: the app with the worst finish-time fairness wins the auction for the whole node",
        job("new", 4, age=60.0, estimate=3600.0), job("old", 4, submit=1.0, age=7200.0, estimate=3600.0),
        cluster=ONE_NODE, policy="themis", expect={"old": Runs("v100", 4), "new": WAITS}),
    row("themis: leftover GPUs go to the apps outside the auction",
        job("a", 2, age=60.0, estimate=3600.0), job("b", 2, submit=1.0, age=7200.0, estimate=3600.0),
        cluster=ONE_NODE, policy="themis", expect={"a": Runs("v100", 2), "b": Runs("v100", 2)}),
    row("themis: the auction's winner preempts; the gang that no longer fits gets nothing, not part",
        job("r", 3, on=(0, 1, 2), age=7200.0, estimate=7200.0), job("short", 2, submit=1.0, estimate=600.0),
        cluster=ONE_NODE, policy="themis", expect={"r": WAITS, "short": Runs("v100", 2)}),
    row("shockwave: the job whose finish-time fairness is at risk runs first",
        job("new", 4, age=60.0, estimate=3600.0), job("old", 4, submit=1.0, age=20000.0, estimate=3600.0),
        cluster=ONE_NODE, policy="shockwave", settings={"window_rounds": "3"},
        expect={"old": Runs("v100", 4), "new": WAITS}),
    row("shockwave: two gangs that fit together both run",
        job("a", 2, estimate=3600.0), job("b", 2, submit=1.0, estimate=3600.0),
        cluster=ONE_NODE, policy="shockwave", settings={"window_rounds": "3"},
        expect={"a": Runs("v100", 2), "b": Runs("v100", 2)}),
]

POLLUX_EST = SpeedTable({"v100": 1.0}, alpha=0.8, node_loss=0.05, profiled_only=False)
POLLUX_SET = {"population": "30", "generations": "30"}


def pollux_job(job_id: str, on: tuple[int, ...], **kw) -> JobView:
    return elastic(job_id, 4, on=on, profiled=(), **kw)


POLLUX = [
    row("pollux: a young job is not moved when moving would gain little",
        pollux_job("j", (0, 1), age=30.0),
        cluster=ONE_NODE, policy="pollux", estimator=POLLUX_EST, settings=POLLUX_SET,
        expect={"j": Runs("v100", 2, (0,), (0, 1))}),
    row("pollux: a job that restarted often is not moved",
        pollux_job("j", (0, 1), age=600.0, restarts=19),
        cluster=ONE_NODE, policy="pollux", estimator=POLLUX_EST, settings=POLLUX_SET,
        expect={"j": Runs("v100", 2, (0,), (0, 1))}),
    row("pollux: an old job grows to twice its GPUs",
        pollux_job("j", (0, 1), age=100_000.0),
        cluster=ONE_NODE, policy="pollux", estimator=POLLUX_EST, settings=POLLUX_SET,
        expect={"j": Runs("v100", 4, (0,), (0, 1, 2, 3))}),
    row("pollux: a rigid gang that only one GPU type can hold runs there",
        job("r", 4),
        cluster=T4_PAIR_A100_QUAD, policy="pollux", estimator=POLLUX_EST, settings=POLLUX_SET,
        expect={"r": Runs("a100", 4, (1,), (2, 3, 4, 5))}),
    row("pollux: with no restart delay even a young job grows",
        pollux_job("j", (0, 1), age=30.0),
        cluster=ONE_NODE, policy="pollux", estimator=POLLUX_EST,
        settings={**POLLUX_SET, "restart_delay_s": "0"}, expect={"j": Runs("v100", 4, (0,), (0, 1, 2, 3))}),
]

COMPOSED = [
    row("sia allocation + pal placement: sia picks type and count, pal the best-scored GPUs",
        elastic("a", on=(4,)),
        cluster=MIXED, policy="sia", placement="pal", estimator=SpeedTable({"t4": 1.0, "a100": 3.0}),
        scores=A100_67, settings={"binned": "false"}, expect={"a": Runs("a100", 2, (1,), (6, 7))}),
    row("sia allocation + pal placement: the heterogeneity match survives",
        elastic("x", min_gpus=4), elastic("y", min_gpus=4),
        cluster=MIXED, policy="sia", placement="pal", scores=A100_67,
        estimator=SpeedTable({}, per_job={"x": {"t4": 1.0, "a100": 3.0}, "y": {"t4": 1.0, "a100": 1.1}}),
        expect={"x": Runs("a100", 4, (1,), (4, 5, 6, 7)), "y": Runs("t4", 4, (0,), (0, 1, 2, 3))}),
    row("sia allocation + pm-first placement: non-sticky, a job sia keeps still moves to the best GPUs",
        elastic("a", on=(4, 5), restarts=30, age=1000.0),
        cluster=MIXED, policy="sia", placement="pm-first", estimator=SpeedTable({"t4": 1.0, "a100": 3.0}),
        scores=A100_67, settings={"binned": "false"}, expect={"a": Runs("a100", 2, (1,), (6, 7))}),
    row("sia allocation + pm-first placement with sticky=true: a job sia keeps stays put",
        elastic("a", on=(4, 5), restarts=30, age=1000.0),
        cluster=MIXED, policy="sia", placement="pm-first", estimator=SpeedTable({"t4": 1.0, "a100": 3.0}),
        scores=A100_67, settings={"binned": "false", "sticky": "true"}, expect={"a": Runs("a100", 2, (1,), (4, 5))}),
    row("sia allocation + packed-sticky placement: types as sia chose them",
        elastic("x", min_gpus=4), elastic("y", min_gpus=4),
        cluster=MIXED, policy="sia", placement="packed-sticky",
        estimator=SpeedTable({}, per_job={"x": {"t4": 1.0, "a100": 3.0}, "y": {"t4": 1.0, "a100": 1.1}}),
        expect={"x": Runs("a100", 4, (1,), (4, 5, 6, 7)), "y": Runs("t4", 4, (0,), (0, 1, 2, 3))}),
    row("sia allocation + packed-sticky placement: a job whose count is unchanged keeps its GPUs",
        elastic("a", on=(0, 1), restarts=30, age=1000.0), elastic("b", min_gpus=4, submit=1.0),
        cluster=MIXED, policy="sia", placement="packed-sticky", estimator=SpeedTable({"t4": 1.0, "a100": 3.0}),
        expect={"a": Runs("t4", 2, (0,), (0, 1)), "b": Runs("a100", 4, (1,), (4, 5, 6, 7))}),
    row("gavel allocation + pm-first placement: leases on the types gavel chose",
        gavel_job("A", 2), gavel_job("B", 2, submit=1.0),
        cluster=PAIRS, policy="gavel", placement="pm-first", estimator=GAVEL_EST,
        expect={"A": Runs("v100", 2, (1,), (2, 3)), "B": Runs("t4", 2, (0,), (0, 1))}),
    row("pollux allocation + packed-sticky placement: an unmoved job keeps its GPUs",
        pollux_job("j", (0, 1), age=30.0),
        cluster=ONE_NODE, policy="pollux", placement="packed-sticky", estimator=POLLUX_EST, settings=POLLUX_SET,
        expect={"j": Runs("v100", 2, (0,), (0, 1))}),
    row("refused: sia placement after the gang allocation",
        cluster=ONE_NODE, policy="fifo", placement="sia", refused=("sia", "gang")),
    row("refused: pollux placement after the gang allocation",
        cluster=ONE_NODE, policy="fifo", placement="pollux", refused=("pollux", "gang")),
    row("refused: pollux placement after the sia allocation",
        cluster=ONE_NODE, policy="sia", placement="pollux", refused=("pollux", "sia")),
    row("refused: las ordering with the sia allocation",
        cluster=ONE_NODE, policy="sia", ordering="las", refused=("las", "sia")),
    row("refused: las ordering with the gavel allocation",
        cluster=ONE_NODE, policy="gavel", ordering="las", refused=("las", "gavel")),
    row("refused: las ordering with the pollux allocation",
        cluster=ONE_NODE, policy="pollux", ordering="las", refused=("las", "pollux")),
    row("refused: las ordering with the themis allocation",
        cluster=ONE_NODE, policy="themis", ordering="las", refused=("las", "themis")),
    row("refused: sia placement after the shockwave allocation (it names no GPU type)",
        cluster=ONE_NODE, policy="shockwave", placement="sia", refused=("sia", "shockwave")),
    row("refused: srtf ordering with the sia allocation and pal placement",
        cluster=ONE_NODE, policy="sia", ordering="srtf", placement="pal", refused=("srtf", "sia")),
]


# -- the driver ------------------------------------------------------------------------------------------
def view_at(s: Scenario, time_s: float, jobs) -> ClusterView:
    return ClusterView(time_s=time_s, round_s=60.0, cluster=s.cluster, jobs=list(jobs), gpu_scores=s.scores,
                       model_class=MODEL_CLASS)


def build(s: Scenario):
    sched = build_scheduler(s.policy, ordering=s.ordering, placement=s.placement, settings=s.settings, seed=0)
    if s.estimator is not None:
        sched.attach_oracle(s.estimator)
    return sched


@pytest.mark.parametrize("s", ORDERING + GANG + STICKINESS + PAL + SIA_ROWS + GAVEL + MARKETS + POLLUX + COMPOSED)
def test_scenario(s: Scenario):
    if s.refused:
        with pytest.raises(InputError) as err:
            build(s)
        for stage in s.refused:
            assert f"'{stage}'" in str(err.value)
        return
    sched = build(s)
    for earlier in s.history:
        sched.schedule(view_at(s, earlier.time_s, earlier.jobs))
    view = view_at(s, s.time_s, s.jobs)
    decision = sched.schedule(view)
    cluster = s.cluster
    check_decision(decision, cluster, {j.job_id: j.spec for j in s.jobs}, allows_packing=False,
                   rigid=sched.traits.rigid, policy=s.policy)
    assert set(s.expect) == {j.job_id for j in s.jobs}, "every job of a row needs an expectation"
    for job_id, want in s.expect.items():
        alloc = decision.allocations.get(job_id)
        got = alloc.placement if alloc is not None else Placement.empty()
        if want == WAITS:
            assert not got and job_id not in decision.profiles, f"{job_id} should wait, got {got.gpus}"
        elif isinstance(want, Profiled):
            assert not got, f"{job_id} should be profiled first, got {got.gpus}"
            prof = decision.profiles.get(job_id)
            assert prof is not None, f"{job_id} should be profiled"
            assert sorted(prof.gpu_types(cluster)) == sorted(want.types) and len(prof) == want.gpus
        else:
            assert got, f"{job_id} should run"
            if want.gpu_type is not None:
                assert got.gpu_types(cluster) == {want.gpu_type}, f"{job_id} on {got.gpu_types(cluster)}"
            if want.gpus is not None:
                assert len(got) == want.gpus, f"{job_id} got {got.gpus}"
            if want.nodes is not None:
                assert tuple(sorted(got.by_node(cluster))) == want.nodes, f"{job_id} got {got.gpus}"
            if want.ids is not None:
                assert got.gpus == want.ids
            if want.batch_size is not None:
                assert alloc.batch_size == want.batch_size
    if s.jobs_per_type is not None:
        per_type = Counter(cluster.gpu_type_of[a.placement.gpus[0]] for a in decision.allocations.values()
                           if a.placement)
        assert dict(per_type) == s.jobs_per_type
    fractions = getattr(sched.allocation, "time_fractions", None)
    if fractions is not None:
        for job_id, per_type in fractions.items():
            assert all(f >= -1e-9 for f in per_type.values())
            assert sum(per_type.values()) <= 1.0 + 1e-6, f"{job_id} is given more than all the time"
    if s.fractions is not None:
        assert fractions is not None
        for job_id, per_type in s.fractions.items():
            for gtype, want_f in per_type.items():
                assert fractions[job_id][gtype] == pytest.approx(want_f, abs=2e-3), (job_id, gtype)
