"""The integer optimum proved next to the relaxation: the same optimum as brute force and as HiGHS's MILP."""

from __future__ import annotations

import numpy as np
import pytest
from brute import brute_force
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.solvers import AssignmentProblem, random_assignment_problem, round_relaxation, solve_assignment
from dlsched.solvers.highs import solve_sparse
from dlsched.solvers.near_relaxation import optimum_near_relaxation


def relaxation(problem: AssignmentProblem) -> tuple[np.ndarray, np.ndarray]:
    """The simplex relaxation's point and its resource prices."""
    lp = solve_sparse(problem.to_sparse(), integer=False, lp_method="simplex")
    assert lp.row_dual is not None
    return lp.x, np.abs(lp.row_dual[problem.num_groups:])


def small_problem(seed: int, groups: int, forced: bool) -> AssignmentProblem:
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(groups), rng.integers(1, 4, size=groups))
    n = len(group)
    problem = AssignmentProblem(group=group, resource=rng.integers(0, 2, size=n), size=rng.choice([1, 2, 4], size=n),
                                value=rng.uniform(-0.5, 3.0, size=n), capacity=rng.integers(4, 9, size=2),
                                num_groups=groups)
    if forced:  # force one option (every option fits on its own)
        mask = np.zeros(n, dtype=bool)
        mask[int(rng.integers(n))] = True
        problem.forced = mask
    return problem


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), groups=st.integers(1, 6), forced=st.booleans(), priced=st.booleans())
def test_optimum_matches_brute_force(seed, groups, forced, priced):
    problem = small_problem(seed, groups, forced)
    x, prices = relaxation(problem)
    if not priced:  # prices of zero are valid too: a looser budget, a larger search, the same optimum
        prices = np.zeros_like(prices)
    choice = optimum_near_relaxation(problem, prices, round_relaxation(problem, x))
    assert choice is not None
    assert problem.is_feasible(choice)
    assert problem.objective(choice) == pytest.approx(brute_force(problem), abs=1e-9)
    assert np.all(problem.value[choice[choice >= 0]] > 0) or problem.forced_mask.any()


@pytest.mark.parametrize("seed", range(6))
def test_sia_shaped_optimum_equals_highs_milp(seed):
    """At Sia's shape (three GPU types, power-of-two counts) the choice is HiGHS's exact MILP choice."""
    problem = random_assignment_problem(14, [(3, 8), (3, 8), (4, 4)], seed=seed, max_size=24)
    x, prices = relaxation(problem)
    choice = optimum_near_relaxation(problem, prices, round_relaxation(problem, x), max_states=1_000_000)
    exact = solve_sparse(problem.to_sparse(), integer=True, mip_rel_gap=0.0)
    assert choice is not None
    assert problem.objective(choice) == pytest.approx(exact.objective, abs=1e-9)
    via_milp = solve_assignment(problem, "milp")
    assert via_milp.status in ("Optimal (enumerated near the relaxation)", "Optimal (integral relaxation)", "Optimal")
    assert via_milp.objective == pytest.approx(exact.objective, abs=1e-9)
    assert via_milp.bound >= via_milp.objective - 1e-12


def test_too_many_combinations_is_left_to_the_milp():
    problem = random_assignment_problem(14, [(3, 8), (3, 8), (4, 4)], seed=1, max_size=24)
    x, _ = relaxation(problem)
    incumbent = np.full(problem.num_groups, -1, dtype=np.int64)  # the empty choice: every combination fits
    assert optimum_near_relaxation(problem, np.zeros(3), incumbent, max_states=50) is None


def test_loose_gap_keeps_highs_incumbent():
    """A gap looser than the exact one (POP's sub-problems) is HiGHS's branch and bound, as before."""
    problem = random_assignment_problem(14, [(3, 8), (3, 8), (4, 4)], seed=0, max_size=24)
    assert solve_assignment(problem, "milp").status == "Optimal (enumerated near the relaxation)"
    res = solve_assignment(problem, "milp", mip_rel_gap=1e-4)
    assert res.status == "Optimal"


def test_hint_of_last_round_proves_the_optimum_without_an_lp():
    """A round whose values moved a little: the last round's prices and choice prove this round's optimum."""
    problem = random_assignment_problem(14, [(3, 8), (3, 8), (4, 4)], seed=3, max_size=24)
    first = solve_assignment(problem, "milp")
    assert first.prices is not None
    moved = AssignmentProblem(group=problem.group, resource=problem.resource, size=problem.size,
                              value=problem.value * (1.0 + 1e-4 * np.cos(np.arange(problem.num_options))),
                              capacity=problem.capacity, num_groups=problem.num_groups)
    hinted = solve_assignment(moved, "milp", hint=(first.prices, first.choice))
    assert hinted.status == "Optimal (enumerated from the hint's prices)"
    exact = solve_sparse(moved.to_sparse(), integer=True, mip_rel_gap=0.0)
    assert hinted.objective == pytest.approx(exact.objective, abs=1e-9)


def test_a_poor_hint_falls_back_to_the_relaxation():
    """Prices of zero and an empty choice leave too many combinations: the LP path answers, exactly."""
    problem = random_assignment_problem(14, [(3, 8), (3, 8), (4, 4)], seed=0, max_size=24)
    empty = np.full(problem.num_groups, -1, dtype=np.int64)
    res = solve_assignment(problem, "milp", hint=(np.zeros(3), empty))
    assert res.status != "Optimal (enumerated from the hint's prices)"
    exact = solve_sparse(problem.to_sparse(), integer=True, mip_rel_gap=0.0)
    assert res.objective == pytest.approx(exact.objective, abs=1e-9)
