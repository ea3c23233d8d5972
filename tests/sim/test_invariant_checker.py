"""The decision checker: every kind of bad decision it guards against is rejected, naming the job or GPU.

One table row per kind of bug. The cluster is one 4-GPU V100 node (GPUs 0-3) and one 4-GPU T4 node
(GPUs 4-7); the jobs cover a rigid gang, an elastic job with a GPU range, a job that accepts V100s only,
a hybrid-parallel job whose counts must be multiples of 2, and a job still being profiled (on GPU 3, in
the rows whose profile outlasts an earlier round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from dlsched.core import Adaptivity, Allocation, Decision, JobSpec, Placement
from dlsched.sim.invariants import PolicyError, check_decision
from testkit import small_cluster

CLUSTER = small_cluster((("v100", 1, 4), ("t4", 1, 4)))

ACTIVE = {
    s.job_id: s
    for s in (
        JobSpec(job_id="rigid", submit_time_s=0.0, model="philly", num_gpus=2, batch_size=64, duration_s=100.0),
        JobSpec(job_id="elastic", submit_time_s=0.0, model="cifar10", num_gpus=2, min_gpus=2, max_gpus=3,
                adaptivity=Adaptivity.ADAPTIVE),
        JobSpec(job_id="picky", submit_time_s=0.0, model="philly", num_gpus=1, duration_s=100.0,
                gpu_types=("v100",)),
        JobSpec(job_id="pipeline", submit_time_s=0.0, model="bert", num_gpus=2, gpu_unit=2,
                adaptivity=Adaptivity.ADAPTIVE),
        JobSpec(job_id="fresh", submit_time_s=0.0, model="bert", num_gpus=1, adaptivity=Adaptivity.ADAPTIVE),
    )
}


def test_cluster_layout_the_table_relies_on():
    assert CLUSTER.num_gpus == 8
    assert [CLUSTER.gpu_type_of[g] for g in range(8)] == ["v100"] * 4 + ["t4"] * 4


@dataclass
class Case:
    """A decision, the checker's settings for it, and what the error must say."""

    allocations: dict[str, Allocation] = field(default_factory=dict)
    profiles: dict[str, Placement] = field(default_factory=dict)
    packing: bool = False
    rigid: bool = False
    profiling: frozenset[str] = frozenset()
    current: dict[str, tuple[Placement, int | None]] = field(default_factory=dict)
    #: Profiles started in an earlier round and still running: job -> the GPUs they hold.
    held: dict[str, Placement] = field(default_factory=dict)
    #: Substrings the error message must contain (the job and/or GPU at fault, and what is wrong).
    expect: tuple[str, ...] = ()


def alloc(*gpus: int, batch: int | None = None, share: float = 1.0) -> Allocation:
    """An allocation on exactly these GPU ids, in this order (not sorted: some bugs are unsorted lists)."""
    return Allocation(Placement(tuple(gpus)), batch, share)


def run(case: Case, policy: str = "buggy") -> None:
    decision = Decision(allocations=dict(case.allocations), profiles=dict(case.profiles))
    check_decision(decision, CLUSTER, ACTIVE, allows_packing=case.packing, rigid=case.rigid, policy=policy,
                   profiling=case.profiling, current=case.current, profile_held=case.held)


#: ``fresh`` is being profiled on GPU 3 since an earlier round.
STILL_PROFILING = {"profiling": frozenset({"fresh"}), "held": {"fresh": Placement((3,))}}


BAD = {
    "allocates an unknown job": Case(allocations={"ghost": alloc(0)}, expect=("'ghost'", "not an active job")),
    "profiles an unknown job": Case(profiles={"ghost": Placement((0,))}, expect=("'ghost'", "not an active job")),
    "profiles and allocates one job": Case(allocations={"fresh": alloc(0)}, profiles={"fresh": Placement((4,))},
                                           expect=("'fresh'", "both profiled and allocated")),
    "allocates before profiling ends": Case(allocations={"fresh": alloc(0)}, profiling=frozenset({"fresh"}),
                                            expect=("'fresh'", "before its profiling finished")),
    "profiles on no GPUs": Case(profiles={"fresh": Placement(())}, expect=("'fresh'", "no GPUs")),
    "profiles on a repeated GPU": Case(profiles={"fresh": Placement((2, 2))}, expect=("'fresh'", "repeats", "[2]")),
    "profiles on a GPU outside the cluster": Case(profiles={"fresh": Placement((8,))},
                                                  expect=("'fresh'", "outside", "[8]")),
    "allocates a repeated GPU": Case(allocations={"elastic": alloc(1, 1)}, expect=("'elastic'", "repeats", "[1]")),
    "allocates a GPU id past the end": Case(allocations={"elastic": alloc(3, 8)},
                                            expect=("'elastic'", "outside", "[8]")),
    "allocates a negative GPU id in an unsorted list": Case(allocations={"elastic": alloc(1, -6)},
                                                            expect=("'elastic'", "outside", "[-6]")),
    "splits a gang across GPU types": Case(allocations={"elastic": alloc(3, 4)},
                                           expect=("'elastic'", "spans GPU types", "t4", "v100")),
    "places a job on a type it refuses": Case(allocations={"picky": alloc(4)},
                                              expect=("'picky'", "t4", "did not accept")),
    "gives a rigid policy's gang the wrong size": Case(allocations={"elastic": alloc(0, 1, 2)}, rigid=True,
                                                       expect=("'elastic'", "3 GPUs", "2 requested")),
    "shrinks a rigid job": Case(allocations={"rigid": alloc(0)}, expect=("'rigid'", "1 GPUs", "outside its allowed")),
    "gives less than the minimum": Case(allocations={"elastic": alloc(0)},
                                        expect=("'elastic'", "1 GPUs", "2..3")),
    "gives more than the maximum": Case(allocations={"elastic": alloc(0, 1, 2, 3)},
                                        expect=("'elastic'", "4 GPUs", "2..3")),
    "ignores the scale-out unit": Case(allocations={"pipeline": alloc(4, 5, 6)},
                                       expect=("'pipeline'", "3 GPUs", "unit 2")),
    "changes a rigid job's batch size": Case(allocations={"rigid": alloc(0, 1, batch=32)},
                                             expect=("'rigid'", "batch size changed")),
    "sets a batch size of zero": Case(allocations={"elastic": alloc(0, 1, batch=0)},
                                      expect=("'elastic'", "batch size 0", "below 1")),
    "sets a negative batch size": Case(allocations={"rigid": alloc(0, 1, batch=-64)},
                                       expect=("'rigid'", "batch size -64", "below 1")),
    "sets a GPU share of zero": Case(allocations={"elastic": alloc(0, 1, share=0.0)}, packing=True,
                                     expect=("'elastic'", "GPU share 0.0")),
    "sets a GPU share above one": Case(allocations={"elastic": alloc(0, 1, share=1.5)}, packing=True,
                                       expect=("'elastic'", "GPU share 1.5")),
    "sets a NaN GPU share": Case(allocations={"elastic": alloc(0, 1, share=math.nan)}, packing=True,
                                 expect=("'elastic'", "GPU share nan")),
    "shares GPUs without packing": Case(allocations={"elastic": alloc(0, 1, share=0.5)},
                                        expect=("'elastic'", "does not pack")),
    "gives a GPU to two jobs": Case(allocations={"elastic": alloc(0, 1), "rigid": alloc(1, 2)},
                                    expect=("GPU 1", "'elastic'", "'rigid'", "2.000")),
    "packs shares over one": Case(allocations={"elastic": alloc(4, 5, share=0.6), "pipeline": alloc(4, 5, share=0.6)},
                                  packing=True, expect=("GPU 4", "'elastic'", "'pipeline'", "1.200")),
    "allocates a GPU being profiled": Case(allocations={"elastic": alloc(0, 1)}, profiles={"fresh": Placement((1,))},
                                           expect=("GPU 1", "'fresh'", "'elastic'")),
    "profiles two jobs on one GPU": Case(profiles={"fresh": Placement((6,)), "picky": Placement((6,))},
                                         expect=("GPU 6", "'fresh'", "'picky'")),
    "double-books next to an unchanged running job": Case(
        allocations={"elastic": alloc(0, 1), "rigid": alloc(1, 2)},
        current={"elastic": (Placement((0, 1)), None)}, expect=("GPU 1", "'elastic'", "'rigid'")),
    "gives a GPU a running profile holds": Case(allocations={"picky": alloc(3)}, **STILL_PROFILING,
                                                expect=("GPU 3", "'picky'", "'fresh' is still being profiled")),
    "packs onto a GPU a running profile holds": Case(allocations={"elastic": alloc(2, 3)}, packing=True,
                                                     **STILL_PROFILING,
                                                     expect=("GPU 3", "'elastic'", "'fresh' is still being profiled")),
    "profiles on a GPU a running profile holds": Case(profiles={"pipeline": Placement((3,))}, **STILL_PROFILING,
                                                      expect=("GPU 3", "'pipeline'", "still being profiled")),
    "profiles a job whose profile still runs": Case(profiles={"fresh": Placement((4,))}, **STILL_PROFILING,
                                                    expect=("'fresh'", "again while its profile is still running")),
}


@pytest.mark.parametrize("case", list(BAD.values()), ids=list(BAD))
def test_rejects_bad_decision(case: Case):
    with pytest.raises(PolicyError) as err:
        run(case)
    message = str(err.value)
    assert message.startswith("buggy: ")  # the policy at fault is named first
    for part in case.expect:
        assert part in message, f"{part!r} missing from {message!r}"


GOOD = {
    "an empty decision": Case(),
    "a typical round": Case(
        allocations={"rigid": alloc(0, 1), "picky": alloc(2), "elastic": alloc(4, 5, 6, batch=256),
                     "pipeline": Allocation(Placement.empty())},  # named without GPUs: it waits
        profiles={"fresh": Placement((7,))}),
    "a rigid gang of exactly its request under a rigid policy": Case(allocations={"rigid": alloc(4, 5, batch=64)},
                                                                     rigid=True),
    "a job profiled while holding nothing": Case(allocations={"fresh": Allocation(Placement.empty())},
                                                 profiles={"fresh": Placement((0, 4))}, profiling=frozenset({"fresh"})),
    "packed shares summing to one": Case(allocations={"elastic": alloc(4, 5, share=0.5),
                                                      "pipeline": alloc(4, 5, share=0.5)}, packing=True),
    "a valid GPU list given unsorted": Case(allocations={"elastic": alloc(5, 4)}),
    "an unchanged running allocation": Case(allocations={"rigid": alloc(0, 1, batch=64)},
                                            current={"rigid": (Placement((0, 1)), 64)}),
    "every GPU but the one a running profile holds": Case(allocations={"rigid": alloc(0, 1), "picky": alloc(2)},
                                                          profiles={"pipeline": Placement((4,))},
                                                          **STILL_PROFILING),
}


@pytest.mark.parametrize("case", list(GOOD.values()), ids=list(GOOD))
def test_accepts_valid_decision(case: Case):
    run(case)  # raises PolicyError if the checker objects
