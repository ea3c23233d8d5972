"""The engine's GPU-holder index, kept on placement events, agrees with a full recomputation.

The engine asks the index (instead of scanning every active job) which jobs can share a GPU or run under a
share restriction, and how many GPUs of each type are in use; any event sequence must leave both answers
equal to what a scan of every job gives, or packed jobs would run at wrong rates and round records lie.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, Job, JobSpec, Placement
from dlsched.sim.colocated import sharing_of
from dlsched.sim.holders import GpuHolders
from testkit import small_cluster

CLUSTER = small_cluster((("a40", 2, 4), ("v100", 1, 4)))  # 12 GPUs of two types
MODELS = ("resnet50", "vgg19", "bert")
N_JOBS = 6


@dataclass
class State:
    job: Job


def make_states() -> list[State]:
    return [State(Job(spec=JobSpec(job_id=f"j{i}", submit_time_s=0.0, model=MODELS[i % 3], num_gpus=1,
                                   duration_s=60.0, adaptivity=Adaptivity.RIGID)))
            for i in range(N_JOBS)]


#: An event: job index, its new GPUs (empty: it stops or completes), whether it runs restricted, whether it
#: splits its batch unevenly.
EVENT = st.tuples(st.integers(0, N_JOBS - 1), st.sets(st.integers(0, CLUSTER.num_gpus - 1), max_size=5),
                  st.booleans(), st.booleans())


def full_used_by_type(states: list[State], extra: set[int]) -> np.ndarray:
    used = np.zeros(CLUSTER.num_gpus, dtype=bool)
    used[list(extra)] = True
    for s in states:
        if s.job.placement:
            used[list(s.job.placement.gpus)] = True
    return np.bincount(CLUSTER.gpu_type_index[used], minlength=len(CLUSTER.type_names))


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENT, max_size=40), st.sets(st.integers(0, CLUSTER.num_gpus - 1), max_size=4))
def test_index_agrees_with_a_scan_of_every_job_after_any_event_sequence(events, profiling_gpus):
    states = make_states()
    holders = GpuHolders(CLUSTER)
    by_id = {s.job.job_id: s for s in states}
    for i, gpus, restricted, uneven in events:
        j = states[i].job
        j.placement = Placement.of(gpus)
        n = len(j.placement)
        j.mps_pct = (50,) * n if restricted and n else ()
        j.batch_split = tuple([2.0] + [1.0] * (n - 1)) if uneven and n else ()
        holders.update(j.job_id, i, j.placement.gpus, bool(j.mps_pct) or bool(j.batch_split))

        assert sharing_of([by_id[k] for k in holders.sharing_candidates()]) == sharing_of(states)
        assert holders.running == sum(1 for s in states if s.job.placement)
        assert holders.used_by_type(profiling_gpus).tolist() == full_used_by_type(states, profiling_gpus).tolist()
        for g in range(CLUSTER.num_gpus):
            assert set(holders.held(g)) == {s.job.job_id for s in states if g in s.job.placement.gpus}


def test_nothing_shared_means_no_candidates():
    holders = GpuHolders(CLUSTER)
    holders.update("a", 0, (0, 1), False)
    holders.update("b", 1, (2, 3), False)
    assert holders.sharing_candidates() == []
    holders.update("b", 1, (1, 2), False)  # b moves onto a's GPU 1
    assert holders.sharing_candidates() == ["a", "b"]
    holders.update("a", 0, (), False)  # a completes
    assert holders.sharing_candidates() == []
    assert holders.used_by_type().tolist() == [2, 0]
