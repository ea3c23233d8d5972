"""Simulator fidelity against the runtime: real jobs on a local Ray cluster, then the same trace simulated.

A small trace of real PyTorch jobs (the runtime's MLP, ResNet-style CNN and small transformer, each stopping
after a number of epochs) runs on ``ray-local-4`` (four emulated nodes of t4, t4, rtx and a100; each step
stretched by the type's measured relative speed) under Sia and under FIFO with ``dlsched run``'s machinery.
Then a world is fitted from what the jobs themselves reported during those runs, and nothing else:

* step times: the reported step time per placement and local batch (Sia's profiling included) fit, per
  model, the simulator's step-time model (``dlsched.world.throughput``: compute ``alpha_c + beta_c * b``,
  sync ``alpha_r + beta_r * (K-2)`` in a node and ``alpha_n + beta_n * (K-2)`` across nodes, no overlap as the
  runtime all-reduces after the backward pass), times one speed factor per GPU type shared by every model;
* per-round overheads: a runtime job starts its workers' training afresh every round (data, model and
  checkpoint loaded, process group formed), so a round holds fewer steps than its wall-clock length. The ratio
  of the rounds' lengths to the steps' time in them (reported per round) stretches the fitted step times;
* gradient statistics: the reported ``grad_sqr`` and ``grad_var`` (medians per job) give the statistical
  efficiency that the simulated job reports and chooses its batch by, as the real job does;
* work: the job's request (its epochs over its data set), counted in samples, as the runtime counts it.

The simulator learns nothing from the real runs' completion times. The same trace is then simulated under
the same presets with that world (``--set world.profiles=FILE``), and the real and simulated average JCT and
makespan are written to ``experiments/results/runtime_fidelity.json`` (``make results`` puts the table in
docs/fidelity.md). The target is agreement within 15%.

    python experiments/runtime_fidelity.py               # scaled down: 8 jobs, about 10 minutes per policy
    python experiments/runtime_fidelity.py --scale full  # the issue's size: 12 jobs over about 30 minutes
    python experiments/runtime_fidelity.py --reuse-real  # refit and resimulate the recorded real runs
    python experiments/runtime_fidelity.py --scale tiny --out experiments/results/runtime_fidelity_tiny.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "runtime_fidelity.json"
POLICIES = ("sia", "fifo")
ROUND_S = 20.0
TARGET = 0.15
#: Jobs per scale: (model, GPUs requested, samples, epochs, initial batch, largest batch); submissions are
#: spread evenly over ``SPREAD_S``.
_MIX: tuple[tuple[str, int, int, float, int, int], ...] = (
    ("mlp", 2, 32768, 12, 64, 512),
    ("resnet", 2, 8192, 16, 32, 256),
    ("transformer", 1, 8192, 16, 32, 256),
    ("mlp", 1, 32768, 10, 64, 512),
    ("resnet", 1, 8192, 12, 32, 256),
    ("transformer", 2, 8192, 20, 32, 256),
)
SCALES = {"tiny": (4, 30.0, 0.5), "small": (8, 120.0, 1.0), "full": (12, 900.0, 3.0)}


def fidelity_trace(scale: str) -> dict[str, Any]:
    """The runtime trace (``jobs: [...]``) of a scale: the mix repeated, arrivals evenly spread."""
    count, spread_s, work = SCALES[scale]
    jobs = []
    for i in range(count):
        model, gpus, samples, epochs, b0, bmax = _MIX[i % len(_MIX)]
        jobs.append({"job_id": f"{model}-{i}", "submit_s": round(spread_s * i / max(1, count - 1), 1),
                     "model": model, "gpus": gpus, "samples": samples, "epochs": epochs * work,
                     "init_batch": b0, "max_batch": bmax, "seed": i})
    return {"jobs": jobs}


def _obs(o: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(o)


def run_real(policy: str, trace_file: Path, ckpt: Path) -> dict[str, Any]:
    """One real run on a local Ray cluster of ray-local-4's emulated nodes: its summary and what every job
    reported (step times, gradient statistics, per-round timing)."""
    from dlsched.runtime.driver import RuntimeOptions
    from dlsched.runtime.session import run

    options = RuntimeOptions(round_s=ROUND_S, round_start="boundary", checkpoint_dir=ckpt)
    summary, result = run("ray-local-4", str(trace_file), policy, options=options)
    return {
        "summary": {k: summary[k] for k in ("jobs", "completed", "avg_jct_s", "makespan_s", "restarts_per_job")
                    if k in summary},
        "wall_s": result.wall_s, "rounds": len(result.rounds), "round_start": options.round_start,
        "round_starts_s": [r.time_s for r in result.rounds],
        "jobs": [{"job_id": r.job_id, "submit_s": r.submit_s, "start_s": r.start_s, "finish_s": r.finish_s,
                  "restarts": r.restarts} for r in result.jobs],
        "throughput_obs": {k: [_obs(o) for o in v] for k, v in result.throughput_obs.items()},
        "gradient_obs": {k: [_obs(o) for o in v] for k, v in result.gradient_obs.items()},
        "reports": result.reports, "failures": result.failures, "gpu_emulation": summary["gpu_emulation"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--reuse-real", action="store_true",
                        help="refit and resimulate the real runs recorded in the result file (--out)")
    parser.add_argument("--fit-scope", choices=("pooled", "per-run"), default="per-run",
                        help="each policy's world fitted to its own real run (per-run: the shared machine's load "
                             "during that run is part of its world) or one world to every run (pooled)")
    parser.add_argument("--overhead", choices=("fixed", "stretch"), default="fixed",
                        help="how the runtime's per-round costs enter the fitted world (dlsched.runtime.fit)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from dlsched.runtime.fit import fit_and_simulate
    from dlsched.sim.about import provenance

    policies = [p for p in args.policies.split(",") if p]
    if args.reuse_real:
        previous = json.loads(args.out.read_text())
        real, trace, scale = previous["real"], previous["trace"], previous["scale"]
        # the code that made the real runs (a file written before this was recorded: its own provenance)
        real_made_by = previous.get("real_provenance") or {
            k: previous[k] for k in ("commit", "dirty", "diff_sha", "dlsched_version") if k in previous}
        if not any(p in real for p in policies):
            raise SystemExit(f"error: {args.out}: no real run of {', '.join(policies)} to reuse")
    else:
        scale, trace, real = args.scale, fidelity_trace(args.scale), {}
        real_made_by = provenance()
        with tempfile.TemporaryDirectory(prefix="dlsched-fidelity-") as tmp:
            import yaml

            trace_file = Path(tmp) / "trace.yaml"
            trace_file.write_text(yaml.safe_dump(trace))
            for policy in policies:
                t0 = time.monotonic()
                real[policy] = run_real(policy, trace_file, Path(tmp) / f"ckpt-{policy}")
                s = real[policy]["summary"]
                print(f"real {policy}: {s['completed']}/{s['jobs']} jobs, avg JCT {s['avg_jct_s']:.0f} s, "
                      f"makespan {s['makespan_s']:.0f} s ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
                # kept after every policy, so an interrupted run can be refitted (--reuse-real)
                args.out.write_text(json.dumps({**real_made_by, "experiment": "runtime_fidelity", "scale": scale,
                                                "trace": trace, "real": real, "real_provenance": real_made_by},
                                               indent=1) + "\n")
    # worlds from the real runs' reports; a policy whose real run is missing is simulated only
    fitted = fit_and_simulate(trace, {p: real[p] for p in policies if p in real}, policies, ROUND_S,
                              overhead_mode=args.overhead, fit_scope=args.fit_scope)
    configs = [fitted["simulated"][p]["config"] for p in policies]
    result: dict[str, Any] = {**provenance(configs), "experiment": "runtime_fidelity", "scale": scale,
                              "round_s": ROUND_S, "target": TARGET, "trace": trace, "real": real,
                              "real_provenance": real_made_by, **fitted}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(tables(result)["comparison"])
    return 0


def _fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def tables(data: dict[str, Any]) -> dict[str, str]:
    """Real against simulated average JCT and makespan, and what the fit found
    (``experiments/results/runtime_fidelity.json``)."""
    names = {"avg_jct_s": "avg JCT (s)", "makespan_s": "makespan (s)"}
    lines = ["| policy | metric | real | simulated | sim vs real |", "|---|---|---|---|---|"]
    for row in data["comparison"]:
        diff = row["rel_diff"]
        mark = "" if diff is None or abs(diff) <= data["target"] else " **"
        lines.append(f"| {row['policy']} | {names[row['metric']]} | {_fmt_s(row['real'])} | "
                     f"{_fmt_s(row['simulated'])} | {'-' if diff is None else f'{100 * diff:+.0f}%'}{mark} |")
    real = data["real"]
    done = ", ".join(f"{p} {r['summary']['completed']}/{r['summary']['jobs']} jobs in {r['wall_s']:.0f} s "
                     f"({r['rounds']} rounds)" for p, r in real.items())
    from dlsched.sim.about import describe_provenance

    lines += ["", f"Real runs ({data['scale']} scale, {len(data['trace']['jobs'])} jobs, rounds of "
                  f"{data['round_s']:.0f} s; {describe_provenance(data['real_provenance'])}): {done}."]
    fit = data["profiles"]["fit"]
    quality = "; ".join(f"{m} {q['rows']} rows, median error {100 * q['median_rel_err']:.0f}%, p90 "
                        f"{100 * q['p90_rel_err']:.0f}%" for m, q in fit["models"].items())
    factors = ", ".join(f"{t} {f:.2f}" for t, f in sorted(fit["type_factor"].items(), key=lambda kv: kv[1]))
    fitted = [f"Step-time fit: {quality}.", f"Fitted time factor per GPU type (reference {fit['reference_type']}): "
              f"{factors}."]
    if fit.get("overhead_mode", "stretch") == "stretch":
        overhead = ", ".join(f"{m} {f:.2f}" for m, f in sorted(fit["round_overhead"].items()))
        fitted.append(f"Per-round costs as a stretch of the step time (round length over the time of its "
                      f"steps): {overhead}.")
    else:
        overhead = ", ".join(f"{m} {o['restart_delay_s']:.1f} s / {o['round_overhead_s']:.1f} s"
                             for m, o in sorted(fit["fixed_overhead"].items()))
        fitted.append(f"Per-round costs as fixed times (first round / every later round, median time held "
                      f"without stepping): {overhead}; simulated rounds of {data['sim_round_s']:.1f} s, the real "
                      f"runs' average.")
    scope = data.get("fit_scope", "pooled")
    if scope == "per-run":
        own = "; ".join(f"{p}'s run: " + ", ".join(f"{t} {f:.2f}" for t, f in sorted(
            prof["fit"]["type_factor"].items(), key=lambda kv: kv[1])) for p, prof in data["profiles_per_run"].items())
        fitted.append(f"Each policy is simulated in a world fitted to its own run's reports (`--fit-scope per-run`); "
                      f"the figures above are of the world fitted to all runs together. Time factors per GPU type "
                      f"fitted to each run alone: {own}.")
    else:
        fitted.append("Every policy is simulated in the one world fitted to all runs (`--fit-scope pooled`).")
    return {"comparison": "\n".join(lines), "fit": "\n".join(fitted)}


if __name__ == "__main__":
    raise SystemExit(main())
