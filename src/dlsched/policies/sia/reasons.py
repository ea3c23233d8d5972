"""What Sia weighed for one job in its last round: each configuration's goodput and value, and the terms of
the objective (the p-power and the restart factor), for explanations (:mod:`dlsched.policies.reasons`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlsched.policies.sia.configs import ConfigSet
from dlsched.policies.sia.problem import Options
from dlsched.solvers.assignment import AssignmentResult


def option_facts(cs: ConfigSet, opts: Options, result: AssignmentResult, job_id: str, *, p: float,
                 restart: float) -> dict[str, Any] | None:
    """The job's options best value first, the one the solver picked, and the deciding comparison."""
    gi = next((i for i, j in enumerate(opts.jobs) if j.job_id == job_id), None)
    if gi is None:
        return None
    own = np.nonzero(opts.job_of == gi)[0]
    chosen = int(result.choice[gi]) if gi < len(result.choice) else -1
    rows = sorted(own.tolist(), key=lambda o: -float(opts.value[o]))
    configs = [{"config": f"{int(opts.gpus[o])} x {cs.type_names[int(opts.type_idx[o])]}",
                "nodes": int(opts.nodes[o]), "goodput": round(float(opts.G[o]), 4),
                "value": round(float(opts.value[o]), 4), "chosen": o == chosen} for o in rows]
    facts: dict[str, Any] = {"configs": configs[:12], "p": p, "restart_factor": round(restart, 4)}
    holders = _holders(cs, opts, result, skip=gi)
    if chosen < 0:
        best = configs[0]["config"] if configs else "none"
        types = sorted({str(c["config"]).split(" x ")[1] for c in configs})
        taken = "; ".join(f"{t}: {holders.get(t, (0, []))[0]} of {int(cs.capacity[cs.type_names.index(t)])} "
                          f"held by {_names(holders.get(t, (0, []))[1])}" for t in types)
        facts["why"] = (f"the solver gave it none of its {len(configs)} configurations (best {best}): the GPUs "
                        f"of its types went to jobs of higher value in the cluster-wide objective (the sum of "
                        f"every job's value, p={p:g}): {taken}; restart factor {restart:.3g}")
        return facts
    pick = next(c for c in configs if c["chosen"])
    pick_type = str(pick["config"]).split(" x ")[1]
    other = next((c for c in configs if not c["chosen"] and str(c["config"]).split(" x ")[1] != pick_type), None)
    vs = ""
    if other is not None:
        vs = f" over {other['config']} (goodput {other['goodput']:.3g}, value {other['value']:.3g})"
        if float(str(other["value"])) > float(str(pick["value"])):  # a worse option for it: say what won
            otype = str(other["config"]).split(" x ")[1]
            count, names = holders.get(otype, (0, []))
            vs += (f": the {otype} GPUs served the cluster-wide objective (the sum of every job's value) "
                   f"better with {_names(names)} ({count} of them), so it took its best option on the GPUs left")
    facts["why"] = (f"Sia chose {pick['config']} (normalised goodput {pick['goodput']:.3g}, value "
                    f"{pick['value']:.3g}){vs}; p={p:g}, restart factor {restart:.3g}")
    return facts


def _holders(cs: ConfigSet, opts: Options, result: AssignmentResult, *, skip: int) -> dict[str, tuple[int, list[str]]]:
    """Per GPU type: how many GPUs the solver gave the other jobs, and which jobs."""
    out: dict[str, tuple[int, list[str]]] = {}
    for g, job in enumerate(opts.jobs):
        choice = int(result.choice[g]) if g < len(result.choice) else -1
        if g == skip or choice < 0:
            continue
        t = cs.type_names[int(opts.type_idx[choice])]
        count, names = out.get(t, (0, []))
        out[t] = (count + int(opts.gpus[choice]), [*names, job.job_id])
    return out


def _names(jobs: list[str]) -> str:
    if not jobs:
        return "no job"
    return ", ".join(jobs[:4]) + (f" and {len(jobs) - 4} more" if len(jobs) > 4 else "")
