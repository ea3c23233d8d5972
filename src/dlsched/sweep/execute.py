"""Running the cells of a sweep as Ray tasks, one simulation per task, on this machine or a Ray cluster, or,
when Ray is not installed, on this machine's processes (:func:`run_cells_locally`).

Ray is imported here only (the ``runtime`` extra); the simulator itself never needs it. Each task rebuilds
the cell's :class:`~dlsched.sim.config.RunConfig` from JSON and calls :func:`dlsched.sim.run.simulate`, the
function behind ``dlsched simulate``, and returns the summary and the resolved configuration. The driver
stores each result as it arrives, so stopping the sweep at any point loses at most the cells still running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dlsched.core import InputError
from dlsched.sweep.config import Cell
from dlsched.sweep.store import CellStore


def simulate_cell(config: dict[str, Any]) -> dict[str, Any]:
    """One cell, as a Ray task runs it: the summary and resolved configuration of ``simulate(config)``."""
    from dlsched.sim.about import row_fields
    from dlsched.sim.config import RunConfig
    from dlsched.sim.run import simulate

    records = simulate(RunConfig(**config))
    return {"summary": {**records.summary, **row_fields([records])}, "config": records.config_record(),
            "complete": records.complete}


def ray_available() -> bool:
    """Whether Ray can be imported (the ``runtime`` extra); without it a sweep runs on local processes."""
    try:
        import_ray()
    except InputError:
        return False
    return True


def run_cells_locally(cells: Sequence[Cell], store: CellStore, *, workers: int | None = None,
                      on_cell: Callable[[Cell, dict[str, Any]], None] | None = None) -> list[Cell]:
    """:func:`run_cells` on this machine's processes (concurrent.futures), for an install without Ray.

    The same cells, the same :func:`simulate_cell` and the same store, so a sweep started without Ray and
    resumed with it (or the other way round) skips what is stored either way.
    """
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from dlsched.sim.run import cpu_count

    todo = [c for c in cells if not store.done(c)]
    if not todo:
        return []
    ran: list[Cell] = []
    with ProcessPoolExecutor(max_workers=max(1, min(workers or cpu_count(), len(todo)))) as pool:
        pending = {pool.submit(simulate_cell, c.payload): c for c in todo}
        try:
            while pending:
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for fut in done:
                    cell = pending.pop(fut)
                    failure = fut.exception()
                    if isinstance(failure, InputError):
                        raise InputError(f"cell {cell.label}: {failure}") from None
                    if failure is not None:
                        raise failure
                    record = fut.result()
                    store.save(cell, record)
                    ran.append(cell)
                    if on_cell is not None:
                        on_cell(cell, record)
        finally:
            for fut in pending:
                fut.cancel()
    return ran


def import_ray() -> Any:
    """The ``ray`` module, or an InputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("Ray is not installed; install the runtime extra: pip install 'dlsched[runtime]'") \
            from None
    return ray


def connect(address: str | None, workers: int | None) -> bool:
    """Start Ray on this machine (``workers`` CPUs) or join the cluster at ``address``; True if we started it.

    An already initialised Ray (a test's fixture, a notebook) is used as it is and left running.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": True, "logging_level": "warning"}
    if address is None:  # a new Ray of our own, even if another one runs on this machine
        kwargs.update(address="local", num_cpus=workers)
    else:
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise InputError(f"cannot reach the Ray cluster: {exc}", field="address") from None
    return True


def run_cells(cells: Sequence[Cell], store: CellStore, *, address: str | None = None,
              workers: int | None = None,
              on_cell: Callable[[Cell, dict[str, Any]], None] | None = None) -> list[Cell]:
    """Run every cell not yet stored, as Ray tasks; returns the cells this call ran.

    ``on_cell(cell, record)`` is called after each result is stored (the progress bar advances there). A
    failing cell stops the sweep with its error after the cells already finished are stored.
    """
    todo = [c for c in cells if not store.done(c)]
    if not todo:
        return []
    ray = import_ray()
    started = connect(address, workers)
    task = ray.remote(num_cpus=1, max_retries=0)(simulate_cell)
    pending = {task.remote(c.payload): c for c in todo}
    ran: list[Cell] = []
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                cell = pending.pop(ref)
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.as_instanceof_cause()
                    if isinstance(cause, InputError):
                        raise InputError(f"cell {cell.label}: {cause}") from None
                    raise
                store.save(cell, record)
                ran.append(cell)
                if on_cell is not None:
                    on_cell(cell, record)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
    return ran
