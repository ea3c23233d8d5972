"""``dlsched spec check SPEC.yaml`` and ``dlsched spec docs``: a job spec before it is submitted.

``check`` reads the file as ``dlsched submit`` does (YAML read safely, ``working_dir`` relative to the
file's folder and existing) and prints every problem at once, one ``error:`` line each with its field and,
for a misspelt key or GPU type, the one meant; exit 2 then, "ok" and exit 0 for a spec the service takes.
``docs`` prints docs/job-spec.md, generated from the model (:mod:`dlsched.service.spec_docs`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import guard
from dlsched.core import InputError

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command("check")
def check(spec: Annotated[Path, typer.Argument(help="The job spec (YAML).", metavar="SPEC.yaml")]) -> None:
    """Check a job spec: every problem at once, each naming its field; "ok" when the service would take it."""
    from dlsched.service.spec_check import spec_problems
    from dlsched.service.spec_file import read_spec_yaml, resolve_working_dir

    def go() -> list[str]:
        data = read_spec_yaml(spec)
        lines = []
        try:
            data["working_dir"] = resolve_working_dir(spec, data)
        except InputError as exc:
            lines.append(str(exc))
            data["working_dir"] = "/"  # reported once: the model checks the rest
        lines += [str(InputError(message, source=str(spec), field=field)) for field, message in spec_problems(data)]
        return lines

    problems = guard(go)
    if problems:
        for line in problems:
            sys.stderr.write(f"error: {' '.join(line.split())}\n")
        raise typer.Exit(2)
    sys.stdout.write("ok\n")


@app.command("docs")
def docs() -> None:
    """Print the job spec's reference page (docs/job-spec.md), generated from the model."""
    from dlsched.service.spec_docs import render

    sys.stdout.write(render())
