"""The world's model of two workers sharing a GPU: measured pairs, the MPS curve, stragglers and memory."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.catalog.colocation import ColocationTable
from dlsched.world.sharing import (
    SHARE_CHANGE_S,
    JobSharing,
    MpsCurve,
    SharingModel,
    WorkerShare,
    balanced_split,
    job_speed,
)

TABLE = ColocationTable.load()
MODEL = SharingModel(TABLE)
PAIRS = json.loads(resources.files("dlsched.catalog").joinpath("params/colocation.json").read_text())["pairs"]
PCT = st.integers(min_value=1, max_value=10).map(lambda k: 10 * k)


def test_measured_pairs_come_back_in_either_order():
    got = TABLE.pair("ResNet-50", "vgg19")
    assert (got.speed_a, got.speed_b, got.how) == (0.45, 0.81, "measured")
    back = TABLE.pair("vgg19", "resnet50")
    assert (back.speed_a, back.speed_b) == (0.81, 0.45)


def test_missing_pairs_follow_the_documented_rule():
    proxy = TABLE.pair("vgg16", "resnet50")  # vgg16 stands in as vgg19, measured with resnet50
    assert proxy.how == "proxy" and (proxy.speed_a, proxy.speed_b) == (0.81, 0.45)
    unknown = TABLE.pair("no-such-model", "resnet50")
    assert unknown.how == "default" and 0 < unknown.speed_a <= 1 and 0 < unknown.speed_b <= 1


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(PAIRS))
def test_two_unrestricted_workers_reproduce_the_measured_pair(pair):
    a = MODEL.worker_speed(pair["a"], WorkerShare(100, pair["b"], 100))
    b = MODEL.worker_speed(pair["b"], WorkerShare(100, pair["a"], 100))
    assert a == pytest.approx(pair["speed_a"]) and b == pytest.approx(pair["speed_b"])


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.1, 20.0))
def test_the_share_curve_is_increasing_and_concave(x, y, lam, k):
    curve = MpsCurve(k)
    lo, hi = min(x, y), max(x, y)
    assert curve.speed(lo) <= curve.speed(hi) + 1e-12
    mid = lam * x + (1 - lam) * y
    assert curve.speed(mid) >= lam * curve.speed(x) + (1 - lam) * curve.speed(y) - 1e-12


def test_default_curve_keeps_ninety_percent_at_half_the_threads():
    curve = MpsCurve()
    assert curve.speed(1.0) == pytest.approx(1.0)
    assert curve.speed(0.5) == pytest.approx(0.9)
    assert curve.speed(0.0) == 0.0


def test_fitting_recovers_a_curve_from_its_points():
    truth = MpsCurve(7.0)
    points = [(p / 10, truth.speed(p / 10)) for p in range(1, 11)]
    assert MpsCurve.fit(points).k == pytest.approx(7.0, rel=1e-3)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PAIRS), PCT, PCT, PCT)
def test_squeezing_a_partner_never_slows_a_worker(pair, own, p1, p2):
    lo, hi = min(p1, p2), max(p1, p2)
    fast = MODEL.worker_speed(pair["a"], WorkerShare(own, pair["b"], lo))
    slow = MODEL.worker_speed(pair["a"], WorkerShare(own, pair["b"], hi))
    assert fast >= slow - 1e-12


def test_a_data_parallel_job_moves_at_its_slowest_worker_unless_rebalanced():
    speeds = [1.0, 0.5, 1.0, 1.0]
    assert job_speed(speeds) == pytest.approx(0.5)
    split = balanced_split(speeds)
    assert sum(split) == pytest.approx(1.0)  # the global batch is kept
    assert job_speed(speeds, split) == pytest.approx(sum(speeds) / len(speeds))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.05, 1.0), min_size=1, max_size=8))
def test_rebalancing_is_never_slower_and_keeps_the_batch(speeds):
    split = balanced_split(speeds)
    assert sum(split) == pytest.approx(1.0)
    assert job_speed(speeds, split) >= job_speed(speeds) - 1e-12
    assert job_speed(speeds, split) <= max(speeds) + 1e-12


def test_a_packed_job_with_an_unshared_worker_straggles_on_the_shared_one():
    sharing = JobSharing((WorkerShare(100, "resnet50", 100), WorkerShare(100)))
    assert MODEL.job_factor("vgg19", sharing) == pytest.approx(0.81)  # min(0.81, 1)


def test_memory_decides_which_pairs_fit_an_a40():
    assert MODEL.fits(["bert", "resnet50"], 48.0)
    assert not MODEL.fits(["llama", "bert"], 48.0)  # a LLaMA worker leaves room only for a small partner
    assert MODEL.fits(["llama", "resnet18"], 48.0)


def test_share_change_cost_is_the_papers():
    assert SHARE_CHANGE_S == 3.6


def test_limits_that_do_not_overlap_remove_the_sm_part_of_the_interference():
    r = TABLE.pair("resnet50", "vgg19").speed_a
    curve = MpsCurve()
    isolated = SharingModel(TABLE, curve, isolation=1.0)
    assert isolated.worker_speed("resnet50", WorkerShare(60, "vgg19", 40)) == pytest.approx(curve.speed(0.6))
    shared = SharingModel(TABLE, curve, isolation=0.0)
    assert shared.worker_speed("resnet50", WorkerShare(60, "vgg19", 40)) == \
        pytest.approx(curve.speed(0.6) * (1 - (1 - r) * curve.speed(0.4)))
    # whatever the isolation, two unrestricted workers stay at the measured pair speed
    assert isolated.worker_speed("resnet50", WorkerShare(100, "vgg19", 100)) == pytest.approx(r)
