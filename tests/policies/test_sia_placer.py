"""Sia's placer: partial-node gangs never split, whole-node gangs on whole nodes, sticky, few evictions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.core import Placement
from dlsched.policies.sia.placer import PlacementRequest, SiaPlacer, is_valid_shape
from testkit import small_cluster


def check_rules(cluster, requests, outcome):
    """Every placed gang has its size and type, no GPU is used twice, and the shape rules hold."""
    seen: set[int] = set()
    for r in requests:
        pl = outcome.placements.get(r.key)
        if pl is None:
            continue
        assert len(pl) == r.num_gpus
        assert {cluster.gpu_type_of[g] for g in pl.gpus} == {r.gpu_type}
        assert not seen & set(pl.gpus)
        seen |= set(pl.gpus)
        node_size = max(cluster.nodes[n].num_gpus for n in cluster.nodes_of_type[r.gpu_type])
        by_node = pl.by_node(cluster)
        if r.num_gpus < node_size:
            assert len(by_node) == 1, f"partial-node gang {r.key} split over nodes {sorted(by_node)}"
        elif r.num_gpus % node_size == 0:
            assert len(by_node) == r.num_gpus // node_size
            assert all(len(g) == cluster.nodes[n].num_gpus for n, g in by_node.items()), "whole nodes only"
        assert is_valid_shape(cluster, pl)


def test_partial_gangs_stay_on_one_node_and_whole_gangs_take_whole_nodes():
    cluster = small_cluster((("a100", 4, 8),))
    reqs = [PlacementRequest("big", "a100", 16), PlacementRequest("p4", "a100", 4),
            PlacementRequest("p2", "a100", 2), PlacementRequest("p1", "a100", 1), PlacementRequest("p1b", "a100", 1),
            PlacementRequest("w8", "a100", 8)]
    out = SiaPlacer().place(cluster, reqs)
    assert not out.unplaced
    check_rules(cluster, reqs, out)


def test_unchanged_allocations_keep_their_gpus():
    cluster = small_cluster((("t4", 2, 4), ("rtx", 1, 8)))
    cur_a = Placement.of([1, 2])
    cur_b = Placement.of(range(8, 16))
    reqs = [PlacementRequest("a", "t4", 2, current=cur_a), PlacementRequest("b", "rtx", 8, current=cur_b),
            PlacementRequest("c", "t4", 4)]
    out = SiaPlacer().place(cluster, reqs)
    assert out.placements["a"] == cur_a
    assert out.placements["b"] == cur_b
    assert out.placements["c"].gpus == (4, 5, 6, 7)
    # a job whose count changed is placed afresh (it restarts anyway)
    out2 = SiaPlacer().place(cluster, [PlacementRequest("a", "t4", 4, current=cur_a)])
    assert len(out2.placements["a"]) == 4


def test_fragmentation_evicts_the_fewest_jobs():
    cluster = small_cluster((("v100", 2, 4),))
    # node 0: one 2-GPU job; node 1: two 1-GPU jobs -> a new 4-GPU gang needs one node emptied
    reqs = [PlacementRequest("two", "v100", 2, current=Placement.of([0, 1])),
            PlacementRequest("one_a", "v100", 1, current=Placement.of([4])),
            PlacementRequest("one_b", "v100", 1, current=Placement.of([6])),
            PlacementRequest("new", "v100", 4)]
    out = SiaPlacer().place(cluster, reqs[:3] + [PlacementRequest("new", "v100", 2)])
    assert not out.evicted  # a 2-GPU gang fits next to the kept ones without moving anybody
    out = SiaPlacer().place(cluster, [r for r in reqs if r.key != "one_b"])
    assert out.evicted == ["two"] or out.evicted == ["one_a"]
    assert len(out.evicted) == 1
    assert not out.unplaced
    check_rules(cluster, reqs, out)


def test_no_running_gang_is_evicted_unless_it_finds_a_spot_again():
    # three 8-GPU nodes: A (6) on node 0, B (12) on node 1 and half of node 2; a new 6-GPU gang C fits
    # nowhere. Evicting B would place C but leave B (a whole node plus 4) nowhere: C waits, A and B stay.
    # (Evicting anyway swapped the two gangs back and forth every round, a restart each time.)
    cluster = small_cluster((("rtx", 3, 8),))
    a = PlacementRequest("A", "rtx", 6, current=Placement.of(range(0, 6)))
    b = PlacementRequest("B", "rtx", 12, current=Placement.of(range(8, 20)))
    c = PlacementRequest("C", "rtx", 6)
    out = SiaPlacer().place(cluster, [a, b, c])
    assert out.unplaced == ["C"] and not out.evicted
    assert out.placements["A"] == a.current and out.placements["B"] == b.current
    # with room to rearrange (a 4-GPU A fits in B's half-used node), one gang moves and C is placed
    small_a = PlacementRequest("A", "rtx", 4, current=Placement.of(range(0, 4)))
    out = SiaPlacer().place(cluster, [small_a, b, c])
    assert len(out.evicted) == 1 and not out.unplaced
    check_rules(cluster, [small_a, b, c], out)


def test_pinned_gangs_never_move():
    cluster = small_cluster((("v100", 2, 4),))
    reqs = [PlacementRequest("pin", "v100", 1, current=Placement.of([1]), pinned=True),
            PlacementRequest("pin2", "v100", 1, current=Placement.of([5]), pinned=True),
            PlacementRequest("new", "v100", 4)]
    out = SiaPlacer().place(cluster, reqs)
    assert out.placements["pin"].gpus == (1,)
    assert out.placements["pin2"].gpus == (5,)
    assert out.unplaced == ["new"]  # no node can be emptied
    assert SiaPlacer().fit_free(cluster, "v100", 2, np.isin(np.arange(8), [1, 5])) is not None


def test_blocked_gpus_are_never_used():
    cluster = small_cluster((("v100", 2, 4),))
    blocked = np.zeros(8, dtype=bool)
    blocked[4:] = True
    out = SiaPlacer().place(cluster, [PlacementRequest("a", "v100", 4), PlacementRequest("b", "v100", 1)], blocked)
    assert out.placements["a"].gpus == (0, 1, 2, 3)
    assert out.unplaced == ["b"]


POW2 = {4: [1, 2, 4, 8, 12, 16], 8: [1, 2, 4, 8, 16, 24]}


@settings(max_examples=60, deadline=None)
@given(data=st.data(), per_node=st.sampled_from([4, 8]), nodes=st.integers(1, 4), rounds=st.integers(1, 4))
def test_random_rounds_respect_the_rules(data, per_node, nodes, rounds):
    """Round after round of Sia-shaped allocations within capacity: every gang placed, shapes valid."""
    cluster = small_cluster((("v100", nodes, per_node),))
    cap = nodes * per_node
    sizes = [k for k in POW2[per_node] if k <= cap]
    current: dict[str, Placement] = {}
    placer = SiaPlacer()
    for _ in range(rounds):
        jobs = data.draw(st.lists(st.tuples(st.integers(0, 7), st.sampled_from(sizes)), max_size=8,
                                  unique_by=lambda t: t[0]))
        reqs, used = [], 0
        for jid, k in jobs:
            if used + k > cap:
                continue
            used += k
            reqs.append(PlacementRequest(f"j{jid}", "v100", k, current=current.get(f"j{jid}", Placement.empty())))
        out = placer.place(cluster, reqs)
        assert not out.unplaced, "Sia-shaped allocations within capacity always have a placement"
        check_rules(cluster, reqs, out)
        for r in reqs:
            if r.current and len(r.current) == r.num_gpus and r.key not in out.evicted:
                assert out.placements[r.key] == r.current
        current = dict(out.placements)
