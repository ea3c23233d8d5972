"""Assignment problems whose options span several resources (Hops's location-specific configurations)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.solvers.multi_assignment import MultiResourceProblem, greedy_choice, solve_multi_assignment


def problem_of(options, capacity, num_groups, ordered=()):
    """``options``: (group, {resource: amount}, value)."""
    rows = [r for _, use, _ in options for r in use]
    cols = [o for o, (_, use, _) in enumerate(options) for _ in use]
    data = [a for _, use, _ in options for a in use.values()]
    usage = sp.csc_matrix((np.array(data, dtype=float), (rows, cols)), shape=(len(capacity), len(options)))
    return MultiResourceProblem(group=np.array([g for g, _, _ in options]), usage=usage,
                                value=np.array([v for _, _, v in options], dtype=float),
                                capacity=np.array(capacity, dtype=float), num_groups=num_groups, ordered=ordered)


def brute_force(p: MultiResourceProblem) -> float:
    per_group = [[-1, *np.nonzero(p.group == g)[0].tolist()] for g in range(p.num_groups)]
    best = 0.0
    for combo in itertools.product(*per_group):
        choice = np.array(combo, dtype=np.int64)
        if p.is_feasible(choice):
            best = max(best, p.objective(choice))
    return best


def test_an_option_may_use_gpus_on_two_servers():
    # job 0 can take 4 GPUs split 2+2 over servers 0 and 1 (worth 5) or 4 on server 0 (worth 4); job 1 needs
    # 3 GPUs on server 1. Only the split leaves job 1 no room, so the optimum is 4 on server 0 plus job 1.
    p = problem_of([(0, {0: 2, 1: 2}, 5.0), (0, {0: 4}, 4.0), (1, {1: 3}, 3.0)], [4, 4], 2)
    res = solve_multi_assignment(p, mip_rel_gap=0.0)
    assert res.choice.tolist() == [1, 2] and res.objective == 7.0


def draw_options(data, max_groups: int) -> tuple[int, int, list]:
    """A random small problem's resources, groups and options ``(group, {resource: GPUs}, value)``."""
    n_res = data.draw(st.integers(1, 3))
    n_groups = data.draw(st.integers(1, max_groups))
    options = []
    for g in range(n_groups):
        for _ in range(data.draw(st.integers(0, 3))):
            use = data.draw(st.dictionaries(st.integers(0, n_res - 1), st.integers(1, 4), min_size=1, max_size=n_res))
            options.append((g, use, data.draw(st.floats(0.1, 10.0))))
    return n_res, n_groups, options


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_milp_is_optimal_and_feasible_on_small_problems(data):
    n_res, n_groups, options = draw_options(data, max_groups=4)
    capacity = [data.draw(st.integers(0, 6)) for _ in range(n_res)]
    p = problem_of(options, capacity, n_groups)
    res = solve_multi_assignment(p, mip_rel_gap=0.0)
    assert p.is_feasible(res.choice)
    assert res.objective == pytest.approx(brute_force(p), rel=1e-6)
    assert res.objective >= p.objective(greedy_choice(p)) - 1e-9


def test_interchangeable_servers_keep_the_optimum():
    # two identical servers; ordering asks server 0 to hold at least what server 1 holds
    opts = [(0, {0: 3}, 2.0), (0, {1: 3}, 2.0), (1, {0: 2}, 1.0), (1, {1: 2}, 1.0)]
    plain = solve_multi_assignment(problem_of(opts, [4, 4], 2), mip_rel_gap=0.0)
    broken = solve_multi_assignment(problem_of(opts, [4, 4], 2, ordered=((0, 1),)), mip_rel_gap=0.0)
    assert plain.objective == broken.objective == 3.0
    assert broken.choice.tolist() == [0, 3]  # the bigger job on server 0


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_lp_rounding_is_feasible_bounded_and_auto_with_no_slack_is_optimal(data):
    n_res, n_groups, options = draw_options(data, max_groups=5)
    if not options:
        return
    p = problem_of(options, [data.draw(st.integers(0, 6)) for _ in range(n_res)], n_groups)
    best = brute_force(p)
    rounded = solve_multi_assignment(p, method="lp-round")
    assert p.is_feasible(rounded.choice)
    assert rounded.objective <= best + 1e-9 <= rounded.bound * (1 + 1e-7) + 1e-6  # the LP bounds the optimum
    auto = solve_multi_assignment(p, method="auto", round_gap=0.0, mip_rel_gap=0.0)
    assert auto.objective == pytest.approx(best, rel=1e-6)


def _hard_knapsack(n: int = 60, seed: int = 3) -> MultiResourceProblem:
    """Many jobs with near-equal value densities over two tight resources: branch and bound needs many nodes."""
    rng = np.random.default_rng(seed)
    options = []
    for g in range(n):
        a, b = int(rng.integers(3, 40)), int(rng.integers(3, 40))
        options.append((g, {0: a, 1: b}, float(a + b) * (1.0 + 0.01 * rng.random())))
    return problem_of(options, [517.0, 503.0], n)


def test_a_node_limit_stops_the_solve_at_the_same_plan_every_time():
    p = _hard_knapsack()
    runs = [solve_multi_assignment(p, node_limit=3, time_limit_s=60.0, mip_rel_gap=0.0) for _ in range(3)]
    assert all(np.array_equal(r.choice, runs[0].choice) for r in runs)
    assert not any(r.time_limited for r in runs)  # the work limit, not the clock, ended them
    assert "limit" in runs[0].status.lower()  # and it did end them short of the proof
    assert p.is_feasible(runs[0].choice)


def test_a_solve_the_clock_stops_says_so():
    p = _hard_knapsack(n=200)
    cut = solve_multi_assignment(p, time_limit_s=1e-6, mip_rel_gap=0.0)
    assert cut.time_limited and p.is_feasible(cut.choice)
