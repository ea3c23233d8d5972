"""What was run, in one place: cluster, trace, policies with their stages, seeds and the dlsched version.

A table or a report read a week later is only worth something if it says what produced it. The CLI prints
:func:`header_line` above every summary table, ``summary.json`` carries :func:`row_fields` in every row and
``report.html`` opens with the header, all built from the runs' resolved configurations here, so the three
never disagree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlsched.sim.run import RunRecords

#: Seeds a run has, in the order people read them, with the name a header gives each.
SEED_FIELDS: tuple[tuple[str, str], ...] = (("seed", "seed"), ("world_seed", "world seed"),
                                            ("trace_seed", "trace seed"))


def _version() -> str:
    from dlsched import __version__

    return __version__


def _span(values: Sequence[int]) -> str:
    """``0``, ``0-2`` for a run of consecutive integers, else ``0,3,7``."""
    vals = sorted(set(values))
    if len(vals) > 2 and vals == list(range(vals[0], vals[-1] + 1)):
        return f"{vals[0]}-{vals[-1]}"
    return ",".join(str(v) for v in vals)


def _stages(run: RunRecords) -> str:
    """The run's five stages from its resolved configuration, as ``all/fifo/sia/sia/none``."""
    from dlsched.sim.config import STAGES

    return "/".join(str(getattr(run.config, kind)) for kind in STAGES)


def calibration_of(run: RunRecords) -> str:
    """The world calibration profile the run played (``none``, ``sia-artifact``), from its resolved config."""
    return run.config.world_config().calibration


def seeds_of(run: RunRecords) -> dict[str, int | None]:
    """The run's seeds; ``trace_seed`` is the one its trace was drawn with (None for a fixed trace)."""
    from dlsched.sim.run_jobs import trace_seed_used

    cfg = run.config
    return {"seed": cfg.seed, "world_seed": cfg.world_seed, "trace_seed": trace_seed_used(cfg)}


def seeds_varied(runs: Sequence[RunRecords]) -> list[str]:
    """The seed fields that differ between ``runs`` of one policy (``seed``, ``world_seed``, ``trace_seed``)."""
    return [key for key, _ in SEED_FIELDS if len({seeds_of(r)[key] for r in runs}) > 1]


def row_fields(runs: Sequence[RunRecords]) -> dict[str, Any]:
    """Fields a summary row carries about the runs it summarises (one policy, one or several seeds)."""
    first = runs[0]
    return {"scheduler": first.scheduler, "dlsched_version": _version(),
            "calibration": ", ".join(sorted({calibration_of(r) for r in runs})),
            **{f"{key}_values": sorted({v for r in runs if (v := seeds_of(r)[key]) is not None})
               for key, _ in SEED_FIELDS},
            "seeds_varied": seeds_varied(runs)}


def describe_runs(runs: Sequence[RunRecords]) -> dict[str, Any]:
    """The runs as plain data: version, clusters, traces, policies (label -> stages) and each seed's values."""
    policies: dict[str, str] = {}
    for r in runs:
        policies.setdefault(r.label, _stages(r))
    traces = list(dict.fromkeys(r.trace_name for r in runs))
    if len(traces) > 1:  # one generated trace under several seeds: name it once, the seeds follow
        traces = list(dict.fromkeys(re.sub(r"seed=\d+", "seed=*", t) for t in traces))
    return {
        "dlsched_version": _version(),
        "clusters": list(dict.fromkeys(r.config.cluster for r in runs)),
        "traces": traces,
        "policies": policies,
        "calibrations": list(dict.fromkeys(calibration_of(r) for r in runs)),
        **{f"{key}_values": sorted({v for r in runs if (v := seeds_of(r)[key]) is not None})
           for key, _ in SEED_FIELDS},
    }


def wrap_header(line: str, width: int) -> str:
    """``line`` broken between its parts (after `` | `` or ``; ``) so that lines stay within ``width``
    where possible; continuation lines are indented."""
    pieces = re.split(r"(?<= \|) |(?<=;) ", line)
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece if not lines else "  " + piece)
    return "\n".join(lines)


def header_line(about: dict[str, Any]) -> str:
    """One line saying what was run (the line above a table, the top of a report)."""
    parts = [f"dlsched {about['dlsched_version']}", f"cluster {', '.join(about['clusters'])}",
             f"trace {', '.join(about['traces'])}"]
    if about.get("calibrations"):
        parts.append(f"world calibration {', '.join(about['calibrations'])}")
    for key, name in SEED_FIELDS:
        values = about.get(f"{key}_values") or []
        if key == "trace_seed" and len(values) < 2:
            continue  # one generated trace names its seed itself; a fixed trace has none
        if values and (key == "seed" or values != about.get("seed_values")):
            parts.append(f"{name}{'s' if len(values) > 1 else ''} {_span(values)}")
    parts += [f"policy {label} {stages}" for label, stages in about["policies"].items()]
    parts.append("stages: admission/ordering/allocation/placement/coordination")
    return " | ".join(parts)
