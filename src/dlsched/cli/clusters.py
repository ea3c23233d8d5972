"""``dlsched clusters``: the cluster presets a run may name."""

from __future__ import annotations

from dlsched.cli.common import Format, FormatOpt, app, out, print_json_lines


@app.command()
def clusters(fmt: FormatOpt = Format.table) -> None:
    """List the cluster presets."""
    from rich.table import Table

    from dlsched.clusters import preset_descriptions

    rows = [{"name": n, "gpus": c.num_gpus, "layout": c.describe(), "variability": c.variability, "description": d}
            for n, d, c in preset_descriptions()]
    if fmt is Format.json:
        print_json_lines(rows)
        return
    table = Table()
    for col in ("name", "gpus", "layout", "variability", "description"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["name"]), str(r["gpus"]), str(r["layout"]), str(r["variability"] or "-"),
                      str(r["description"]))
    out.print(table)
