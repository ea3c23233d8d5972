"""Gimbal's packing rules (section 5.1) on hand-made placements, figure 7's case among them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import Placement
from dlsched.core.packing import PackingState, can_join, packing_problem, packing_sets
from testkit import small_cluster

#: Figure 7's shape: nodes of 2 GPUs (node i holds GPUs 2i, 2i+1), as on Gimbal's A40 testbed.
CLUSTER = small_cluster((("a40", 8, 2),))


def P(*gpus: int) -> Placement:
    return Placement.of(gpus)


def test_a_star_around_the_largest_job_is_valid():
    placements = {"big": P(0, 1, 2, 3), "left": P(0, 1), "right": P(2, 3)}
    assert packing_problem(placements, CLUSTER) is None
    (ps,) = packing_sets(placements)
    assert ps.center == "big" and set(ps.members) == {"big", "left", "right"}


def test_figure_7_a_new_job_may_not_bridge_two_packing_sets():
    # job 3 and job 10 are each already packed with another job (nodes 1 and 6 in the figure); job 11 is a
    # 4-GPU job. Placed across GPUs of both sets it would chain them: refused. On free nodes 2..5 it is fine.
    placements = {"job3": P(0, 1), "job3b": P(0, 1), "job10": P(12, 13), "job10b": P(12, 13)}
    assert packing_problem(placements, CLUSTER) is None
    assert not can_join(placements, CLUSTER, "job11", P(0, 1, 12, 13))
    assert can_join(placements, CLUSTER, "job11", P(4, 5, 6, 7))
    assert can_join(placements, CLUSTER, "job11", P(2, 3, 8, 9))


def test_at_most_two_workers_per_gpu():
    problem = packing_problem({"a": P(0, 1, 2, 3), "b": P(0, 1), "c": P(0)}, CLUSTER)
    assert problem is not None and "GPU 0" in problem


def test_smaller_jobs_share_only_with_the_largest_one():
    # b (2 GPUs) shares with a (4) and with c (1): c-b is an edge that avoids the centre
    problem = packing_problem({"a": P(0, 1, 2, 3), "b": P(2, 3, 4, 5), "c": P(4)}, CLUSTER)
    assert problem is not None and "star" in problem


def test_equal_size_jobs_pack_only_fully_overlapped():
    assert packing_problem({"a": P(0, 1), "b": P(0, 1)}, CLUSTER) is None
    problem = packing_problem({"a": P(0, 1, 2, 3), "b": P(2, 3, 4, 5)}, CLUSTER)
    assert problem is not None and "full overlap" in problem


def test_equal_only_mode_refuses_unequal_packing():
    placements = {"a": P(0, 1, 2, 3), "b": P(0, 1)}
    assert packing_problem(placements, CLUSTER) is None
    assert "equal-size" in (packing_problem(placements, CLUSTER, equal_only=True) or "")


def test_a_packed_job_sits_on_its_fewest_nodes():
    problem = packing_problem({"a": P(1, 2), "b": P(1)}, CLUSTER)  # 2 GPUs over 2 nodes where 1 would do
    assert problem is not None and "nodes" in problem
    assert packing_problem({"a": P(1, 2)}, CLUSTER) is None  # unpacked jobs are not the rules' business


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from([1, 2, 4])), min_size=1, max_size=6))
def test_valid_packings_are_stars_with_at_most_two_workers_per_gpu(jobs):
    """Whatever placements pass the rules hold at most two jobs per GPU, and every pair of jobs sharing a GPU
    includes its packing set's centre, which is at least as large as both."""
    placements = {}
    for i, (node, k) in enumerate(jobs):
        first = 2 * (node - node % (k // 2)) if k > 1 else 2 * node + (i % 2)
        placements[f"j{i}"] = P(*range(first, first + k)) if k > 1 else P(first)
    if packing_problem(placements, CLUSTER) is not None:
        return
    count: dict[int, int] = {}
    for p in placements.values():
        for g in p.gpus:
            count[g] = count.get(g, 0) + 1
    assert max(count.values()) <= 2
    for ps in packing_sets(placements):
        for a in ps.members:
            for b in ps.members:
                if a < b and set(placements[a].gpus) & set(placements[b].gpus):
                    assert ps.center in (a, b)
                    assert len(placements[ps.center]) >= max(len(placements[a]), len(placements[b]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.sampled_from([1, 2, 4])), min_size=1, max_size=8), st.booleans())
def test_adding_jobs_one_by_one_agrees_with_checking_them_all(jobs, equal_only):
    """The incremental check (only the packing sets a job touches) accepts exactly what the full check does."""
    state = PackingState(CLUSTER, equal_only=equal_only)
    for i, (node, k) in enumerate(jobs):
        first = 2 * (node - node % (k // 2)) if k > 1 else 2 * node + (i % 2)
        p = P(*range(first, first + k)) if k > 1 else P(first)
        trial = {**state.placements, f"j{i}": p}
        full = packing_problem(trial, CLUSTER, equal_only=equal_only) is None
        assert (state.problem_if_added(f"j{i}", p) is None) == full
        if full:
            state.add(f"j{i}", p)
