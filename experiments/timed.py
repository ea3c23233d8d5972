"""Run one experiment command and say how long it took: ``python experiments/timed.py [--log F] -- CMD ARGS...``.

``make experiments`` runs every experiment through this, so a full run ends with each experiment's wall and
CPU time on the terminal and in ``experiments/results/experiment_times.jsonl`` (one JSON object per line:
``command``, ``wall_s``, ``cpu_s`` (the command's and its children's user and system seconds), ``exit``,
``finished`` and the code's ``commit``/``dirty``), which is how issue 35's "``hops_table4.py --seeds 5``
runs in under an hour" is checked. The command's exit status is passed on, so a failed experiment still
stops ``make``.
"""

from __future__ import annotations

import datetime
import json
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

from dlsched.sim.about import code_state

LOG = Path(__file__).resolve().parent / "results" / "experiment_times.jsonl"


def main(argv: list[str]) -> int:
    log = LOG
    if argv[:1] == ["--log"]:
        if len(argv) < 2:
            print("error: --log needs a file", file=sys.stderr)
            return 2
        log, argv = Path(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("error: no command given (usage: timed.py -- CMD ARGS...)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        code = subprocess.call(argv)
    except OSError as exc:
        print(f"error: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 2
    wall = time.monotonic() - t0
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = used.ru_utime + used.ru_stime
    shown = " ".join(shlex.quote(a) for a in argv)
    state = code_state()
    row = {"command": shown, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "exit": code,
           "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "commit": state.get("commit"), "dirty": state.get("dirty")}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"took {wall:,.0f} s wall, {cpu:,.0f} s CPU (exit {code}): {shown}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
