"""HiGHS layer: sparse problems, Sia-shaped assignment problems (exact, rounded, incremental)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from brute import brute_force
from hypothesis import given, settings
from hypothesis import strategies as st

from dlsched.solvers import (
    AssignmentProblem,
    IncrementalAssignment,
    SparseProblem,
    random_assignment_problem,
    round_relaxation,
    solve_assignment,
    solve_sparse,
)

# -- thesis table 3.1 -------------------------------------------------------------------------------------
#: The thesis's running example (section 3.3.4): one node of 2 A GPUs and one of 4 B GPUs, configurations
#: (1,1,A), (1,2,A), (1,1,B), (1,2,B), (1,4,B), two jobs. The extracted text omits the numbers of Table 3.1,
#: so these are a normalised matrix of its shape (row minimum = 1 GPU); the text states the optimum of
#: eq. 3.2: J1 gets (1,4,B) and J2 gets (1,2,A).
TABLE_3_1_CONFIGS = [("A", 1), ("A", 2), ("B", 1), ("B", 2), ("B", 4)]
TABLE_3_1_G = np.array([[1.0, 1.6, 1.9, 3.4, 6.0],
                        [1.0, 1.9, 1.2, 2.2, 3.6]])


def table_3_1_problem(G: np.ndarray, lam: float = 1.1) -> AssignmentProblem:
    nj, nc = G.shape
    group = np.repeat(np.arange(nj), nc)
    resource = np.tile([0 if t == "A" else 1 for t, _ in TABLE_3_1_CONFIGS], nj)
    size = np.tile([k for _, k in TABLE_3_1_CONFIGS], nj)
    # eq. 3.2 up to a constant: sum A G + lam (1 - |A|) = sum A (G - lam) + |J| lam ... written as a
    # maximisation of per-option value G + lam (the penalty reading; same argmax for any lam >= 0 here)
    return AssignmentProblem(group=group, resource=resource, size=size, value=G.ravel() + lam,
                             capacity=np.array([2.0, 4.0]), num_groups=nj)


@pytest.mark.parametrize("method", ["milp", "lp-round", "auto"])
def test_table_3_1_known_optimum(method):
    problem = table_3_1_problem(TABLE_3_1_G)
    res = solve_assignment(problem, method)
    j1, j2 = res.choice
    assert TABLE_3_1_CONFIGS[j1 % 5] == ("B", 4)
    assert TABLE_3_1_CONFIGS[j2 % 5] == ("A", 2)
    assert res.objective == pytest.approx(6.0 + 1.9 + 2 * 1.1)
    assert res.objective == pytest.approx(brute_force(problem))


def test_table_3_1_with_fairness_exponent():
    """p = -0.5 (minimise sum (G)^p + lambda per unallocated job): same allocation, both jobs served."""
    p, lam = -0.5, 1.1
    G = TABLE_3_1_G
    problem = table_3_1_problem(G, 0.0)
    problem.value = (lam - np.power(G, p)).ravel()
    res = solve_assignment(problem, "milp")
    assert [TABLE_3_1_CONFIGS[c % 5] for c in res.choice] == [("B", 4), ("A", 2)]
    assert res.objective == pytest.approx(brute_force(problem))


# -- exactness and rounding ---------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), groups=st.integers(1, 5), lam=st.sampled_from([0.0, 0.5, 1.1]))
def test_milp_matches_brute_force(seed, groups, lam):
    rng = np.random.default_rng(seed)
    n_per = rng.integers(1, 4, size=groups)
    group = np.repeat(np.arange(groups), n_per)
    n = len(group)
    problem = AssignmentProblem(group=group, resource=rng.integers(0, 2, size=n), size=rng.choice([1, 2, 4], size=n),
                                value=rng.uniform(-0.5, 3.0, size=n) + lam, capacity=rng.integers(1, 7, size=2),
                                num_groups=groups)
    res = solve_assignment(problem, "milp")
    assert problem.is_feasible(res.choice)
    assert res.objective == pytest.approx(brute_force(problem), abs=1e-7)
    rounded = solve_assignment(problem, "lp-round")
    assert problem.is_feasible(rounded.choice)
    assert rounded.objective <= res.objective + 1e-9


def test_forced_options_are_kept():
    problem = table_3_1_problem(TABLE_3_1_G)
    forced = np.zeros(problem.num_options, dtype=bool)
    forced[5 + 4] = True  # J2 must keep (1,4,B)
    problem.forced = forced
    for method in ("milp", "lp-round"):
        res = solve_assignment(problem, method)
        assert res.choice[1] == 9
        assert TABLE_3_1_CONFIGS[res.choice[0]] == ("A", 2)


def test_rounding_is_feasible_and_close_to_lp_bound():
    problem = random_assignment_problem(300, [(48, 4), (24, 8), (16, 8)], seed=7)
    res = solve_assignment(problem, "lp-round")
    assert problem.is_feasible(res.choice)
    assert res.objective >= 0.995 * res.bound
    exact = solve_assignment(problem, "milp")
    assert res.objective <= exact.objective + 1e-6 <= exact.bound + 1e-5


def test_round_relaxation_fills_leftover_capacity():
    problem = AssignmentProblem(group=[0, 0, 1], resource=[0, 0, 0], size=[4, 1, 1], value=[3.0, 1.0, 1.0],
                                capacity=[4], num_groups=2)
    # an LP point that wants group 0 on 4 GPUs and group 1 nowhere
    choice = round_relaxation(problem, np.array([1.0, 0.0, 0.0]))
    assert choice.tolist() == [0, -1]
    # a fractional point: group 0 split; group 1 takes the leftover GPU
    choice = round_relaxation(problem, np.array([0.75, 0.25, 1.0]))
    assert problem.is_feasible(choice)
    assert choice[1] == 2


def test_sparse_problem_milp_and_lp():
    # max 5x + 4y s.t. 6x + 4y <= 24, x + 2y <= 6, x, y in [0, 10]: LP optimum (3, 1.5) = 21, MILP (4, 0) = 20
    A = sp.csc_matrix(np.array([[6.0, 4.0], [1.0, 2.0]]))
    prob = SparseProblem(c=np.array([5.0, 4.0]), A=A, row_lo=np.full(2, -np.inf), row_hi=np.array([24.0, 6.0]),
                         col_lo=np.zeros(2), col_hi=np.full(2, 10.0), integer=np.ones(2, dtype=bool))
    lp = solve_sparse(prob, integer=False)
    assert lp.objective == pytest.approx(21.0)
    assert lp.x == pytest.approx([3.0, 1.5])
    mip = solve_sparse(prob, integer=True)
    assert mip.objective == pytest.approx(20.0)
    assert mip.x == pytest.approx([4.0, 0.0])
    simplex = solve_sparse(prob, integer=False, lp_method="simplex")
    assert simplex.objective == pytest.approx(21.0)


# -- incremental model --------------------------------------------------------------------------------
def test_incremental_matches_cold_solves_across_edits():
    rng = np.random.default_rng(0)
    pool = random_assignment_problem(120, [(12, 4), (6, 8), (4, 8)], seed=3)
    inc = IncrementalAssignment(3)
    iters = []
    for rnd in range(6):
        lo, hi = 5 * rnd, 5 * rnd + 90  # groups come and go
        idx = np.nonzero((pool.group >= lo) & (pool.group < hi))[0]
        value = pool.value[idx] * (1 + 0.01 * rng.standard_normal(len(idx)))
        forced = np.zeros(len(idx), dtype=bool)
        if rnd == 3:
            forced[0] = True
        problem = AssignmentProblem(group=pool.group[idx] - lo, resource=pool.resource[idx], size=pool.size[idx],
                                    value=value, capacity=pool.capacity, num_groups=hi - lo, forced=forced)
        keys = [(int(pool.group[i]), int(i)) for i in idx]
        res = inc.solve(problem, keys, list(range(lo, hi)))
        cold = solve_assignment(problem, "lp-round", lp_method="simplex")
        assert problem.is_feasible(res.choice)
        assert res.bound == pytest.approx(cold.bound, rel=1e-9)
        iters.append(res.iterations)
    assert max(iters[1:]) < iters[0]  # warm starts need fewer iterations than the first, cold, solve


def test_empty_problem():
    problem = AssignmentProblem(group=[], resource=[], size=[], value=[], capacity=[4.0], num_groups=2)
    res = solve_assignment(problem, "auto")
    assert res.choice.tolist() == [-1, -1]


def test_node_limit_stops_branch_and_bound_at_the_same_point_every_time():
    # A 60-item, 5-constraint knapsack that needs thousands of nodes to prove optimal. With a node limit the
    # solve stops after that many nodes, not optimal, at the same incumbent every time (a time limit would
    # stop it wherever the machine's load leaves it).
    rng = np.random.default_rng(0)
    w = rng.integers(20, 100, size=(5, 60)).astype(float)
    v = w.sum(axis=0) / 5 + rng.integers(0, 20, 60)
    prob = SparseProblem(c=v, A=sp.csc_matrix(w), row_lo=np.full(5, -np.inf), row_hi=w.sum(axis=1) / 2,
                         col_lo=np.zeros(60), col_hi=np.ones(60), integer=np.ones(60, dtype=bool), maximize=True)
    a = solve_sparse(prob, integer=True, node_limit=20)
    b = solve_sparse(prob, integer=True, node_limit=20)
    assert not a.optimal and a.nodes == b.nodes == 20
    assert (a.x == b.x).all() and a.objective == b.objective
    assert (w @ a.x <= w.sum(axis=1) / 2 + 1e-6).all() and a.objective > 0
