"""Optimisation problems as sparse matrices, solved with HiGHS (no commercial solver needed).

* :mod:`~dlsched.solvers.highs`: the generic LP/MILP container and its solve through ``highspy``;
* :mod:`~dlsched.solvers.assignment`: the assignment problems Sia-like policies build (groups pick at most
  one option within resource capacities) and their answers;
* :mod:`~dlsched.solvers.one_shot`: exact MILP, or LP relaxation plus rounding
  (:mod:`~dlsched.solvers.rounding`), built afresh per call;
* :mod:`~dlsched.solvers.incremental`: a warm-started, incrementally edited model for continual optimisation.

Solvers never import policies: values and sizes mean whatever the caller says they mean.
"""

from dlsched.solvers.assignment import (
           AssignmentProblem,
           AssignmentResult,
           choice_from_x,
           random_assignment_problem,
)
from dlsched.solvers.highs import Solution, SparseProblem, new_highs, solve_sparse
from dlsched.solvers.incremental import IncrementalAssignment
from dlsched.solvers.one_shot import METHODS, solve_assignment
from dlsched.solvers.rounding import round_relaxation

__all__ = ["METHODS", "AssignmentProblem", "AssignmentResult", "IncrementalAssignment", "Solution", "SparseProblem",
           "choice_from_x", "new_highs", "random_assignment_problem", "round_relaxation", "solve_assignment",
           "solve_sparse"]
