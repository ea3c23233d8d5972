"""Does a service's what-if predict the other policy? The demo workload run by a real service under sia and
under fifo, and each service's ``dlsched whatif`` asked for the policy it did not run.

Both services really run (``dlsched serve`` on ``ray-local-4``, the workload of ``tests/whatif``: the
shipped examples, rigid and adaptive, and a script that does not import dlsched). Each state is then
replayed under both policies in the world fitted to its own jobs' reports; the check is that each state's
what-if predicts the *other* service's measured average JCT within 20%, and the order of the two policies.
The results go to ``experiments/results/whatif_fidelity.json`` (docs/fidelity.md quotes them).

    python experiments/whatif_fidelity.py                 # two service runs, then the what-ifs
    python experiments/whatif_fidelity.py --reuse DIR     # what-ifs of the states a previous run left in DIR

The states are kept (their folder is in the result file, ``states``) with ``services.json`` beside them: the
code that ran each service and how long it took, so ``--reuse`` records who made the measurements it
replays. ``tables(data)`` renders the result file for docs/fidelity.md (``make results``).

Needs Ray and PyTorch; run it alone on the machine (``flock /tmp/dlsched-ray.lock`` on a shared one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "whatif"), str(ROOT / "tests" / "service")]
# the services and their workers are processes of their own: they run this checkout's code too, not whatever
# an editable install of dlsched in the environment points at
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
OUT = ROOT / "experiments" / "results" / "whatif_fidelity.json"
POLICIES = ("sia", "fifo")
TARGET = 0.20
SERVICES = "services.json"


def run_services(folder: Path) -> dict[str, Any]:
    """Both services, one after the other, each to the end of the workload; what ran them and for how long."""
    from whatif_workload import run_workload

    from dlsched.sim.about import provenance

    made: dict[str, Any] = {}
    for policy in POLICIES:
        t0 = time.monotonic()
        made[policy] = {**provenance(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        run_workload(folder / f"{policy}-state", policy, timeout_s=1800)
        made[policy]["wall_s"] = time.monotonic() - t0
        (folder / SERVICES).write_text(json.dumps(made, indent=1))
    return made


def run(folder: Path) -> dict[str, Any]:
    """Each state's what-if under both policies, and the checks: the other policy's measured average JCT
    within the target, and the order of the two."""
    from dlsched.replay.whatif import whatif

    measured: dict[str, dict[str, Any]] = {}
    predicted: dict[str, dict[str, dict[str, Any]]] = {}
    fidelity: dict[str, Any] = {}
    configs: list[dict[str, Any]] = []
    for policy in POLICIES:
        result = whatif(folder / f"{policy}-state", policies=list(POLICIES), workers=1)
        configs.extend(r.config_record() for r in result.runs)
        measured[policy] = result.measured
        predicted[policy] = {r["policy"]: r for r in result.rows}
        fidelity[policy] = {k: v for k, v in result.fidelity.items() if k != "jobs"}
    checks = []
    for ran, other in ((POLICIES[0], POLICIES[1]), (POLICIES[1], POLICIES[0])):
        guess = predicted[ran][other]["avg_jct_s"]
        err = guess / measured[other]["avg_jct_s"] - 1.0
        real_order = measured[ran]["avg_jct_s"] < measured[other]["avg_jct_s"]
        guess_order = predicted[ran][ran]["avg_jct_s"] < guess
        checks.append({"state": ran, "predicts": other, "predicted_avg_jct_s": guess,
                       "measured_avg_jct_s": measured[other]["avg_jct_s"], "rel_err": err,
                       "within_target": abs(err) <= TARGET, "order_right": real_order == guess_order,
                       "predicted_makespan_s": predicted[ran][other]["makespan_s"],
                       "measured_makespan_s": measured[other]["makespan_s"]})
    return {"target": TARGET, "measured": measured, "predicted": predicted, "fidelity": fidelity, "checks": checks,
            "configs": configs}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def tables(data: dict[str, Any]) -> dict[str, str]:
    """The checks (each state's what-if of the other policy against that policy's measurement) and each
    state's replay of its own policy (``experiments/results/whatif_fidelity.json``)."""
    from dlsched.sim.about import describe_provenance

    target = data["target"]
    lines = ["| state (ran) | predicts | predicted avg JCT | measured avg JCT | error | within "
             f"{100 * target:.0f}% | order of the two | predicted makespan | measured makespan |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in data["checks"]:
        lines.append(f"| {c['state']} | {c['predicts']} | {c['predicted_avg_jct_s']:.1f} s | "
                     f"{c['measured_avg_jct_s']:.1f} s | {_pct(c['rel_err'])} | "
                     f"{'yes' if c['within_target'] else '**no**'} | {'right' if c['order_right'] else '**wrong**'} | "
                     f"{c['predicted_makespan_s']:.1f} s | {c['measured_makespan_s']:.1f} s |")
    services = data.get("services") or {}
    ran = "; ".join(f"{p}: {describe_provenance(m)}, {m['wall_s'] / 60:.0f} min" for p, m in services.items()
                    if "wall_s" in m)
    if ran:
        lines += ["", f"Services ({ran}); what-ifs: {describe_provenance(data)}."]
    own = ["| state | replayed | avg JCT replayed | measured | error | makespan replayed | measured | error | "
           "per-job JCT error median | worst job |", "|---|---|---|---|---|---|---|---|---|---|"]
    for state, f in data["fidelity"].items():
        worst = f.get("job_jct_worst") or {}
        own.append(f"| {state} | {f['policy']} | {f['replayed_avg_jct_s']:.1f} s | {f['measured_avg_jct_s']:.1f} s | "
                   f"{_pct(f['avg_jct_rel_err'])} | {f['replayed_makespan_s']:.1f} s | "
                   f"{f['measured_makespan_s']:.1f} s | {_pct(f['makespan_rel_err'])} | "
                   f"{100 * (f['job_jct_median_abs_err'] or 0):.0f}% | {worst.get('job', '-')} "
                   f"{_pct(worst.get('rel_err'))} |")
    return {"checks": "\n".join(lines), "own": "\n".join(own)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reuse", type=Path, help="a folder holding sia-state/ and fifo-state/ from an earlier run")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    from dlsched.sim.about import provenance

    if args.reuse is not None:
        folder = args.reuse.resolve()
        services = json.loads((folder / SERVICES).read_text()) if (folder / SERVICES).is_file() else {}
    else:
        folder = Path(tempfile.mkdtemp(prefix="whatif-fidelity-"))
        services = run_services(folder)
    result = {**provenance(), "experiment": "whatif_fidelity", "states": str(folder), "services": services,
              **run(folder)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for c in result["checks"]:
        print(f"{c['state']} state predicts {c['predicts']}: {c['predicted_avg_jct_s']:.1f} s vs measured "
              f"{c['measured_avg_jct_s']:.1f} s ({c['rel_err'] * 100:+.1f}%), order "
              f"{'right' if c['order_right'] else 'wrong'}")
    return 0 if all(c["within_target"] and c["order_right"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
