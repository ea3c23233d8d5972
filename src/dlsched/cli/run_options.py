"""The flags that describe a run, shared by ``simulate`` and ``compare``, and how they become a RunConfig.

Numeric flags are taken as text and checked by the RunConfig, like the same fields in a config file, so a
bad value (``--seed 1.5``, ``--round-s nan``) is refused in one place with one line that names the field and
its allowed range. Every flag defaults to "not given" so that, with ``--config FILE``, exactly the flags on the command line
override the file's fields. ``--set key=value`` pairs are routed by key: world options (``world.KEY`` or a
bare world key such as ``locality_penalty``), engine options (``max_time_s``, ``stall_rounds``, ``charge_policy_time``), and policy
tunables (everything else).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dlsched.core import InputError

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="Replay a saved config.json (from --out); flags given as well override its fields.")]
ClusterOpt = Annotated[str | None, typer.Option("--cluster", help="Preset name or cluster YAML file "
                                                "[default: sia-hetero-64].")]
TraceOpt = Annotated[str | None, typer.Option("--trace", help="Named trace (sia-philly:1, pal-philly:1, "
                                              "synthetic:rate=20,hours=8,seed=1, ...) or a trace file "
                                              "[default: synthetic:rate=80,hours=4,seed=1].")]
TraceSeedOpt = Annotated[str | None, typer.Option("--trace-seed", metavar="INTEGER", help="Seed of a generated trace that names "
                                                  "none, and of TunedJobs (@tuned).")]
JobsOpt = Annotated[str | None, typer.Option("--jobs", metavar="INTEGER", help="Use only the first N jobs of the trace.")]
OrderingOpt = Annotated[str | None, typer.Option("--ordering", help="Override the policy's ordering stage.")]
PlacementOpt = Annotated[str | None, typer.Option("--placement", help="Override the policy's placement stage.")]
AllocationOpt = Annotated[str | None, typer.Option("--allocation", help="Override the policy's allocation stage.")]
AdmissionOpt = Annotated[str | None, typer.Option("--admission", help="Override the policy's admission stage.")]
CoordinationOpt = Annotated[str | None, typer.Option("--coordination", "--coordinator",
                                                     help="Override the policy's coordination stage.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="key=value: a policy tunable, a world option "
                                                  "(world.KEY or e.g. locality_penalty) or an engine limit "
                                                  "(max_time_s, stall_rounds) or a finish-time fairness "
                                                  "reading (ftf.share, ftf.combine, ftf.isolated); repeatable.")]
SeedOpt = Annotated[str | None, typer.Option("--seed", metavar="INTEGER", help="Seed of the scheduler's and engine's random "
                                             "choices, and of the world's unless --world-seed [default: 0].")]
WorldSeedOpt = Annotated[str | None, typer.Option("--world-seed", metavar="INTEGER", help="Seed of the world's draws (per-GPU "
                                                  "variability) [default: --seed].")]
RoundOpt = Annotated[str | None, typer.Option("--round-s", metavar="SECONDS", help="Scheduling round length in seconds "
                                                "[default: the policy's own, 60 s; 360 s for gavel, pal, "
                                                "pm-first].")]
WindowStartOpt = Annotated[str | None, typer.Option("--window-start", metavar="BOUND", help="Measure only jobs "
                                                    "submitted from here on: a job index (100j) or a time "
                                                    "since the trace's start (2h, 90m, 3600s).")]
WindowEndOpt = Annotated[str | None, typer.Option("--window-end", metavar="BOUND", help="Measure only jobs "
                                                  "submitted before this: 1100j or 6h (the window is "
                                                  "[start, end)).")]
MaxTimeOpt = Annotated[str | None, typer.Option("--max-time-s", metavar="SECONDS", help="Stop at this simulated time.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Reuse an --out folder holding an earlier run's results: "
                                        "they are removed first, so old and new never mix.")]
DataDirOpt = Annotated[str | None, typer.Option("--data-dir", help="Measured-data directory "
                                                "[default: $DLSCHED_DATA, else the user data directory dlsched data fetch fills].")]
QuotasOpt = Annotated[str | None, typer.Option("--quotas", metavar="FILE", help="Per-user and per-team GPU "
                                              "quota file (YAML, see docs/quotas.md), enforced by "
                                              "--admission quota.")]

#: Flags that name the scheduler: given with --config, the file's stages, tunables and label are dropped
#: (they belong to the file's scheduler) unless given as well.
_SCHEDULER_FLAGS = ("policy", "admission", "ordering", "allocation", "placement", "coordination")


def parse_set(pairs: list[str] | None) -> dict[str, str]:
    """``key=value`` strings from ``--set`` into a dict, rejecting malformed ones."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set expects key=value, got '{pair}'", field="set")
        out[key.strip()] = value.strip()
    return out


def build_config(config: Path | None, set_: list[str] | None, **flags: Any) -> Any:
    """The RunConfig from a saved file (if any) with the given flags on top; InputError names what is wrong."""
    from dlsched.sim.config import STAGES, RunConfig, load_config, route_settings

    base = load_config(config) if config is not None else {}
    given = {k: v for k, v in flags.items() if v is not None}
    if any(k in given for k in _SCHEDULER_FLAGS) and given.get("policy", base.get("policy")) != base.get("policy"):
        for key in (*STAGES, "settings", "label"):
            base.pop(key, None)
    elif any(k in given for k in _SCHEDULER_FLAGS):
        base.pop("label", None)
    if "seed" in given and "world_seed" not in given:
        base.pop("world_seed", None)  # a new --seed draws a new world too, as it does without --config
    routed = route_settings(parse_set(set_))
    top = {"settings", "world", *given, *routed}
    merged = {**base, **given}
    merged["settings"] = {**base.get("settings", {}), **routed.pop("settings")}
    merged["world"] = {**base.get("world", {}), **routed.pop("world")}
    if "ftf" in routed:
        merged["ftf"] = {**base.get("ftf", {}), **routed.pop("ftf")}
        top.add("ftf")
    merged.update(routed)
    try:
        return RunConfig.parse(merged)
    except InputError as exc:
        if config is None or (exc.field or "").split(".")[0] in top:
            raise
    return RunConfig.parse(merged, source=str(config))  # the bad field came from the file: name it

