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
    if chosen < 0:
        best = configs[0]["config"] if configs else "none"
        facts["why"] = (f"the solver gave it none of its {len(configs)} configurations (best {best}) under "
                        f"the GPUs left, p={p:g}, restart factor {restart:.3g}")
        return facts
    pick = next(c for c in configs if c["chosen"])
    pick_type = str(pick["config"]).split(" x ")[1]
    other = next((c for c in configs if not c["chosen"] and str(c["config"]).split(" x ")[1] != pick_type), None)
    vs = (f" over {other['config']} (goodput {other['goodput']:.3g}, value {other['value']:.3g})"
          if other is not None else "")
    facts["why"] = (f"Sia chose {pick['config']} (normalised goodput {pick['goodput']:.3g}, value "
                    f"{pick['value']:.3g}){vs}; p={p:g}, restart factor {restart:.3g}")
    return facts
