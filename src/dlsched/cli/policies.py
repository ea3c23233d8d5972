"""``dlsched policies``: every registered scheduler, its stages and tunables, and the world options."""

from __future__ import annotations

from typing import Any

from dlsched.cli import Format, FormatOpt, app, out, print_json_lines


@app.command()
def policies(fmt: FormatOpt = Format.table) -> None:
    """List every registered scheduler with its stages, tunables and defaults."""
    from rich.table import Table

    from dlsched.policies import SCHEDULERS, scheduler_tunables
    from dlsched.policies.registry import ORDERINGS, PLACEMENTS
    from dlsched.sim.config import ENGINE_KEYS, WorldOptions

    rows = []
    for name, entry in sorted(SCHEDULERS.items()):
        rows.append({"name": name, "description": entry.description, "ordering": entry.ordering,
                     "allocation": entry.allocation, "placement": entry.placement, "round_s": entry.round_s,
                     "tunables": {k: _jsonable(v) for k, v in scheduler_tunables(name).items()}})
    if fmt is Format.json:
        print_json_lines(rows)
        return
    table = Table(title="schedulers")
    for col in ("name", "stages", "round s", "tunables (defaults)", "description"):
        table.add_column(col)
    for r in rows:
        stages = " / ".join(x for x in (r["ordering"], r["allocation"], r["placement"]) if x) or "-"
        tun = ", ".join(f"{k}={v}" for k, v in r["tunables"].items()) or "-"
        table.add_row(r["name"], stages, f"{r['round_s']:g}", tun, r["description"])
    out.print(table)
    out.print("orderings: " + ", ".join(sorted(ORDERINGS)))
    out.print("placements: " + ", ".join(sorted(PLACEMENTS)))
    world = ", ".join(f"{k}={_jsonable(f.default)}" for k, f in WorldOptions.model_fields.items())
    out.print(f"world options (--set world.KEY=V): {world}; engine (--set): {', '.join(ENGINE_KEYS)}")


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v
