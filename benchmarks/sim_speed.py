"""Simulation speed: simulated seconds per wall-clock second, and where the wall time goes.

Cases (``--case``, default the first two, as the simulator-core issue asks):

* ``small``: 160 jobs on 64 GPUs (a Sia-scale run), FIFO with packed-sticky placement;
* ``big``: 10,000 jobs on 2,048 GPUs (cluster-scale), the same simple policy, so the figure measures the
  engine and world, not a solver (synthetic Philly-calibrated duration jobs, seeded);
* ``copter-25k``: the thesis's chapter-4 scale (issue 13): the ``copter-25k`` preset (25,600 GPUs of seven
  types) with the Alibaba-derived ``copter:jobs=100000,hours=24,seed=1`` workload under Sia with the
  continual solver (COpter). ``--hours H`` runs the first H simulated hours of it (the jobs that arrive by
  then, stopped at H h), for a quick measurement; without it the full day, run until every job finishes.

Each line carries ``cpu_s`` (the process's CPU seconds: what the wall time would be on a core of its own,
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

Prints a human line per measurement, then one JSON object per line per measurement; with ``--out FILE`` the
measurements also go to a result file with the provenance of :func:`dlsched.sim.about.provenance`, which
``tables(data)`` renders (``docs/results.md``, the COpter section).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from dlsched.progress import progress_bar
from dlsched.sim.about import begin_measurements, finish_measurements
from dlsched.sim.config import RunConfig
from dlsched.sim.engine import PHASES
from dlsched.sim.run import simulate

#: 256 servers of 8 V100 (a cluster file, so the run is an ordinary configuration).
BIG_CLUSTER = str(Path(__file__).resolve().parent / "clusters" / "v100-2048.yaml")
#: The thesis's 25k case: 100k jobs over 24 h (Alibaba PAI statistics), Sia solved by the continual method.
COPTER_JOBS, COPTER_HOURS = 100_000, 24.0
CASES = ("small", "big", "copter-25k")



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


def configs_for(case: str, hours: float | None) -> list[tuple[str, RunConfig]]:
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
    """One case's row, and the run's resolved configuration (for the result file's provenance)."""
    by_hour: list[float] = []
    start, cpu0 = time.perf_counter(), time.process_time()

    def tick(t: float, done: int, total: int) -> None:
        # wall time at the end of each round, folded into simulated hours
        hour = int((t - 1e-9) // 3600.0)
        while len(by_hour) <= hour:  # an hour without rounds (nothing active) took no time
            if by_hour and case == "copter-25k":  # a long run says how far it got
                print(f"{case}: simulated hour {len(by_hour)} done after {by_hour[-1]:.0f} s wall, "
                      f"{done:,} of {total:,} jobs finished", file=sys.stderr, flush=True)
            by_hour.append(by_hour[-1] if by_hour else 0.0)
        by_hour[hour] = time.perf_counter() - start

    res = simulate(config, on_progress=tick)
    cpu = time.process_time() - cpu0
    wall = res.summary["sim_wall_s"]
    hourly = [b - a for a, b in zip([0.0, *by_hour[:-1]], by_hour, strict=True)]
    done = sum(1 for r in res.jobs if r.finish_s is not None)
    row = {"bench": "sim_speed", "case": case, "gpus": res.num_gpus, "jobs": len(res.jobs), "policy": res.label,
           "completed": done, "rounds": len(res.rounds), "sim_s": res.end_time_s, "wall_s": round(wall, 3),
           "sim_s_per_wall_s": round(res.end_time_s / wall, 1),
           # the process's CPU seconds: its wall time on a core of its own (the machine may be shared)
           "cpu_s": round(cpu, 3),
           "avg_jct_s": res.summary.get("avg_jct_s"), "makespan_s": res.summary.get("makespan_s"),
           "phase_s": {k: round(v, 3) for k, v in res.phase_s.items()},
           "policy_parts_s": policy_parts(res.rounds), "explain": config.explain,
           "explanations": len(res.explanations)}
    if case == "copter-25k":
        row["wall_s_by_hour"] = [round(h, 2) for h in hourly]
    if hours is not None:
        row["hours"] = hours
        if hourly and hours < COPTER_HOURS:
            row["projected_24h_wall_s"] = round(wall + hourly[-1] * (COPTER_HOURS - len(hourly)), 1)
    return row, json.loads(json.dumps(res.config_record(), default=str))


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
    ap.add_argument("--explain-overhead", action="store_true",
                    help="run each case with explanations off and on; the second row carries the ratio")
    ap.add_argument("--repeat", type=int, default=3, help="with --explain-overhead: runs of each setting (default 3)")
    ap.add_argument("--out", default=None, help="also write the measurements, with provenance, to this JSON file")
    args = ap.parse_args(argv)
    if args.hours is not None and not (0 < args.hours <= COPTER_HOURS):
        print(f"error: --hours must be in (0, {COPTER_HOURS:g}], got {args.hours:g}", file=sys.stderr)
        return 2
    cases = ["small"] if args.quick else (args.case or ["small", "big"])
    if args.hours is not None and "copter-25k" not in cases:
        print("error: --hours applies to --case copter-25k only", file=sys.stderr)
        return 2
    begin_measurements(args.out)
    configs = [c for case in cases for c in configs_for(case, args.hours)]
    if args.explain_overhead:
        configs = [(case, cfg.model_copy(update={"explain": on})) for case, cfg in configs
                   for _ in range(args.repeat) for on in (False, True)]
    rows, run_configs = [], []
    with progress_bar(len(configs), "sim_speed", unit="cases") as advance:
        for case, cfg in configs:
            row, record = measure(case, cfg, args.hours if case == "copter-25k" else None)
            rows.append(row)
            run_configs.append(record)
            advance()
    if args.explain_overhead:
        rows += explain_overhead(rows)
    for r in rows:
        if r["bench"] != "sim_speed":
            print(f"{r['case']}: explanations cost x{r['explain_ratio']} CPU, x{r['explain_wall_ratio']} wall "
                  f"(least of {r['runs']} runs each)", file=sys.stderr)
            continue
        print(f"{r['jobs']:>6} jobs on {r['gpus']:>5} GPUs, explanations {'on ' if r['explain'] else 'off'}: "
              f"{r['wall_s']:8.2f} s wall, "
              f"{r['sim_s_per_wall_s']:>10.0f} simulated s per wall s ({r['rounds']} rounds)", file=sys.stderr)
    finish_measurements(rows, args.out, "sim_speed", args, configs=run_configs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
