"""``dlsched explain``: why a job waits, or why it runs on those GPUs, one paragraph per stage.

``dlsched explain RUN_DIR JOB`` reads a simulation written with ``--out`` (its ``explanations.jsonl``);
``dlsched explain JOB`` (one argument) asks a running service (``--server``/``DLSCHED_SERVER``,
``--token``/``DLSCHED_TOKEN``). ``--round N`` keeps round N only; ``--format json`` prints the records,
one a line, as the Python API (:func:`dlsched.explain.explain`) returns them.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from dlsched.cli.client import ServerOpt, TokenOpt, connect
from dlsched.cli.common import Format, FormatOpt, app, guard, print_json_lines, printable
from dlsched.core import InputError


@app.command("explain")
def explain_cmd(
    target: Annotated[list[str], typer.Argument(help="RUN_DIR JOB for a simulation folder, or JOB for the service.",
                                                metavar="[RUN_DIR] JOB")],
    round_no: Annotated[int | None, typer.Option("--round", help="Only this round.", metavar="N")] = None,
    fmt: FormatOpt = Format.table,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """Why a job waits or runs where it does: one paragraph per stage (admission, ordering, allocation,
    placement, coordination), consecutive rounds with the same decision as one range."""

    def go() -> None:
        from dlsched.explain import explain, explain_paragraphs

        if round_no is not None and round_no < 0:
            raise InputError(f"must be a round number (0 or more), got {round_no}", field="round")
        if len(target) == 2:
            records = explain(target[0], target[1], round_no)
        elif len(target) == 1:
            records = connect(server, token).explain(target[0], round=round_no)
        else:
            raise InputError(f"expected RUN_DIR JOB or JOB, got {len(target)} arguments", field="target")
        if fmt is Format.json:
            print_json_lines(records)
            return
        if not records:
            sys.stdout.write(f"{printable(target[-1])}: no explanations yet (the job has not been in a round)\n")
            return
        paragraphs = ("\n".join(printable(line) for line in p.split("\n")) for p in explain_paragraphs(records))
        sys.stdout.write(f"{printable(target[-1])}:\n" + "\n\n".join(paragraphs) + "\n")

    guard(go)
