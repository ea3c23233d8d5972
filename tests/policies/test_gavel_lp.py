"""Gavel's LPs as pure functions, on small matrices whose optima are worked out by hand in the comments.

Conventions of every example: ``T`` in steps per second (rows jobs, columns GPU types), ``scale`` the jobs'
GPU counts, ``capacity`` the GPUs per type; the base constraints are ``sum_t X <= 1`` per job and
``sum_j scale_j X <= capacity_t`` per type.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from dlsched.core import InputError
from dlsched.policies.gavel.lp import (
    FTF_ISOLATED,
    LP_METHODS,
    MAXMIN_REFERENCES,
    OBJECTIVES,
    equal_share_throughputs,
    max_rho,
    proportional_throughputs,
    reference_throughputs,
    solve_allocation,
)

ONE_EACH = np.array([1.0, 1.0])  # one GPU of a fast type, one of a slow type


def test_solve_allocation_is_importable_from_the_package_and_is_the_pure_lp():
    from dlsched.policies.gavel import solve_allocation as exported

    assert exported is solve_allocation
    x = exported("max-sum-throughput", np.array([[2.0, 1.0]]), np.ones(1), ONE_EACH)
    assert x == pytest.approx(np.array([[1.0, 0.0]]), abs=1e-6)  # one job: all its time on its fast type


# -- max-sum-throughput -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method", LP_METHODS)
def test_max_sum_throughput_uses_raw_throughputs(method):
    # A = (10, 8), B = (2, 0.5), one GPU per type: a matching (the polytope is integral).
    # Raw: A fast + B slow = 10.5 > B fast + A slow = 10, so A takes the fast type.
    # Normalised by row sums: A = (5/9, 4/9), B = (0.8, 0.2): A fast + B slow = 0.756 < 1.244, so B does.
    tput = np.array([[10.0, 8.0], [2.0, 0.5]])
    raw = solve_allocation("max-sum-throughput", tput, np.ones(2), ONE_EACH, method=method)
    assert raw == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]), abs=1e-5)
    assert float((tput * raw).sum()) == pytest.approx(10.5, abs=1e-4)
    norm = solve_allocation("max-sum-throughput", tput, np.ones(2), ONE_EACH, normalize=True, method=method)
    assert norm == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-5)


@pytest.mark.parametrize("method", LP_METHODS)
def test_max_sum_throughput_three_jobs_two_gpus(method):
    # A = (6, 1), B = (5, 4), C = (2, 2), one GPU per type, so two jobs run (a matching).
    # Raw: A fast + B slow = 10 beats every other pair (A+C 8, B+C 7, B+A 6, C+B 6, C+A 3); C waits.
    # Normalised: A = (6/7, 1/7), B = (5/9, 4/9), C = (1/2, 1/2): A fast + C slow = 1.357 beats
    # A fast + B slow = 1.302, so C runs instead of B.
    tput = np.array([[6.0, 1.0], [5.0, 4.0], [2.0, 2.0]])
    raw = solve_allocation("max-sum-throughput", tput, np.ones(3), ONE_EACH, method=method)
    assert raw == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), abs=1e-5)
    norm = solve_allocation("max-sum-throughput", tput, np.ones(3), ONE_EACH, normalize=True, method=method)
    assert norm == pytest.approx(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]), abs=1e-5)


@pytest.mark.parametrize("method", LP_METHODS)
def test_max_sum_throughput_respects_gang_size(method):
    # A needs 2 GPUs and fits only the 2-GPU fast type (3 steps/s); B (1 GPU) runs anywhere: fast 2, slow 1.
    # A on fast all the time + B on slow all the time = 4 > B on fast + A for the half left (2 + 1.5).
    tput = np.array([[3.0, 0.0], [2.0, 1.0]])
    x = solve_allocation("max-sum-throughput", tput, np.array([2, 1]), np.array([2, 1]), method=method)
    assert x == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]), abs=1e-6)


def test_interior_point_shares_time_between_equivalent_jobs():
    x = solve_allocation("max-sum-throughput", np.ones((4, 1)), np.ones(4), np.array([2]), method="ipm")
    assert x.ravel() == pytest.approx([0.5] * 4, abs=1e-4)
    v = solve_allocation("max-sum-throughput", np.ones((4, 1)), np.ones(4), np.array([2]), method="simplex")
    assert sorted(v.ravel().round(6)) == [0.0, 0.0, 1.0, 1.0]


# -- reference allocations --------------------------------------------------------------------------------
def test_proportional_throughput_weights_types_by_their_gpus():
    # capacity (1, 3): every job spends 1/4 of its time on type 0 and 3/4 on type 1.
    # A = (4, 0): 4/4 = 1; B = (2, 2): 2/4 + 6/4 = 2.
    assert proportional_throughputs(np.array([[4.0, 0.0], [2.0, 2.0]]), np.array([1, 3])) \
        == pytest.approx([1.0, 2.0])


def test_equal_share_splits_each_type_over_jobs_divides_by_gang_and_caps_at_one():
    # Two jobs, capacity (2, 6): x = capacity / (2 jobs * scale).
    # A (1 GPU): (1, 3), row sum 4 > 1, scaled to (1/4, 3/4): 2 * 1/4 + 1 * 3/4 = 1.25.
    # B (4 GPUs): (1/4, 3/4), row sum 1, kept: 0 * 1/4 + 3 * 3/4 = 2.25.
    tput = np.array([[2.0, 1.0], [0.0, 3.0]])
    got = equal_share_throughputs(tput, np.array([1, 4]), np.array([2, 6]))
    assert got == pytest.approx([2 * 0.25 + 1 * 0.75, 3 * 0.75])
    # Four 2-GPU jobs on capacity (2, 2): x = 2 / (4 * 2) = 1/4 per type, row sum 1/2, not scaled up.
    four = equal_share_throughputs(np.full((4, 2), 2.0), np.full(4, 2), np.array([2, 2]))
    assert four == pytest.approx([1.0] * 4)
    # The proportional reference ignores gangs and job counts: each job spends 1/2 on each type.
    assert proportional_throughputs(np.full((4, 2), 2.0), np.array([2, 2])) == pytest.approx([2.0] * 4)


#: Three jobs, one GPU per type: A runs only on the fast type, B only on the slow one, C on both (2 and 1).
#: Their references: proportional (1/2 of each type) A = B = 1/2, C = 3/2; equal share (1/3 of each type)
#: A = B = 1/3, C = 1; max-min over unit throughputs (unique: A and B 2/3 of their type, C 1/3 of each,
#: all at time share 2/3) A = B = 2/3, C = 2 * 1/3 + 1 * 1/3 = 1.
THREE = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])


def test_reference_throughputs_of_the_three_job_example():
    s = np.ones(3)
    assert reference_throughputs("proportional", THREE, s, ONE_EACH) == pytest.approx([0.5, 0.5, 1.5])
    assert reference_throughputs("equal-share", THREE, s, ONE_EACH) == pytest.approx([1 / 3, 1 / 3, 1.0])
    assert reference_throughputs("max-min-lp", THREE, s, ONE_EACH) == pytest.approx([2 / 3, 2 / 3, 1.0], abs=1e-5)
    with pytest.raises(InputError):
        reference_throughputs("half", THREE, s, ONE_EACH)


# -- max-min ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", LP_METHODS)
def test_max_min_divides_by_the_proportional_throughput(method):
    # Shares a (A on fast), b (B on slow), cf, cs (C); fast a + cf <= 1, slow b + cs <= 1, cf + cs <= 1.
    # Proportional references (1/2, 1/2, 3/2): maximise z <= 2a, 2b, (2cf + cs) / 1.5.
    # With a = b = z/2, C gets at most cf = 1 - z/2, cs = z/2: (2 - z/2) / 1.5 >= z gives z* = 1, and at
    # z = 1 every inequality is tight: a = b = cf = cs = 1/2 (unique).
    x = solve_allocation("max-min", THREE, np.ones(3), ONE_EACH, method=method)
    assert x == pytest.approx(np.array([[0.5, 0.0], [0.0, 0.5], [0.5, 0.5]]), abs=1e-4)


@pytest.mark.parametrize("method", LP_METHODS)
def test_max_min_with_the_max_min_lp_reference(method):
    # References (2/3, 2/3, 1): maximise z <= 1.5a, 1.5b, 2cf + cs. With a = b = 2z/3, C gets at most
    # cf = cs = 1 - 2z/3 (for z > 3/4): 3 - 2z >= z gives z* = 1, unique: a = b = 2/3, cf = cs = 1/3.
    x = solve_allocation("max-min", THREE, np.ones(3), ONE_EACH, maxmin_reference="max-min-lp", method=method)
    assert x == pytest.approx(np.array([[2 / 3, 0.0], [0.0, 2 / 3], [1 / 3, 1 / 3]]), abs=1e-4)


def test_max_min_weighs_a_job_by_its_gpus():
    # One type of 2 GPUs, A on 2 GPUs and B on 1, both 1 step/s (references 1): maximise z <= 2a, z <= b
    # with 2a + b <= 2, b <= 1: z* = 1 at a = 1/2, b = 1 (each gets one GPU's worth of time).
    x = solve_allocation("max-min", np.ones((2, 1)), np.array([2, 1]), np.array([2]))
    assert x.ravel() == pytest.approx([0.5, 1.0], abs=1e-4)


def test_max_min_and_finish_time_fairness_split_a_contended_type_evenly():
    tput = np.ones((2, 1))
    mm = solve_allocation("max-min", tput, np.ones(2), np.array([1]))
    assert mm.ravel() == pytest.approx([0.5, 0.5], abs=1e-4)
    ftf = solve_allocation("finish-time-fairness", tput, np.ones(2), np.array([1]), ages_s=np.zeros(2),
                           remaining=np.ones(2))
    assert ftf.ravel() == pytest.approx([0.5, 0.5], abs=1e-3)


# -- finish-time fairness ---------------------------------------------------------------------------------
def test_finish_time_fairness_with_the_equal_share_isolated_throughput():
    # Ages 0, no isolated time yet, one step left each: rho_j = iso_j / rate_j, so minimising the largest rho
    # is max-min with the isolated throughputs as references. Equal share (1/3, 1/3, 1): z <= 3a, 3b,
    # 2cf + cs; with a = b = z/3, C gets at most cf = 1 - z/3, cs = z/3: 2 - z/3 >= z gives z* = 3/2, so
    # rho* = 2/3 at a = b = cf = cs = 1/2 (unique).
    x = solve_allocation("finish-time-fairness", THREE, np.ones(3), ONE_EACH)
    assert x == pytest.approx(np.array([[0.5, 0.0], [0.0, 0.5], [0.5, 0.5]]), abs=1e-3)
    iso = reference_throughputs("equal-share", THREE, np.ones(3), ONE_EACH)
    assert max_rho(x, THREE, np.zeros(3), np.ones(3), np.zeros(3), iso) == pytest.approx(2 / 3, rel=1e-3)


def test_finish_time_fairness_with_the_max_min_lp_isolated_throughput():
    # References (2/3, 2/3, 1): the max-min-lp example above, z* = 1, so rho* = 1 at a = b = 2/3, cf = cs = 1/3.
    x = solve_allocation("finish-time-fairness", THREE, np.ones(3), ONE_EACH, ftf_isolated="max-min-lp")
    assert x == pytest.approx(np.array([[2 / 3, 0.0], [0.0, 2 / 3], [1 / 3, 1 / 3]]), abs=1e-3)


def test_finish_time_fairness_denominator_isolated_time_against_wall_clock():
    # One GPU, two 1-GPU jobs at 1 step/s with 1 step left; equal share 1/2 each, so W / iso = 2.
    # A arrived 2 s ago, B just now: numerators 2 + 1/a and 1/b, with a + b = 1.
    # Wall clock (denominators age + 2: 4 and 2): (2 + 1/a) / 4 = 1 / (2b) gives 2a^2 + a - 1 = 0, a = 1/2.
    # Isolated time (A did no work: denominators 0 + 2 for both): (2 + 1/a) / 2 = 1 / (2b) gives
    # 2a^2 = 1, a = 1/sqrt(2): the job that waited without progress is owed more.
    tput, scale, cap = np.ones((2, 1)), np.ones(2), np.array([1.0])
    ages, rem = np.array([2.0, 0.0]), np.ones(2)
    wall = solve_allocation("finish-time-fairness", tput, scale, cap, ages_s=ages, remaining=rem, isolated_time_s=ages)
    assert wall.ravel() == pytest.approx([0.5, 0.5], abs=1e-3)
    gavel = solve_allocation("finish-time-fairness", tput, scale, cap, ages_s=ages, remaining=rem)
    assert gavel.ravel() == pytest.approx([2 ** -0.5, 1 - 2 ** -0.5], abs=1e-3)
    iso = np.array([0.5, 0.5])
    assert max_rho(gavel, tput, ages, rem, np.zeros(2), iso) == pytest.approx(1 + 2 ** -0.5, rel=1e-3)


def test_finish_time_fairness_places_each_job_where_it_is_not_worse_off():
    # A runs equally fast on both types, B only on type 0: A must take type 1 and leave type 0 to B
    tput = np.array([[1.0, 1.0], [1.0, 0.0]])
    x = solve_allocation("finish-time-fairness", tput, np.ones(2), ONE_EACH, ages_s=np.zeros(2),
                         remaining=np.ones(2))
    assert x == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-3)


def test_normalising_does_not_change_the_fairness_optima():
    # Both compare a job's throughput with a reference built from its own throughputs, so a per-job scale
    # cancels: the optimal value is the same (the allocation may differ inside the optimal face).
    rng = np.random.default_rng(3)
    tput = rng.random((5, 2)) * np.array([[1.0], [10.0], [100.0], [0.1], [3.0]]) + 0.01
    scale, cap = np.ones(5), np.array([2.0, 2.0])
    ages, rem, spent = rng.random(5) * 600, rng.random(5) * 100 + 1, rng.random(5) * 60
    kw = dict(ages_s=ages, remaining=rem, isolated_time_s=spent)
    iso = reference_throughputs("equal-share", tput, scale, cap)
    rho = [max_rho(solve_allocation("finish-time-fairness", tput, scale, cap, normalize=n, **kw), tput, ages, rem,
                   spent, iso) for n in (False, True)]
    assert rho[1] == pytest.approx(rho[0], rel=1e-3)
    ref = proportional_throughputs(tput, cap)
    z = [float(np.min((tput * solve_allocation("max-min", tput, scale, cap, normalize=n)).sum(axis=1) / ref))
         for n in (False, True)]
    assert z[1] == pytest.approx(z[0], rel=1e-4)


# -- against an independent dense formulation (scipy's HiGHS through linprog) -----------------------------
def _dense_base(tput, scale, capacity):
    j, k = tput.shape
    rows = [np.kron(np.eye(j)[i], np.ones(k)) for i in range(j)]
    rows += [np.kron(scale, np.eye(k)[t]) for t in range(k)]
    return np.array(rows), np.concatenate([np.ones(j), capacity]), [(0, 1 if v > 0 else 0) for v in tput.ravel()]


def _dense_max_sum(tput, scale, capacity):
    A, b, bounds = _dense_base(tput, scale, capacity)
    return -linprog(-tput.ravel(), A_ub=A, b_ub=b, bounds=bounds).fun


def _dense_max_min(tput, scale, capacity):
    # variables x (J*K) then z; z - s_j T_j . x_j / P_j <= 0 with P the proportional throughputs
    j, k = tput.shape
    A, b, bounds = _dense_base(tput, scale, capacity)
    ref = tput @ (capacity / capacity.sum())
    fair = np.array([np.concatenate([-np.kron(np.eye(j)[i], tput[i]) * scale[i] / ref[i], [1.0]]) for i in range(j)])
    A = np.vstack([np.hstack([A, np.zeros((len(A), 1))]), fair])
    c = np.zeros(j * k + 1)
    c[-1] = -1.0
    return -linprog(c, A_ub=A, b_ub=np.concatenate([b, np.zeros(j)]), bounds=[*bounds, (None, None)]).fun


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 8))
def test_max_sum_and_max_min_reach_the_dense_optimum(seed, jobs):
    rng = np.random.default_rng(seed)
    tput = rng.random((jobs, 2)) * rng.choice([1.0, 10.0, 100.0], size=(jobs, 1)) + 0.01
    scale = rng.choice([1, 2, 4], size=jobs).astype(float)
    capacity = np.array([4.0, 8.0])
    x = solve_allocation("max-sum-throughput", tput, scale, capacity)
    assert float((tput * x).sum()) == pytest.approx(_dense_max_sum(tput, scale, capacity), rel=1e-3)
    x = solve_allocation("max-min", tput, scale, capacity)
    ref = proportional_throughputs(tput, capacity)
    z = float(np.min(scale * (tput * x).sum(axis=1) / ref))
    assert z == pytest.approx(_dense_max_min(tput, scale, capacity), rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 8), isolated=st.sampled_from(FTF_ISOLATED))
def test_finish_time_fairness_is_no_worse_than_the_other_policies_on_its_own_objective(seed, jobs, isolated):
    rng = np.random.default_rng(seed)
    tput = rng.random((jobs, 2)) + 0.05
    scale, capacity = np.ones(jobs), np.array([2.0, 2.0])
    ages, remaining, spent = rng.random(jobs) * 3600, rng.random(jobs) * 3600 + 60, rng.random(jobs) * 600
    ftf = solve_allocation("finish-time-fairness", tput, scale, capacity, ages_s=ages, remaining=remaining,
                           isolated_time_s=spent, ftf_isolated=isolated)
    iso = reference_throughputs(isolated, tput, scale, capacity)
    best = max_rho(ftf, tput, ages, remaining, spent, iso)
    for other in ("max-sum-throughput", "max-min"):
        x = solve_allocation(other, tput, scale, capacity)
        assert best <= max_rho(x, tput, ages, remaining, spent, iso) * (1 + 5e-3)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 12), types=st.integers(1, 3),
       objective=st.sampled_from(OBJECTIVES), method=st.sampled_from(LP_METHODS), normalize=st.booleans(),
       reference=st.sampled_from(MAXMIN_REFERENCES), isolated=st.sampled_from(FTF_ISOLATED))
def test_every_policy_respects_gavels_base_constraints(seed, jobs, types, objective, method, normalize, reference,
                                                       isolated):
    rng = np.random.default_rng(seed)
    tput = rng.random((jobs, types)) * (rng.random((jobs, types)) < 0.85)
    scale = rng.choice([1, 2, 4, 8], size=jobs)
    capacity = rng.integers(1, 17, size=types)
    tput[scale[:, None] > capacity[None, :]] = 0.0  # a gang larger than a type cannot run there
    x = solve_allocation(objective, tput, scale, capacity, ages_s=rng.random(jobs) * 7200,
                         remaining=rng.random(jobs) * 7200 + 1, isolated_time_s=rng.random(jobs) * 600,
                         normalize=normalize, maxmin_reference=reference, ftf_isolated=isolated, method=method)
    assert x.shape == tput.shape
    assert (x >= 0).all() and (x <= 1 + 1e-9).all()
    assert (x.sum(axis=1) <= 1 + 1e-6).all()
    assert ((x * scale[:, None]).sum(axis=0) <= capacity + 1e-6).all()
    assert (x[tput <= 0] == 0).all()


def test_unknown_objective_and_references_are_input_errors():
    for kw, field in (({"objective": "min-jct"}, "objective"), ({"maxmin_reference": "equal"}, "maxmin_reference"),
                      ({"ftf_isolated": "proportional"}, "ftf_isolated")):
        objective = kw.pop("objective", "max-min" if "maxmin_reference" in kw else "finish-time-fairness")
        with pytest.raises(InputError) as e:
            solve_allocation(objective, np.ones((1, 1)), np.ones(1), np.ones(1), **kw)
        assert e.value.field == field
