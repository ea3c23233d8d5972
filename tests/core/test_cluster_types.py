"""Which GPU of a placement a profile runs on: the first of each type, whatever the order of the GPUs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from testkit import small_cluster

CLUSTER = small_cluster((("t4", 2, 4), ("a100", 1, 8), ("rtx", 1, 4)))


def test_the_first_gpu_of_each_type_in_the_placements_order():
    # GPUs 0-7 are t4, 8-15 a100, 16-19 rtx
    assert CLUSTER.first_gpu_of_each_type([9, 3, 17, 8, 0, 18]) == {"a100": 9, "t4": 3, "rtx": 17}
    assert list(CLUSTER.first_gpu_of_each_type([16, 5])) == ["rtx", "t4"]
    assert CLUSTER.first_gpu_of_each_type([]) == {}


@given(st.lists(st.integers(0, CLUSTER.num_gpus - 1), max_size=30))
def test_one_gpu_per_type_present_each_the_first_of_its_type(gpus: list[int]):
    firsts = CLUSTER.first_gpu_of_each_type(gpus)
    assert set(firsts) == {CLUSTER.gpu_type_of[g] for g in gpus}
    for gtype, g in firsts.items():
        assert CLUSTER.gpu_type_of[g] == gtype
        assert g == next(x for x in gpus if CLUSTER.gpu_type_of[x] == gtype)
