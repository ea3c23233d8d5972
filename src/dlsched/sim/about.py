"""What was run, in one place: cluster, trace, policies with their stages, seeds and the dlsched version.

A table or a report read a week later is only worth something if it says what produced it. The CLI prints
:func:`header_line` above every summary table, ``summary.json`` carries :func:`row_fields` in every row and
``report.html`` opens with the header, all built from the runs' resolved configurations here, so the three
never disagree.
:func:`provenance` is the other half, for result files: the commit, whether the tree was dirty, the dlsched
version and the runs' configurations, so that every number written to ``experiments/results/`` names the
code that made it (and a cached result is reused only under the same code, :func:`same_code`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlsched.sim.run import RunRecords

#: Seeds a run has, in the order people read them, with the name a header gives each.
SEED_FIELDS: tuple[tuple[str, str], ...] = (("seed", "seed"), ("world_seed", "world seed"),
                                            ("trace_seed", "trace seed"))


def _version() -> str:
    from dlsched.version import __version__

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


def settings_of(run: RunRecords) -> dict[str, str]:
    """The policy tunables the run set (``--set objective=jct``), as given."""
    return dict(run.config.settings)


def world_options_of(run: RunRecords) -> dict[str, Any]:
    """The world options the run plays that differ from the defaults (its calibration is named apart, and a
    straggler-episode setting only when it differs from what its GPU speeds imply)."""
    import dataclasses

    from dlsched.world.base import WorldConfig

    world = run.config.world_config()
    implied = dataclasses.replace(world, straggler_episodes=None).episodes
    out: dict[str, Any] = {}
    for f in dataclasses.fields(WorldConfig):
        value = getattr(world, f.name)
        if f.name == "calibration" or (f.name == "straggler_episodes" and value == implied):
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        if value != default:
            out[f.name] = value
    return out


def window_of(run: RunRecords) -> str | None:
    """The measurement window (``window 100j-1100j``), or None when the summary covers every job."""
    from dlsched.sim.window import describe

    return describe(run.config.window_start, run.config.window_end)


def _pairs(values: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items())


def row_fields(runs: Sequence[RunRecords]) -> dict[str, Any]:
    """Fields a summary row carries about the runs it summarises (one policy, one or several seeds)."""
    first = runs[0]
    return {"scheduler": first.scheduler, "dlsched_version": _version(),
            "calibration": ", ".join(sorted({calibration_of(r) for r in runs})),
            **{f"{key}_values": sorted({v for r in runs if (v := seeds_of(r)[key]) is not None})
               for key, _ in SEED_FIELDS},
            "seeds_varied": seeds_varied(runs), "settings": settings_of(first),
            "world_options": world_options_of(first), "window": window_of(first)}


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
        "settings": {label: _pairs(settings_of(r)) for r in runs if (label := r.label)},
        "world_options": list(dict.fromkeys(_pairs(world_options_of(r)) for r in runs)),
        "windows": list(dict.fromkeys(w for r in runs if (w := window_of(r)))),
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
    if any(about.get("world_options") or []):
        parts.append(f"world {'; '.join(w or 'defaults' for w in about['world_options'])}")
    parts += list(about.get("windows") or [])
    settings = about.get("settings") or {}
    parts += [f"policy {label} {stages}" + (f" set {settings[label]}" if settings.get(label) else "")
              for label, stages in about["policies"].items()]
    parts.append("stages: admission/ordering/allocation/placement/coordination")
    return " | ".join(parts)


# --- Provenance: which code produced a result --------------------------------------------------------------

#: Paths of a checkout whose uncommitted changes change what a run computes. Results (``experiments/results``)
#: and the docs generated from them are outputs: writing them while experiments run must not mark the tree dirty.
CODE_PATHS: tuple[str, ...] = ("src", "experiments", "benchmarks", "scripts", "pyproject.toml")
OUTPUT_PATHS: tuple[str, ...] = ("experiments/results",)


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def code_state() -> dict[str, Any]:
    """The git state of the checkout dlsched is imported from: ``commit`` (HEAD's sha, None outside a git
    checkout), ``dirty`` (uncommitted changes under :data:`CODE_PATHS`, outputs excluded) and, when dirty,
    ``diff_sha`` (a hash of those changes, untracked files included, so two runs from the same uncommitted
    code can be told from runs of other uncommitted code).

    Computed once per process: a process runs the code it imported at its start, whatever happens to the
    checkout afterwards.
    """
    here = Path(__file__).resolve().parent
    top = _git(here, "rev-parse", "--show-toplevel")
    head = _git(here, "rev-parse", "HEAD")
    if not top or not head:
        return {"commit": None, "dirty": None}
    root = Path(top.strip())
    spec = ["--", *CODE_PATHS, *(f":(exclude){p}" for p in OUTPUT_PATHS)]
    status = _git(root, "status", "--porcelain", "--untracked-files=all", *spec)
    if status is None:
        return {"commit": head.strip(), "dirty": None}
    state: dict[str, Any] = {"commit": head.strip(), "dirty": bool(status.strip())}
    if state["dirty"]:
        digest = hashlib.sha1((_git(root, "diff", "HEAD", "--binary", *spec) or "").encode())
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", *spec) or ""
        for name in sorted(untracked.split()):
            digest.update(name.encode())
            try:
                digest.update((root / name).read_bytes())
            except OSError:
                pass
        state["diff_sha"] = digest.hexdigest()
    return state


def provenance(configs: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The fields every result file starts with: ``commit``, ``dirty`` (and ``diff_sha`` when dirty),
    ``dlsched_version`` and, given, ``configs`` (the full resolved configuration of each run the file holds,
    as :meth:`~dlsched.sim.run.RunRecords.config_record` gives it)."""
    out = {**code_state(), "dlsched_version": _version()}
    if configs is not None:
        out["configs"] = list(configs)
    return out


def write_run_results(out: Any, experiment: str, records: Sequence[Any], **fields: Any) -> dict[str, Any]:
    """An experiment's result file from its simulated runs (:class:`~dlsched.sim.run.RunRecords`): the
    provenance with every run's configuration, ``experiment``, the experiment's own ``fields``, the summed
    ``wall_s`` and per run its summary, wall time and whether it completed. Written atomically; returned."""
    import json
    from pathlib import Path

    from dlsched.outputs import atomic_file

    payload = {**provenance([r.config_record() for r in records]), "experiment": experiment, **fields,
               "wall_s": sum(r.wall_s for r in records),
               "runs": [{"summary": r.summary, "wall_s": r.wall_s, "complete": r.complete} for r in records]}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out) as tmp:
        tmp.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return payload


def begin_measurements(out: Any) -> None:
    """How a benchmark starts: a bad ``--out`` is refused before anything is measured, and the code's state
    is read now (:func:`code_state` is computed once per process), so the result names the code that ran."""
    from dlsched.outputs import check_output_file

    if out:
        check_output_file(out, "--out")
    provenance()


def finish_measurements(rows: Sequence[dict[str, Any]], out: Any, experiment: str, args: Any,
                        configs: Sequence[dict[str, Any]] | None = None) -> None:
    """How a benchmark ends: one JSON object per line per measurement on stdout (for programs to read) and,
    when ``out`` is a path, a result file with the provenance, the arguments and the measurements (``runs``),
    which ``make results`` renders. A benchmark that runs simulations passes their ``configs``
    (:meth:`~dlsched.sim.run.RunRecords.config_record`, one per run), recorded as every experiment does."""
    import json

    from dlsched.outputs import atomic_file

    for r in rows:
        print(json.dumps(r))
    if out:
        payload = {**provenance(configs), "experiment": experiment, "args": vars(args), "runs": list(rows)}
        with atomic_file(out) as tmp:
            tmp.write_text(json.dumps(payload, indent=1) + "\n")


def same_code(recorded: dict[str, Any]) -> bool:
    """Whether a result recorded ``recorded`` (its provenance fields) under the code running now.

    Commit and dlsched version must match. A result from uncommitted code matches only the same uncommitted
    changes (``diff_sha``), and a result from a clean commit does not match a dirty tree: either way the
    code differed. Outside a git checkout nothing matches, since nothing tells two versions of the code apart.
    """
    now = provenance()
    if now["commit"] is None or now["dirty"] is None:
        return False
    keys = ("commit", "dirty", "diff_sha", "dlsched_version")
    return all(recorded.get(k) == now.get(k) for k in keys)


def describe_provenance(recorded: dict[str, Any]) -> str:
    """``commit 1a2b3c4``, ``commit 1a2b3c4 with uncommitted changes``, or ``commit not recorded``."""
    commit = recorded.get("commit")
    if not commit:
        return "commit not recorded"
    return f"commit {str(commit)[:7]}" + (" with uncommitted changes" if recorded.get("dirty") else "")
