"""What each part of the continual method buys (thesis figure 4.6), and how little a round changes (figure 4.2).

Figure 4.6 stacks COpter's techniques on the LP relaxation of Sia's problem at 10k GPUs: a solver that
exploits the problem's sparse structure (5x over an off-the-shelf LP solver), the differential interface
(3.5x more) and the warm start (1.5x more). Here, on the same churning problem as
``benchmarks/scale_policy_time.py`` (the thesis prototype's seven GPU types, Sia's configurations, a fraction
``--churn`` of the jobs replaced and ``--drift`` re-estimated per round), four ways to solve each round's
relaxation, each adding one technique:

* ``lpstar``: the relaxation built from scratch and solved by HiGHS's dual simplex;
* ``sparse``: the proximal-point coordinate method (:class:`~dlsched.solvers.continual.ProximalPoint`), on a
  problem rebuilt from scratch each round and started cold (zero weights and prices);
* ``differential``: the same method on the problem edited in place by the round's changes, still cold;
* ``warm``: the same, started from the last round's weights and prices (the ``continual`` method).

Per round, each step's speed-up over the one before it (``sparse`` over ``lpstar``, ``differential`` over
``sparse``, ``warm`` over ``differential``) and in total; mean, median, 10th and 90th percentile over the
rounds, as the figure shows them. Times are the relaxation alone (rebuild included where it happens), not the
shim, as the figure measures the LP. Figure 4.2: per round, the share of jobs present in both rounds whose
allocation (under the ``warm`` method, shimmed) changes, the share of the allocation's option variables that
change value, and the share of option variables added or removed.

Prints a human summary on stderr, then one JSON object per line per measurement.

    python benchmarks/copter_attribution.py [--gpus 10240] [--rounds 10] [--out FILE]

With ``--out FILE`` the measurements also go to a result file with provenance (``make results`` renders it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Hashable

import numpy as np
from scale_policy_time import BLOCK, add_stream_arguments, stream_problems

from dlsched.solvers.continual import LPStar, ProximalPoint
from dlsched.solvers.differential import DifferentialAssignment
from dlsched.solvers.synthetic import ChurnStream, ResourceBlock

STEPS = ("lpstar", "sparse", "differential", "warm")
#: The thesis's mean speed-up of each technique (figure 4.6).
THESIS = {"sparse": 5.0, "differential": 3.5, "warm": 1.5, "total": 24.0}


def rebuilt(problem: DifferentialAssignment) -> DifferentialAssignment:
    """A fresh copy of the live problem, built job by job: what a scheduler without a differential
    interface does every round."""
    fresh = DifferentialAssignment(problem.capacity)
    for row in np.nonzero(problem.row_alive)[0]:
        a, b = int(problem.row_start[row]), problem.row_stop(int(row))
        fresh.add_job(problem.row_key(int(row)), problem.resource[a:b], problem.size[a:b], problem.value[a:b])
    return fresh


def relax_s(method: LPStar | ProximalPoint) -> float:
    """Seconds to solve the method's relaxation once (its model edits included)."""
    t0 = time.perf_counter()
    method.relax()
    return time.perf_counter() - t0


def allocation(problem: DifferentialAssignment, pick: np.ndarray) -> dict[Hashable, int]:
    """Per job, the offset of the option it got (jobs without GPUs left out)."""
    rows = np.nonzero(pick >= 0)[0]
    return {problem.row_key(int(r)): int(pick[r] - problem.row_start[r]) for r in rows}


def options_of(problem: DifferentialAssignment) -> dict[Hashable, int]:
    return {problem.row_key(int(r)): problem.row_stop(int(r)) - int(problem.row_start[r])
            for r in np.nonzero(problem.row_alive)[0]}


def changes(before: dict[Hashable, int], after: dict[Hashable, int], opts_before: dict[Hashable, int],
            opts_after: dict[Hashable, int]) -> dict[str, float]:
    """Figure 4.2's shares between two rounds' allocations (see the module docstring)."""
    common = opts_before.keys() & opts_after.keys()
    moved = sum(1 for k in common if before.get(k) != after.get(k))
    flipped = sum((before.get(k) is not None) + (after.get(k) is not None) for k in common
                  if before.get(k) != after.get(k))
    variables = sum(opts_after[k] for k in common)
    churned = sum(opts_before[k] for k in opts_before.keys() - common) + \
        sum(opts_after[k] for k in opts_after.keys() - common)
    return {"jobs_changed": moved / max(1, len(common)), "vars_changed": flipped / max(1, variables),
            "vars_added_removed": churned / max(1, sum(opts_after.values()))}


def _stats(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs, dtype=float)
    return {"mean": round(float(a.mean()), 6), "median": round(float(np.median(a)), 6),
            "p10": round(float(np.percentile(a, 10)), 6), "p90": round(float(np.percentile(a, 90)), 6)}


def run(gpus: int, jobs: int, rounds: int, churn: float, drift: float, seed: int) -> list[dict]:
    scale = gpus // 256
    stream = ChurnStream([ResourceBlock(n * scale, per) for _, n, per in BLOCK], jobs=jobs, churn=churn,
                         drift=drift, seed=seed)
    problem = stream.problem
    lpstar = LPStar(problem)
    differential = ProximalPoint(problem, warm=False)
    warm = ProximalPoint(problem)
    times: dict[str, list[float]] = {s: [] for s in STEPS}
    shares: list[dict[str, float]] = []
    last: tuple[dict[Hashable, int], dict[Hashable, int]] | None = None
    for t in range(rounds + 1):
        if t:
            stream.step()
        t0 = time.perf_counter()
        sparse = ProximalPoint(rebuilt(problem), warm=False)
        build_s = time.perf_counter() - t0
        measured = {"lpstar": relax_s(lpstar), "sparse": build_s + relax_s(sparse),
                    "differential": relax_s(differential), "warm": relax_s(warm)}
        pick = warm.solve().pick  # the allocation the warm method gives (its relaxation again, then the shim)
        now = (allocation(problem, pick), options_of(problem))
        if t:  # the first round is every method's cold start
            for s in STEPS:
                times[s].append(measured[s])
            shares.append(changes(last[0], now[0], last[1], now[1]))  # type: ignore[index]
            print(f"round {t}: " + ", ".join(f"{s} {measured[s]:.3f}s" for s in STEPS), file=sys.stderr,
                  flush=True)
        last = now
    base = {"bench": "copter_attribution", "gpus": int(problem.capacity.sum()), "jobs_active": len(problem),
            "rounds": rounds, "churn": churn, "drift": drift}
    out = [{**base, "measure": "time_s", "step": s, **_stats(times[s])} for s in STEPS]
    ratio = {"sparse": ("lpstar", "sparse"), "differential": ("sparse", "differential"),
             "warm": ("differential", "warm"), "total": ("lpstar", "warm")}
    for name, (slow, fast) in ratio.items():
        per_round = [a / b for a, b in zip(times[slow], times[fast], strict=True) if b > 0]
        out.append({**base, "measure": "speedup", "step": name, **_stats(per_round), "thesis_mean": THESIS[name]})
    for key in ("jobs_changed", "vars_changed", "vars_added_removed"):
        out.append({**base, "measure": key, **_stats([sh[key] for sh in shares])})
    return out


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/copter_attribution.json``: ``speedups`` (figure 4.6) and ``changes``
    (figure 4.2)."""
    runs = data["runs"]
    head = runs[0]
    scale = f"{head['gpus']:,} GPUs, {head['jobs_active']:,} jobs, {head['rounds']} rounds"
    names = {"sparse": "sparse structure (coordinate method, rebuilt, cold)", "differential": "+ differential "
             "updates (edited in place, cold)", "warm": "+ warm start", "total": "all three over LP*"}
    lines = [f"Speed-up of each step over the one before it ({scale}):", "",
             "| step | mean | median | p10 | p90 | thesis mean |", "|---|---|---|---|---|---|"]
    for r in (r for r in runs if r["measure"] == "speedup"):
        lines.append(f"| {names[r['step']]} | {r['mean']:.2f}x | {r['median']:.2f}x | {r['p10']:.2f}x | "
                     f"{r['p90']:.2f}x | {r['thesis_mean']:g}x |")
    times = ", ".join(f"{r['step']} {r['median']:.3f} s" for r in runs if r["measure"] == "time_s")
    lines += ["", f"Median relaxation time per round: {times}."]
    what = {"jobs_changed": "jobs (in both rounds) whose allocation changes",
            "vars_changed": "option variables that change value", "vars_added_removed": "option variables "
            "added or removed"}
    change = ["| share per round | mean | median | p90 |", "|---|---|---|---|"]
    for r in (r for r in runs if r["measure"] in what):
        change.append(f"| {what[r['measure']]} | {100 * r['mean']:.2f}% | {100 * r['median']:.2f}% | "
                      f"{100 * r['p90']:.2f}% |")
    return {"speedups": "\n".join(lines), "changes": "\n".join(change)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_stream_arguments(ap, gpus=10_240, rounds=10, gpus_help="cluster size, a multiple of 256 (figure 4.6: 10k)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the measurements, with provenance, to this JSON file")
    args = ap.parse_args(argv)
    from dlsched.sim.about import begin_measurements, finish_measurements
    problems = stream_problems(args)
    if problems:
        print(f"error: {problems[0]}", file=sys.stderr)
        return 2
    begin_measurements(args.out)
    jobs = args.jobs if args.jobs is not None else int(0.3 * args.gpus)
    rows = run(args.gpus, jobs, args.rounds, args.churn, args.drift, args.seed)
    for r in rows:
        label = f"{r['measure']:>18} {r.get('step', ''):>12}"
        thesis = f" (thesis mean {r['thesis_mean']}x)" if "thesis_mean" in r else ""
        print(f"{label}: mean {r['mean']}, median {r['median']}, p10 {r['p10']}, p90 {r['p90']}{thesis}",
              file=sys.stderr)
    finish_measurements(rows, args.out, "copter_attribution", args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
