"""Policy time per round at tens of thousands of GPUs: continual methods beside LP* and POP-k (thesis ch. 4).

The problem is shaped like the thesis's COpter prototype: seven GPU types in blocks of 256 GPUs (azure 6x8,
aws 8x4, dgx-ext 4x8, quad 8x4, rtx 6x8, a10-pcie 8x4, a100-pcie 8x4) scaled to ``--gpus``, Sia's
configurations on every type for each job (powers of two within a node, whole nodes beyond, up to Sia's
doubling limit and 64 GPUs), values from Sia's transformed objective, and churn between rounds (a fraction
``--churn`` of the jobs leaves and as many arrive; a fraction ``--drift`` reports new goodput estimates); see
:mod:`dlsched.solvers.synthetic`. All methods see the same problem in every round (one
:class:`~dlsched.solvers.differential.DifferentialAssignment`, edited in place):

* ``lpstar``: the relaxation built and solved from scratch each round (HiGHS dual simplex), then the shim;
* ``pop-16``: POP with 16 sub-problems solved as MILPs in ``--workers`` worker processes; ``median_s``/``p99_s``
  are the measured wall time, ``critical_path_*`` the slowest sub-problem (its time with 16 cores);
* ``warm-simplex``, ``continual`` (proximal point with coordinate descent, at most ``--prox-steps`` proximal
  steps per round, 15 by default), ``lagrangian``: warm-started from the previous round, then the shim.

The first round is every method's cold start (reported as ``first_s``) and is not counted; the figures are
over the ``--rounds`` rounds after it. ``objective_vs_lpstar`` is the method's total shimmed objective over
LP*'s in the same rounds (``min_objective_vs_lpstar`` the worst round; with ``--lpstar-every K`` LP* is solved
on every K-th round only, ``lpstar_rounds`` of them, and the comparison is over those); every LP method, LP* included,
ends with the same shim (``--shim``, recorded as ``shim``: ``upgrade`` by default, ``thesis`` for the thesis's
alone); POP's sub-problems are MILPs and need none; ``edits_median_s`` is the time the
differential interface took to apply a round's ``edits_per_round`` edits (job arrivals, departures and value
rows; not the time to make the new jobs' options). ``peak_rss_mb`` is the run's peak resident memory (this process or its largest worker). Prints a human line per
method on stderr, then one JSON object per line per method.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys

import numpy as np

from dlsched.solvers.continual import Lagrangian, LPStar, ProximalPoint, RoundResult, WarmSimplex
from dlsched.solvers.differential import DifferentialAssignment
from dlsched.solvers.pop import POP
from dlsched.solvers.synthetic import ChurnStream, ResourceBlock

#: The thesis prototype's 256-GPU block: (type, nodes, GPUs per node).
BLOCK = [("azure", 6, 8), ("aws", 8, 4), ("dgx-ext", 4, 8), ("quad", 8, 4), ("rtx", 6, 8), ("a10-pcie", 8, 4),
         ("a100-pcie", 8, 4)]
METHODS = ["lpstar", "pop-16", "warm-simplex", "continual", "lagrangian"]


#: ``--shim``: the thesis's shim alone, then filling jobs left without GPUs, then also upgrading jobs into
#: the GPUs still free (each includes the one before).
SHIMS = {"thesis": {}, "fill": {"fill": True}, "upgrade": {"fill": True, "upgrade": True}}


def make_method(name: str, problem: DifferentialAssignment, workers: int,
                shim: str = "upgrade", prox_steps: int = 15,
                prox_eta: float = 100.0) -> LPStar | WarmSimplex | POP:
    kw = SHIMS[shim]
    if name == "lpstar":
        return LPStar(problem, **kw)
    if name.startswith("pop-"):
        return POP(problem, int(name.split("-", 1)[1]), workers=workers)
    if name == "warm-simplex":
        return WarmSimplex(problem, **kw)
    if name == "continual":
        return ProximalPoint(problem, prox_steps=prox_steps, eta=prox_eta, **kw)
    if name == "lagrangian":
        return Lagrangian(problem, **kw)
    raise ValueError(f"unknown method {name!r}")


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 5) if values else float("nan")


def _peak_rss_mb() -> float:
    """Peak resident memory of this process and of its finished or running children's largest (POP's
    workers), in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024.0, 1)


def run(gpus: int, jobs: int, rounds: int, churn: float, drift: float, methods: list[str], workers: int,
        seed: int, shim: str = "upgrade", prox_steps: int = 15, prox_eta: float = 100.0,
        lpstar_every: int = 1) -> list[dict]:
    """Every method on every round; LP* on the first round and every ``lpstar_every``-th after it (at 100k
    GPUs one LP* round takes minutes), and each method's objective is compared on those rounds only."""
    scale = gpus // 256
    stream = ChurnStream([ResourceBlock(n * scale, per) for _, n, per in BLOCK], jobs=jobs, churn=churn,
                         drift=drift, seed=seed)
    problem = stream.problem
    names = ["lpstar"] + [m for m in methods if m != "lpstar"]
    solvers = {m: make_method(m, problem, workers, shim, prox_steps, prox_eta) for m in names}
    times: dict[str, list[float]] = {m: [] for m in names}
    critical: dict[str, list[float]] = {m: [] for m in names}
    obj: dict[str, list[float]] = {m: [] for m in names}
    #: per method, its objective on the rounds LP* was solved for (aligned with ``obj["lpstar"]``)
    ref_obj: dict[str, list[float]] = {m: [] for m in names}
    first: dict[str, float] = {}
    edits: list[float] = []
    edit_counts: list[int] = []
    active: list[int] = []
    try:
        for t in range(rounds + 1):
            if t:
                counts = stream.step()
                edits.append(stream.edit_s)
                edit_counts.append(counts["departed"] + counts["arrived"] + counts["drifted"])
            active.append(len(problem))
            for m, solver in solvers.items():
                if m == "lpstar" and t % lpstar_every:
                    continue
                res: RoundResult = solver.solve()
                if not problem.is_feasible(res.pick):
                    raise AssertionError(f"{m} returned an infeasible allocation in round {t}")
                if t == 0:
                    first[m] = res.total_s
                    continue
                times[m].append(res.total_s)
                obj[m].append(res.objective)
                if t % lpstar_every == 0:
                    ref_obj[m].append(res.objective)
                if "critical_path_s" in res.info:
                    critical[m].append(res.info["critical_path_s"])
            if t:
                print(f"round {t}: " + ", ".join(f"{m} {times[m][-1]:.3f}s" for m in names if times[m]),
                      file=sys.stderr, flush=True)
    finally:
        for solver in solvers.values():
            if isinstance(solver, POP):
                solver.close()
    rows = []
    ref = np.array(ref_obj["lpstar"])
    peak = _peak_rss_mb()
    for m in (x for x in methods if x in solvers):
        mine = np.array(ref_obj[m])
        row = {"bench": "scale_policy_time", "method": m, "gpus": int(problem.capacity.sum()),
               "jobs_active": int(np.median(active)), "options": int(problem.live_slots), "rounds": rounds,
               "churn": churn, "drift": drift, "shim": "milp" if m.startswith("pop-") else shim,
               "median_s": _pct(times[m], 50), "p99_s": _pct(times[m], 99),
               "max_s": round(max(times[m]), 5) if times[m] else float("nan"),
               "objective_vs_lpstar": round(float(mine.sum() / ref.sum()), 5) if ref.sum() > 0 else 1.0,
               "min_objective_vs_lpstar": round(float(np.min(mine / np.where(ref > 0, ref, 1.0))), 5),
               "first_s": round(first[m], 4), "edits_median_s": _pct(edits, 50),
               "edits_per_round": int(np.median(edit_counts)) if edit_counts else 0,
               "lpstar_rounds": len(ref), "peak_rss_mb": peak}
        if m == "continual":
            row["prox_steps"] = prox_steps
            row["prox_eta"] = prox_eta
        if critical[m]:
            row["critical_path_median_s"] = _pct(critical[m], 50)
            row["critical_path_p99_s"] = _pct(critical[m], 99)
        rows.append(row)
    return rows


def add_stream_arguments(ap: argparse.ArgumentParser, *, gpus: int, rounds: int, gpus_help: str) -> None:
    """The options of a synthetic churn stream (its cluster, jobs, rounds, churn and drift), shared by the
    benchmarks that replay one; :func:`stream_problems` checks them."""
    ap.add_argument("--gpus", type=int, default=gpus, help=gpus_help)
    ap.add_argument("--jobs", type=int, default=None, help="active jobs (default: 0.3 per GPU)")
    ap.add_argument("--rounds", type=int, default=rounds, help="rounds measured after the cold first round")
    ap.add_argument("--churn", type=float, default=0.03, help="fraction of jobs leaving (and arriving) per round")
    ap.add_argument("--drift", type=float, default=0.05, help="fraction of jobs with new goodput per round")


def stream_problems(args: argparse.Namespace) -> list[str]:
    """What is wrong with the churning problem's options (``--gpus``, ``--rounds``, ``--churn``, ``--drift``,
    ``--jobs``), one message each; shared by the benchmarks that solve it."""
    problems = []
    if args.gpus < 256 or args.gpus % 256:
        problems.append(f"--gpus: {args.gpus} is not a positive multiple of 256 (the thesis's block)")
    if args.rounds < 1:
        problems.append(f"--rounds: {args.rounds} must be at least 1")
    if not 0.0 <= args.churn <= 1.0 or not 0.0 <= args.drift <= 1.0:
        problems.append("--churn and --drift are fractions in [0, 1]")
    if args.jobs is not None and args.jobs < 1:
        problems.append(f"--jobs: {args.jobs} must be at least 1")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_stream_arguments(ap, gpus=25_600, rounds=30, gpus_help="cluster size, a multiple of 256")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated methods")
    ap.add_argument("--workers", type=int, default=2, help="worker processes for POP")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shim", default="upgrade",
                    help="integer shim of every LP method, LP* included: the thesis's (thesis), then filling "
                         "jobs left without GPUs (fill), then also upgrading jobs into free GPUs (upgrade)")
    ap.add_argument("--prox-steps", type=int, default=15,
                    help="the continual method's proximal steps per round at most (default 15; 1-10000)")
    ap.add_argument("--prox-eta", type=float, default=100.0,
                    help="the continual method's proximal step size eta (default 100; 0.001-1e6)")
    ap.add_argument("--lpstar-every", type=int, default=1,
                    help="solve LP* on every K-th measured round only (default 1: every round; 1-1000); "
                         "objectives are compared on those rounds")
    ap.add_argument("--quick", action="store_true", help="512 GPUs, 150 jobs, 4 rounds (seconds)")
    args = ap.parse_args(argv)
    if args.quick:
        args.gpus, args.jobs, args.rounds = 512, 150, 4
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    problems = stream_problems(args)
    if args.workers < 1:
        problems.append(f"--workers: {args.workers} must be at least 1")
    unknown = [m for m in methods if m not in METHODS and not (m.startswith("pop-") and m[4:].isdigit()
                                                               and int(m[4:]) >= 1)]
    if unknown:
        problems.append(f"--methods: unknown {', '.join(unknown)} (one of {', '.join(METHODS)}, or pop-K)")
    if not 1 <= args.prox_steps <= 10_000:
        problems.append(f"--prox-steps: {args.prox_steps} must be in 1-10000")
    if not 1e-3 <= args.prox_eta <= 1e6:
        problems.append(f"--prox-eta: {args.prox_eta} must be in 0.001-1e6")
    if not 1 <= args.lpstar_every <= 1000:
        problems.append(f"--lpstar-every: {args.lpstar_every} must be in 1-1000")
    if args.lpstar_every > args.rounds:
        problems.append(f"--lpstar-every: {args.lpstar_every} is more than --rounds {args.rounds}: LP* would "
                        "be solved on no measured round")
    if args.shim not in SHIMS:
        problems.append(f"--shim: unknown {args.shim} (one of {', '.join(SHIMS)})")
    if problems:
        print(f"error: {problems[0]}", file=sys.stderr)
        return 2
    jobs = args.jobs if args.jobs is not None else int(0.3 * args.gpus)
    rows = run(args.gpus, jobs, args.rounds, args.churn, args.drift, methods, args.workers, args.seed,
               args.shim, args.prox_steps, args.prox_eta, args.lpstar_every)
    for r in rows:
        extra = (f", critical path p99 {r['critical_path_p99_s']:.3f}s" if "critical_path_p99_s" in r else "")
        print(f"{r['method']:>12} {r['gpus']} GPUs, {r['jobs_active']} jobs: median {r['median_s']:.3f}s, "
              f"p99 {r['p99_s']:.3f}s{extra}, objective {r['objective_vs_lpstar']:.4f} of LP*", file=sys.stderr)
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
