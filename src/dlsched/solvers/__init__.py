"""Optimisation problems as sparse matrices, solved with HiGHS (no commercial solver needed).

``highs`` holds the generic LP/MILP container, the assignment problems Sia-like policies build (exact MILP,
LP relaxation plus rounding) and a warm-started, incrementally edited model for continual optimisation.
Solvers never import policies: values and sizes mean whatever the caller says they mean.
"""

from dlsched.solvers.highs import (
    AssignmentProblem,
    AssignmentResult,
    IncrementalAssignment,
    Solution,
    SparseProblem,
    round_relaxation,
    solve_assignment,
    solve_sparse,
)

__all__ = ["AssignmentProblem", "AssignmentResult", "IncrementalAssignment", "Solution", "SparseProblem",
           "round_relaxation", "solve_assignment", "solve_sparse"]
