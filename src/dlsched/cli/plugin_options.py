"""``--plugin FILE.py``: one's own stages, loaded before a command builds its configuration.

Shared by ``simulate``, ``compare``, ``whatif`` and ``serve``. The files are imported in the order given, then the installed
packages' ``dlsched.stages`` entry points, so a run can name their stages like shipped ones
(``--plugin examples/stages/edf.py --ordering my-edf``). A file that fails to import ends the command with one
``error:`` line naming it (see :mod:`dlsched.plugins`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

PluginOpt = Annotated[list[Path] | None, typer.Option(
    "--plugin", metavar="FILE.py", help="Python file that registers its own stages with "
    "dlsched.register_stage (see docs/extending.md); repeatable.")]


def load_plugin_options(paths: list[Path] | None) -> None:
    """Import each ``--plugin`` file, then the installed packages' stage entry points."""
    from dlsched.plugins import load_plugins

    load_plugins(paths or [])
