"""``dlsched clusters``: the cluster presets a run may name, and the service's own (``ray-local-4``).

``for`` says which commands take the cluster: every preset is simulated, and ``dlsched run`` and
``dlsched serve`` emulate it on Ray; ``ray-local-4``, the runtime's built-in cluster (and ``dlsched serve``'s
default), is small enough for one machine and is not a simulation preset.
"""

from __future__ import annotations

from dlsched.cli.common import Format, FormatOpt, app, out, print_json_lines


@app.command()
def clusters(fmt: FormatOpt = Format.table) -> None:
    """List the cluster presets (simulate, run, serve) and the service's built-in ones (run, serve)."""
    from rich.table import Table

    from dlsched.clusters import preset_descriptions
    from dlsched.runtime.workload import BUILTIN_CLUSTERS

    rows = [{"name": n, "gpus": c.num_gpus, "layout": c.describe(), "variability": c.variability, "description": d,
             "for": "simulate, run, serve"} for n, d, c in preset_descriptions()]
    for name, described in BUILTIN_CLUSTERS.items():
        c = described.build()
        rows.append({"name": name, "gpus": c.num_gpus, "layout": c.describe(), "variability": c.variability,
                     "description": described.description, "for": "run, serve"})
    if fmt is Format.json:
        print_json_lines(rows)
        return
    table = Table()
    for col in ("name", "gpus", "layout", "variability", "for", "description"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["name"]), str(r["gpus"]), str(r["layout"]), str(r["variability"] or "-"), str(r["for"]),
                      str(r["description"]))
    out.print(table)
