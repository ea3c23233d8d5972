"""Simulation speed: simulated seconds per wall-clock second, and where the wall time goes.

Cases (``--case``, default the first two, as the simulator-core issue asks):

* ``small``: 160 jobs on 64 GPUs (a Sia-scale run), FIFO with packed-sticky placement;
* ``big``: 10,000 jobs on 2,048 GPUs (cluster-scale), the same simple policy, so the figure measures the
  engine and world, not a solver (synthetic Philly-calibrated duration jobs, seeded);
* ``copter-25k``: the thesis's chapter-4 scale (issue 13): the ``copter-25k`` preset (25,600 GPUs of seven
  types) with the Alibaba-derived ``copter:jobs=100000,hours=24,seed=1`` workload under Sia with the
  continual solver (COpter). ``--hours H`` runs the first H simulated hours of it (the jobs that arrive by
  then, stopped at H h), for a quick measurement; without it the full day, run until every job finishes.
* ``copter-25k-day``: the same full day (``copter-25k`` without ``--hours``), under the name issue 35 gives it;
* ``hops-table4``: the Hops row of Hops Table 4 (``experiments/hops_table4.py``, built by its own
  ``row_spec``: ``hops-512``, ``hops:jobs=500,rate=100,seed=1``, Hops as that experiment configures it);
* ``sia-hops-512``: the Sia row of the same table, on the same run;
* ``sia-philly-1``: Sia on Philly workload 1 on ``sia-hetero-64``, as thesis table 3.3 runs it
  (``experiments/sia_table33.py``'s ``specs``).

``--jobs N`` runs the first N jobs of a case's trace (a reduced version for iterating; the line says so).

Each case runs in a child process of its own (so ``peak_rss_mb``, the child's peak resident memory, is the
case's). Each line carries ``wall_s`` (the simulation's), ``policy_p99_s`` (the 99th percentile of the
scheduler's time per round, ``policy_time_p99_s`` of the run's summary), ``cpu_s`` (the process's CPU seconds: what the wall time would be on a core of its own,
when the machine is shared), ``phase_s``, the engine's wall seconds per phase (``dlsched.sim.engine.PHASES``: view,
policy, check, apply, advance, round_record, job_records), ``policy_parts_s``, the scheduler's own split of
its time summed over rounds (Sia: estimator, option building, solver), and (copter-25k) ``wall_s_by_hour``,
the wall seconds each simulated hour took, from which a slice projects the full day (``projected_24h_wall_s``: the slice's
wall time plus its last hour's for every hour still to come; the load grows through a slice's first hours
and levels off after, so while the slice still ramps up this is a lower estimate).

``--explain-overhead`` runs each case with explanations off and on (``RunConfig.explain``; on by default,
issue 25 asks that it cost at most 15%), alternating, ``--repeat`` times each, and adds one row per case
(``bench: sim_speed_explain``) with the least CPU and wall seconds of each setting and their ratios, on over
off (``explain_ratio`` by CPU seconds, which a shared machine disturbs least; ``explain_wall_ratio``).

``--baseline REV`` checks REV out in a temporary ``git worktree`` (removed afterwards) and runs every case
there too, in the same invocation: the same case definitions (this file and ``experiments/``), that
revision's ``src`` on ``PYTHONPATH``. Each line then carries ``baseline`` (REV, its commit and its figures,
or ``missing``: why the case cannot run at REV) and ``ratio``: ours over the baseline's, by ``cpu_s`` and by
``wall_s``. With ``--repeat N`` the two alternate N times and each figure is the median of the N runs.

Prints a human line per measurement, then one JSON object per line per measurement; with ``--out FILE`` the
measurements also go to a result file with the provenance of :func:`dlsched.sim.about.provenance`, which
``tables(data)`` renders (``docs/results.md``, the COpter section).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Only the configuration and the simulator are imported at the top: a child process runs this file against
# a baseline revision's ``src``, which may lack the rest (imported where used).
from dlsched.sim.config import RunConfig
from dlsched.sim.run import simulate

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: The experiments whose run builders the Hops and Sia cases reuse.
EXPERIMENTS = REPO / "experiments"

#: 256 servers of 8 V100 (a cluster file, so the run is an ordinary configuration).
BIG_CLUSTER = str(HERE / "clusters" / "v100-2048.yaml")
#: The thesis's 25k case: 100k jobs over 24 h (Alibaba PAI statistics), Sia solved by the continual method.
COPTER_JOBS, COPTER_HOURS = 100_000, 24.0
CASES = ("small", "big", "copter-25k", "copter-25k-day", "hops-table4", "sia-hops-512", "sia-philly-1")



def copter_config(hours: float | None) -> RunConfig:
    """The 24 h ``copter-25k`` run, or its first ``hours`` simulated hours."""
    trace = f"copter:jobs={COPTER_JOBS},hours={COPTER_HOURS:g},seed=1"
    common = {"cluster": "copter-25k", "trace": trace, "policy": "sia", "settings": {"solver": "continual"},
              "round_s": 60.0}
    if hours is None:
        return RunConfig(**common)
    # the jobs that arrive in the slice (arrivals are spread evenly over the day on average); the run stops
    # at the slice's end with the others unfinished
    jobs = max(1, min(COPTER_JOBS, math.ceil(COPTER_JOBS * hours / COPTER_HOURS)))
    return RunConfig(**common, jobs=jobs, max_time_s=hours * 3600.0)


def experiment_config(case: str) -> RunConfig:
    """The Hops and Sia cases' runs, built by the experiments' own functions (so they are those runs)."""
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    if case == "sia-philly-1":
        import sia_table33

        (spec,) = sia_table33.specs(1, 0, policies=("sia",))
        return spec["config"]
    import hops_table4

    return hops_table4.row_spec("Hops" if case == "hops-table4" else "Sia", 1)["config"]


def configs_for(case: str, hours: float | None) -> list[tuple[str, RunConfig]]:
    if case in ("hops-table4", "sia-hops-512", "sia-philly-1"):
        return [(case, experiment_config(case))]
    if case == "copter-25k-day":
        return [(case, copter_config(None))]
    if case == "small":
        return [(case, RunConfig(cluster="sia-hetero-64", trace="synthetic:rate=20,hours=8,seed=1,jobs=160",
                                 round_s=60.0))]
    if case == "big":
        # 10,000 jobs over ~2.5 days: about 170 jobs/h keeps a 2,048-GPU cluster busy but not swamped
        return [(case, RunConfig(cluster=BIG_CLUSTER, trace=f"synthetic:rate=170,hours={10000 / 170!r},seed=2,"
                                 "kind=rigid-duration", jobs=10000, round_s=60.0))]
    return [(case, copter_config(hours))]


def policy_parts(rounds: list) -> dict[str, float]:
    """The scheduler's own split of its time, summed over rounds (the round records' ``*_s`` info, e.g. Sia's
    ``sia.estimator_s``, ``sia.build_s``, ``sia.solve_s``)."""
    out: dict[str, float] = {}
    for r in rounds:
        for k, v in (r.info or {}).items():
            if k.endswith("_s"):
                out[k] = out.get(k, 0.0) + float(v)
    return {k: round(v, 3) for k, v in sorted(out.items())}


def measure(case: str, config: RunConfig, hours: float | None) -> tuple[dict, dict]:
    """One case's row, and the run's resolved configuration (for the result file's provenance). Runs in
    the child process; reads only what a baseline revision's simulator also has."""
    by_hour: list[float] = []
    long_run = case.startswith("copter-25k")
    start, cpu0 = time.perf_counter(), time.process_time()

    def tick(t: float, done: int, total: int) -> None:
        # wall time at the end of each round, folded into simulated hours
        hour = int((t - 1e-9) // 3600.0)
        while len(by_hour) <= hour:  # an hour without rounds (nothing active) took no time
            if by_hour and long_run:  # a long run says how far it got
                print(f"{case}: simulated hour {len(by_hour)} done after {by_hour[-1]:.0f} s wall, "
                      f"{done:,} of {total:,} jobs finished", file=sys.stderr, flush=True)
            by_hour.append(by_hour[-1] if by_hour else 0.0)
        by_hour[hour] = time.perf_counter() - start

    res = simulate(config, on_progress=tick)
    cpu = time.process_time() - cpu0
    wall = res.summary["sim_wall_s"]
    hourly = [b - a for a, b in zip([0.0, *by_hour[:-1]], by_hour, strict=True)]
    done = sum(1 for r in res.jobs if r.finish_s is not None)
    policy = sorted(r.policy_s for r in res.rounds)
    p99 = res.summary.get("policy_time_p99_s")
    if p99 is None and policy:  # a revision whose summary lacks it: numpy's default percentile
        import numpy as np

        p99 = float(np.percentile(policy, 99))
    row = {"bench": "sim_speed", "case": case, "gpus": res.num_gpus, "jobs": len(res.jobs), "policy": res.label,
           "completed": done, "rounds": len(res.rounds), "sim_s": res.end_time_s, "wall_s": round(wall, 3),
           "sim_s_per_wall_s": round(res.end_time_s / wall, 1),
           # the process's CPU seconds: its wall time on a core of its own (the machine may be shared)
           "cpu_s": round(cpu, 3),
           "policy_p50_s": round(statistics.median(policy), 4) if policy else None,
           "policy_p99_s": round(p99, 4) if p99 is not None else None,
           # the child's peak resident memory (Linux reports kilobytes)
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
           "avg_jct_s": res.summary.get("avg_jct_s"), "makespan_s": res.summary.get("makespan_s"),
           "phase_s": {k: round(v, 3) for k, v in getattr(res, "phase_s", {}).items()},
           "policy_parts_s": policy_parts(res.rounds), "explain": getattr(config, "explain", None),
           "explanations": len(getattr(res, "explanations", ()))}
    if config.jobs is not None and not long_run:
        row["reduced_to_jobs"] = config.jobs
    if long_run:
        row["wall_s_by_hour"] = [round(h, 2) for h in hourly]
    if hours is not None:
        row["hours"] = hours
        if hourly and hours < COPTER_HOURS:
            row["projected_24h_wall_s"] = round(wall + hourly[-1] * (COPTER_HOURS - len(hourly)), 1)
    return row, json.loads(json.dumps(res.config_record(), default=str))


def child(case: str, hours: float | None, jobs: int | None, explain: bool | None) -> int:
    """``--child``: run one case in this process and print its row and configuration as one JSON line on
    stdout (the line starting ``{"row"``). A case that cannot be built or run here (a baseline revision
    without its cluster, trace or policy) prints ``{"missing": why}`` instead."""
    try:
        ((name, config),) = configs_for(case, hours)
        update: dict[str, Any] = {}
        if jobs is not None:
            update["jobs"] = jobs
        if explain is not None:
            update["explain"] = explain
        if update:
            config = config.model_copy(update=update)
        row, record = measure(name, config, hours)
    except Exception as e:  # noqa: BLE001 - reported in the parent's line, whatever it is
        print(json.dumps({"missing": f"{type(e).__name__}: {e}".splitlines()[0][:300]}), flush=True)
        return 0
    print(json.dumps({"row": row, "config": record}), flush=True)
    return 0


def run_case(case: str, hours: float | None, jobs: int | None, explain: bool | None,
             src: Path | None = None) -> dict[str, Any]:
    """One case in a child process (this file, ``src`` on ``PYTHONPATH``: this checkout's by default)."""
    env = dict(os.environ, PYTHONPATH=str(src or REPO / "src"))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case]
    if hours is not None:
        cmd += ["--hours", repr(hours)]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    if explain is not None:
        cmd += ["--explain", "on" if explain else "off"]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"missing": f"the child exited with status {proc.returncode}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


class BaselineTree:
    """A revision checked out in a temporary ``git worktree``, removed on exit."""

    def __init__(self, rev: str) -> None:
        self.rev = rev
        self.path = Path(tempfile.mkdtemp(prefix="sim-speed-baseline-")) / "tree"
        self.commit = ""

    def __enter__(self) -> BaselineTree:
        got = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{self.rev}^{{commit}}"],
                             capture_output=True, text=True, check=False)
        if got.returncode != 0:
            raise ValueError(f"--baseline: no revision '{self.rev}' in this repository")
        self.commit = got.stdout.strip()
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(self.path),
                        self.commit], check=True, capture_output=True)
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(self.path)],
                       check=False, capture_output=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], check=False, capture_output=True)
        try:
            self.path.parent.rmdir()
        except OSError:
            pass


#: The figures a baseline line carries and the medians of repeated runs are taken of.
FIGURES = ("wall_s", "cpu_s", "policy_p50_s", "policy_p99_s", "peak_rss_mb")


def median_row(rows: list[dict]) -> dict:
    """The first row with each figure replaced by its median over ``rows`` (one row: itself)."""
    out = dict(rows[0])
    if len(rows) > 1:
        for k in FIGURES:
            vals = [r[k] for r in rows if r.get(k) is not None]
            out[k] = round(statistics.median(vals), 4) if vals else None
        out["runs"] = len(rows)
    return out


def with_baseline(row: dict, base: list[dict[str, Any]], tree: BaselineTree) -> dict:
    """``row`` with the baseline's figures and the ratios ours / baseline."""
    info: dict[str, Any] = {"rev": tree.rev, "commit": tree.commit[:12]}
    missing = [b["missing"] for b in base if "missing" in b]
    if missing:
        info["missing"] = f"case {row['case']} does not run at {tree.rev}: {missing[0]}"
        return {**row, "baseline": info, "ratio": None}
    b = median_row([x["row"] for x in base])
    info.update({k: b.get(k) for k in (*FIGURES, "avg_jct_s", "makespan_s", "phase_s", "policy_parts_s")})
    ratio = {k: round(row[k] / b[k], 3) if row.get(k) and b.get(k) else None for k in ("cpu_s", "wall_s")}
    return {**row, "baseline": info, "ratio": ratio}


def explain_overhead(rows: list[dict]) -> list[dict]:
    """Per case, the least CPU and wall seconds with explanations off and on, and on over off."""
    out = []
    for case in dict.fromkeys(r["case"] for r in rows):
        off = [r for r in rows if r["case"] == case and not r["explain"]]
        on = [r for r in rows if r["case"] == case and r["explain"]]
        cpu_off, cpu_on = min(r["cpu_s"] for r in off), min(r["cpu_s"] for r in on)
        wall_off, wall_on = min(r["wall_s"] for r in off), min(r["wall_s"] for r in on)
        out.append({"bench": "sim_speed_explain", "case": case, "runs": len(on), "cpu_s_off": cpu_off,
                    "cpu_s_on": cpu_on, "wall_s_off": wall_off, "wall_s_on": wall_on,
                    "explain_ratio": round(cpu_on / cpu_off, 3), "explain_wall_ratio": round(wall_on / wall_off, 3),
                    "explanations": on[0]["explanations"]})
    return out


def tables(data: dict) -> dict[str, str]:
    """The speed table (one row per case) and the engine's phases, from a result file written with ``--out``."""
    from dlsched.sim.engine import PHASES

    lines = ["| case | GPUs | jobs | completed | rounds | simulated h | wall (s) | CPU (s) | simulated s per wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    phases = ["| case | " + " | ".join(PHASES) + " | policy: estimator | policy: options | policy: solver | policy: placement |",
              "|---|" + "---|" * (len(PHASES) + 4)]
    for r in (r for r in data["runs"] if r.get("bench", "sim_speed") == "sim_speed"):
        name = r["case"] + (f" (first {r['hours']:g} h)" if r.get("hours") is not None else "")
        lines.append(f"| {name} | {r['gpus']:,} | {r['jobs']:,} | {r['completed']:,} | {r['rounds']:,} | "
                     f"{r['sim_s'] / 3600:.1f} | {r['wall_s']:,.0f} | "
                     f"{format(r['cpu_s'], ',.0f') if 'cpu_s' in r else '-'} | {r['sim_s_per_wall_s']:,.1f} |")
        parts = r.get("policy_parts_s", {})
        cells = [f"{r['phase_s'].get(k, 0.0):,.1f}" for k in PHASES]
        cells += [f"{parts[k]:,.1f}" if k in parts else "-"
                  for k in ("sia.estimator_s", "sia.build_s", "sia.solve_s", "sia.place_s")]
        phases.append(f"| {name} | " + " | ".join(cells) + " |")
    notes = []
    for r in data["runs"]:
        if "projected_24h_wall_s" in r:
            ratio = r["cpu_s"] / r["wall_s"] if r.get("cpu_s") and r["wall_s"] > 0 else None
            cpu = f" ({r['projected_24h_wall_s'] * ratio:,.0f} s of CPU at the slice's CPU/wall ratio)" if ratio else ""
            notes.append(f"The first {r['hours']:g} simulated h of {r['case']} took {r['wall_s']:,.0f} s wall; "
                         f"projected to 24 h: {r['projected_24h_wall_s']:,.0f} s wall{cpu}.")
    return {"table": "\n".join(lines), "phases": "Wall seconds per phase:\n\n" + "\n".join(phases),
            "projection": " ".join(notes) or "No slice in this file."}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only the small case")
    ap.add_argument("--case", choices=CASES, action="append",
                    help="a case to run (repeatable; default: small and big)")
    ap.add_argument("--hours", type=float, default=None,
                    help="copter-25k only: simulate the first HOURS hours (0 < HOURS <= 24; default the full run)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="run only the first JOBS jobs of each case's trace (a reduced case, said in its line)")
    ap.add_argument("--baseline", default=None, metavar="REV",
                    help="also run each case at git revision REV (a temporary worktree) and give the ratios")
    ap.add_argument("--explain-overhead", action="store_true",
                    help="run each case with explanations off and on; the second row carries the ratio")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs of each setting: with --explain-overhead (default 3), or with --baseline, "
                         "alternating with the baseline's, medians reported (default 1)")
    ap.add_argument("--out", default=None, help="also write the measurements, with provenance, to this JSON file")
    ap.add_argument("--child", default=None, choices=CASES, help=argparse.SUPPRESS)
    ap.add_argument("--explain", default=None, choices=("on", "off"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hours is not None and not (0 < args.hours <= COPTER_HOURS):
        print(f"error: --hours must be in (0, {COPTER_HOURS:g}], got {args.hours:g}", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print(f"error: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    if args.repeat is not None and args.repeat < 1:
        print(f"error: --repeat must be at least 1, got {args.repeat}", file=sys.stderr)
        return 2
    explain = None if args.explain is None else args.explain == "on"
    if args.child is not None:
        return child(args.child, args.hours, args.jobs, explain)
    cases = ["small"] if args.quick else (args.case or ["small", "big"])
    if args.hours is not None and "copter-25k" not in cases:
        print("error: --hours applies to --case copter-25k only", file=sys.stderr)
        return 2
    from dlsched.progress import progress_bar
    from dlsched.sim.about import begin_measurements, finish_measurements

    begin_measurements(args.out)
    repeat = args.repeat or (3 if args.explain_overhead else 1)
    runs = [(case, on) for case in cases for _ in range(repeat if args.explain_overhead else 1)
            for on in ((False, True) if args.explain_overhead else (None,))]
    tree = BaselineTree(args.baseline) if args.baseline else None
    try:
        if tree is not None:
            tree.__enter__()
    except (ValueError, subprocess.CalledProcessError) as e:
        why = e if isinstance(e, ValueError) else f"--baseline: git worktree add failed: {e.stderr.strip()}"
        print(f"error: {why}", file=sys.stderr)
        return 2
    rows, run_configs = [], []
    try:
        each = repeat if tree is not None and not args.explain_overhead else 1
        with progress_bar(len(runs) * each * (2 if tree is not None else 1), "sim_speed", unit="runs") as advance:
            for case, on in runs:
                hours = args.hours if case == "copter-25k" else None
                ours, base = [], []
                for _ in range(each):
                    got = run_case(case, hours, args.jobs, on)
                    advance()
                    if "missing" in got:
                        print(f"error: case {case} failed: {got['missing']}", file=sys.stderr)
                        return 1
                    ours.append(got)
                    if tree is not None:
                        base.append(run_case(case, hours, args.jobs, on, src=tree.path / "src"))
                        advance()
                row = median_row([g["row"] for g in ours])
                rows.append(with_baseline(row, base, tree) if tree is not None else row)
                run_configs.append(ours[0]["config"])
    finally:
        if tree is not None:
            tree.__exit__(None, None, None)
    if args.explain_overhead:
        rows += explain_overhead(rows)
    for r in rows:
        if r["bench"] != "sim_speed":
            print(f"{r['case']}: explanations cost x{r['explain_ratio']} CPU, x{r['explain_wall_ratio']} wall "
                  f"(least of {r['runs']} runs each)", file=sys.stderr)
            continue
        line = (f"{r['case']}: {r['jobs']:>6} jobs on {r['gpus']:>5} GPUs, explanations "
                f"{'on ' if r['explain'] else 'off'}: {r['wall_s']:8.2f} s wall, {r['cpu_s']:8.2f} s CPU, "
                f"policy p99 {r['policy_p99_s']} s, {r['sim_s_per_wall_s']:>10.0f} simulated s per wall s "
                f"({r['rounds']} rounds)")
        if "baseline" in r:
            b = r["baseline"]
            line += (f"; at {b['rev']}: {b['missing']}" if "missing" in b else
                     f"; at {b['rev']}: {b['wall_s']:.2f} s wall, {b['cpu_s']:.2f} s CPU, "
                     f"ratio {r['ratio']['cpu_s']} by CPU, {r['ratio']['wall_s']} by wall")
        print(line, file=sys.stderr)
    finish_measurements(rows, args.out, "sim_speed", args, configs=run_configs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
