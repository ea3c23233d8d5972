"""``dlsched whatif --out DIR``: the report page ``dlsched report`` writes, with the what-if's tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_whatif(out_dir: str | Path, result: Any, *, force: bool = False) -> Path:
    """The simulated rows' report.html, summary.json, config.json and per-run tables (as ``compare --out``
    writes them), then ``whatif.json`` (measured, rows, fidelity, notes) and ``world.json`` (the fitted
    world) beside them."""
    from dlsched.sim.output import write_outputs

    folder = write_outputs(out_dir, result.runs, result.rows, force=force)
    (folder / "whatif.json").write_text(json.dumps(result.tables(), indent=1))
    (folder / "world.json").write_text(json.dumps(result.world, indent=1))
    return folder
