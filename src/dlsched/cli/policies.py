"""``dlsched policies``: every registered scheduler, its five stages and their tunables, the stages that can
replace them, and the world options."""

from __future__ import annotations

from typing import Any

from dlsched.cli.common import Format, FormatOpt, app, out, print_json_lines
from dlsched.core.ranges import fmt_value


@app.command()
def policies(fmt: FormatOpt = Format.table) -> None:
    """List every registered scheduler with its stages, tunables and defaults."""
    from rich.table import Table

    from dlsched.policies import SCHEDULERS, describe_scheduler
    from dlsched.policies.registry import STAGE_KINDS, STAGES
    from dlsched.sim.config import ENGINE_KEYS, WorldOptions

    rows = [_jsonable(describe_scheduler(name)) for name in sorted(SCHEDULERS)]
    if fmt is Format.json:
        print_json_lines(rows)
        return
    table = Table(title="schedulers (admission / ordering / allocation / placement / coordination)")
    for col in ("name", "stages", "round s", "tunables (defaults)", "description"):
        table.add_column(col)
    for r in rows:
        stages = " / ".join(r["stages"][k]["name"] for k in STAGE_KINDS)
        tun = ", ".join(_tunable_text(s["name"], k, v, s["ranges"].get(k)) for s in r["stages"].values()
                        for k, v in s["tunables"].items()) or "-"
        table.add_row(r["name"], stages, f"{r['round_s']:g}", tun, r["description"])
    out.print(table)
    for kind in STAGE_KINDS:
        out.print(f"{kind} stages (--{kind}): " + ", ".join(sorted(STAGES[kind])))
    world = ", ".join(f"{k}={fmt_value(f.default)}" for k, f in WorldOptions.model_fields.items())
    out.print(f"world options (--set world.KEY=V): {world}; engine (--set): {', '.join(ENGINE_KEYS)}")


def _tunable_text(stage: str, key: str, default: Any, allowed: str | None) -> str:
    """``stage.key=default`` the way ``--set`` takes it (``3600,36000``, ``none``), with its range if any."""
    text = f"{stage}.{key}={fmt_value(default)}"
    return f"{text} {allowed}" if allowed else text


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return list(v) if isinstance(v, tuple) else v
