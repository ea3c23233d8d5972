"""Gavel's lease placement: packed by default, Gavel's in-order worker assignment on request."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core import Adaptivity, ClusterView, InputError, JobSpec, JobStatus, JobView, Placement
from dlsched.policies import build_scheduler, scheduler_tunables
from dlsched.policies.gavel.placement import GavelLeasePlacement
from dlsched.policies.stages import Demand, Plan
from testkit import small_cluster


def job(i: int, k: int, gpus: tuple[int, ...] = ()) -> JobView:
    spec = JobSpec(job_id=f"j{i}", submit_time_s=float(i), model="cifar10", num_gpus=k, batch_size=256,
                   adaptivity=Adaptivity.RIGID)
    return JobView(spec=spec, status=JobStatus.RUNNING if gpus else JobStatus.QUEUED, placement=Placement.of(gpus),
                   batch_size=256 if gpus else None, age_s=100.0, wait_s=0.0, attained_gpu_s=0.0,
                   attained_service_s=0.0, restarts=0, progress_fraction=0.0, start_time_s=0.0 if gpus else None,
                   estimated_duration_s=3600.0, profiled_types=("v100",), batch_limits=(128, 4096))


def place(assign: str, cluster, jobs: list[JobView]) -> dict[str, tuple[int, ...]]:
    """The GPUs each job gets when all are leased on v100, in the order given (Gavel's: biggest first)."""
    plan = Plan(demands=[Demand(job=j, num_gpus=j.spec.num_gpus, gpu_type="v100", batch_size=256) for j in jobs])
    view = ClusterView(time_s=360.0, round_s=360.0, cluster=cluster, jobs=jobs)
    decision = GavelLeasePlacement(assign=assign).place(view, plan)
    return {k: a.placement.gpus for k, a in decision.allocations.items()}


def test_in_order_a_bigger_new_gang_takes_the_gpus_a_smaller_job_held():
    # two 4-GPU nodes; j0 ran on GPU 0, j1 (4 GPUs) is new
    cluster = small_cluster((("v100", 2, 4),))
    jobs = [job(1, 4), job(0, 1, (0,))]
    # Gavel's code: the 4-GPU gang is placed first, from the first server, before 1-GPU jobs keep theirs
    assert place("in-order", cluster, jobs) == {"j1": (0, 1, 2, 3), "j0": (4,)}
    # packed (default): every job staying on its type keeps its free GPUs first
    assert place("packed", cluster, jobs) == {"j0": (0,), "j1": (4, 5, 6, 7)}


def test_in_order_a_new_gang_takes_the_next_free_gpus_even_across_servers():
    cluster = small_cluster((("v100", 2, 4),))
    jobs = [job(0, 3, (0, 1, 2)), job(1, 2)]
    got = place("in-order", cluster, jobs)
    assert got == {"j0": (0, 1, 2), "j1": (3, 4)}  # one GPU on each node: per-node counts (1, 1)
    assert place("packed", cluster, jobs)["j1"] == (4, 5)  # packed: both on the second node


def test_in_order_keeps_a_job_on_its_gpus_when_no_bigger_gang_took_one():
    cluster = small_cluster((("v100", 2, 4),))
    jobs = [job(0, 4, (4, 5, 6, 7)), job(1, 2, (2, 3)), job(2, 2)]
    assert place("in-order", cluster, jobs) == {"j0": (4, 5, 6, 7), "j1": (2, 3), "j2": (0, 1)}


def test_registry_offers_the_option_with_packed_as_default():
    assert scheduler_tunables("gavel")["placement.assign"] == "packed"
    s = build_scheduler("gavel", settings={"placement.assign": "in-order"})
    assert isinstance(s.placement, GavelLeasePlacement) and s.placement.assign == "in-order"
    assert s.placement.sticky
    with pytest.raises(InputError):
        build_scheduler("gavel", settings={"placement.assign": "random"})


@st.composite
def leases(draw):
    """A 3-node x 4-GPU type, jobs with sizes that fit together, some holding GPUs from the last round."""
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
    fitting, total = [], 0
    for k in sizes:
        if total + k <= 12:
            fitting.append(k)
            total += k
    perm = draw(st.permutations(list(range(12))))
    jobs, cursor = [], 0
    for i, k in enumerate(fitting):
        held = draw(st.booleans())
        gpus = tuple(sorted(perm[cursor:cursor + k])) if held else ()
        cursor += k if held else 0
        jobs.append(job(i, k, gpus))
    jobs.sort(key=lambda j: -j.spec.num_gpus)  # Gavel hands leases biggest first
    return jobs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(leases(), st.sampled_from(["in-order", "packed"]))
def test_every_lease_is_served_whole_on_distinct_gpus(jobs, assign):
    cluster = small_cluster((("v100", 3, 4),))
    got = place(assign, cluster, jobs)
    assert set(got) == {j.job_id for j in jobs}
    assert all(len(got[j.job_id]) == j.spec.num_gpus for j in jobs)
    used = [g for gpus in got.values() for g in gpus]
    assert len(used) == len(set(used))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(leases())
def test_in_order_a_job_loses_its_gpus_only_to_a_bigger_gang(jobs):
    cluster = small_cluster((("v100", 3, 4),))
    got = place("in-order", cluster, jobs)
    owner = {g: k for k, gpus in got.items() for g in gpus}
    size = {j.job_id: j.spec.num_gpus for j in jobs}
    for j in jobs:
        if j.placement and got[j.job_id] != j.placement.gpus:
            takers = {owner[g] for g in j.placement.gpus if g in owner and owner[g] != j.job_id}
            assert any(size[t] > size[j.job_id] for t in takers)
