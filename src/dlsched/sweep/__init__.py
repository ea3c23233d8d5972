"""Sweeps: a grid of simulations (presets x traces x seeds x tunables) run as Ray tasks.

Each cell is one :class:`~dlsched.sim.config.RunConfig` run by :func:`dlsched.sim.run.simulate`, the same
function ``dlsched simulate`` calls, so a cell's result is the result of that run made on its own. Finished
cells are kept one file each in the sweep's folder; a rerun after an interruption skips them.

=============  ================================================================
module         purpose
=============  ================================================================
``config``     the sweep YAML, validated with pydantic, expanded into cells
``store``      one JSON file per finished cell, written atomically
``execute``    the cells as Ray tasks (local ``ray.init()`` or ``--address``)
``report``     finished cells gathered into one table and one report
=============  ================================================================
"""
