"""``dlsched sweep CONFIG.yaml``: a grid of simulations as Ray tasks, resumable, gathered into one report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import Format, FormatOpt, WideOpt, app, guard, note, print_summaries
from dlsched.cli.run_options import DataDirOpt, WindowEndOpt, WindowStartOpt
from dlsched.core import InputError
from dlsched.progress import progress_bar


@app.command()
def sweep(
    config: Annotated[Path, typer.Argument(help="Sweep YAML: cluster, presets, traces, seeds, tunables, run.")],
    out_dir: Annotated[str | None, typer.Option("--out", help="Folder for the cells' results, results.csv, "
                                                "summary.json and report.md [default: sweep-<CONFIG name>]. "
                                                "Rerunning with the same folder skips finished cells.")] = None,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster to run on (ray://host:port or "
                                                "host:port) [default: start Ray on this machine].")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="CPUs the local Ray uses (default: all); "
                                                "not with --address.")] = None,
    data_dir: DataDirOpt = None,
    window_start: WindowStartOpt = None,
    window_end: WindowEndOpt = None,
    wide: WideOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run a grid of simulations (presets x traces x seeds x tunables) on Ray (else local processes) and gather
    one table."""

    def go() -> None:
        from dlsched.sim.about import provenance
        from dlsched.sim.run import prepare, resolve_data_dir
        from dlsched.sweep import report
        from dlsched.sweep.config import cells as grid_cells
        from dlsched.sweep.config import load_sweep
        from dlsched.sweep.execute import import_ray, ray_available, run_cells, run_cells_locally
        from dlsched.sweep.store import CellStore

        if workers is not None and workers < 1:
            raise InputError(f"--workers must be at least 1, got {workers}", field="workers")
        if workers is not None and address is not None:
            raise InputError("--workers sets the local Ray's CPUs; with --address the cluster decides",
                             field="workers")
        spec = load_sweep(config)
        window = {k: v for k, v in (("window_start", window_start), ("window_end", window_end)) if v is not None}
        if window:  # the flags measure every cell over the same window, over what the file's run: says
            spec = spec.model_copy(update={"run": {**spec.run, **window}})
        cells = grid_cells(spec, data_dir=resolve_data_dir(data_dir), source=str(config))
        seen: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
        for cell in cells:  # bad presets, traces or tunables fail now, before any task starts
            if (cell.preset, cell.trace, cell.tunables) not in seen:
                seen.add((cell.preset, cell.trace, cell.tunables))
                try:
                    prepare(cell.config)
                except InputError as exc:
                    raise InputError(f"cell {cell.label}: {exc}", source=str(config)) from None
        folder = Path(out_dir or f"sweep-{config.stem}").expanduser()
        store = CellStore(folder)
        done = sum(store.done(c) for c in cells)
        local = address is None and not ray_available()
        if done < len(cells) and not local:
            import_ray()  # --address needs Ray: say how to install it
        if local and done < len(cells):
            note("Ray is not installed: running the cells on local processes")
        if done:
            note(f"{done} of {len(cells)} cells already finished in {folder}/; running the other "
                 f"{len(cells) - done}")
        t0 = time.perf_counter()
        with progress_bar(len(cells) - done, "sweep", unit="cells") as advance:
            if local:
                run_cells_locally(cells, store, workers=workers, on_cell=lambda c, r: advance())
            else:
                run_cells(cells, store, address=address, workers=workers, on_cell=lambda c, r: advance())
        rows = report.write(folder, spec, cells, store, provenance())
        note(f"{len(cells)} cells ({len(cells) - done} run now) in {time.perf_counter() - t0:.1f} s; wrote "
             f"{folder}/ (results.csv, summary.json, report.md, cells/)")
        from dlsched.sim.window import describe

        parts = [f"sweep {config.name} on {spec.cluster}",
                 describe(spec.run.get("window_start"), spec.run.get("window_end")),
                 "tunables per row" if spec.tunables else None]
        print_summaries(rows, fmt, header=" | ".join(p for p in parts if p), wide=wide)

    guard(go)
