"""``dlsched whoami`` and ``dlsched cluster``: who the service takes you for, and what it schedules on.

``cluster`` prints the nodes of the running service (``GET /v1/cluster``), one row per node: its GPU type,
its GPUs, how many are free and which jobs hold the others (another user's job as ``other``). Both take
``--server``/``--token`` (``DLSCHED_SERVER``/``DLSCHED_TOKEN``) as the other client commands do.
"""

from __future__ import annotations

import json
import sys

from rich.table import Table

from dlsched.cli.client import ServerOpt, TokenOpt, connect
from dlsched.cli.common import Format, FormatOpt, app, guard, note, out


@app.command("whoami")
def whoami(server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table) -> None:
    """The user your token belongs to: name, team, whether an admin."""

    def go() -> None:
        me = connect(server, token).whoami()
        if fmt is Format.json:
            sys.stdout.write(json.dumps(me.raw) + "\n")
            return
        role = "admin" if me.admin else "user"
        sys.stdout.write(f"{me.name} (team: {me.team or '-'}, {role})\n")

    guard(go)


@app.command("cluster")
def cluster(server: ServerOpt = None, token: TokenOpt = None, fmt: FormatOpt = Format.table) -> None:
    """The service's nodes and GPUs, and the jobs holding them (json: the whole answer)."""

    def go() -> None:
        seen = connect(server, token).cluster()
        if fmt is Format.json:
            sys.stdout.write(json.dumps(seen.raw) + "\n")
            return
        if not seen.nodes:
            note("the service has no nodes yet (before its first round)")
            return
        table = Table(title=f"{seen.name or 'cluster'} · {seen.policy or '-'} · round {seen.round}")
        for column in ("node", "gpu_type", "gpus", "free", "held by"):
            table.add_column(column, justify="right" if column in ("gpus", "free") else "left")
        for node in seen.nodes:
            held = [", ".join(jobs) for jobs in node.holders]
            free = sum(1 for jobs in node.holders if not jobs) if node.holders else node.gpus
            holders = "  ".join(f"{g}: {h}" for g, h in enumerate(held) if h) or "-"
            table.add_row(node.name, node.gpu_type, str(node.gpus), str(free), holders)
        out.print(table)
        total = sum(n.gpus for n in seen.nodes)
        busy = sum(1 for n in seen.nodes for jobs in n.holders if jobs)
        note(f"{len(seen.nodes)} nodes, {total} GPUs, {busy} held")

    guard(go)
