"""One what-if of the dashboard, run in a process of its own: ``python -m dlsched.service.whatif_job``.

The dashboard's "What if" view must not hold the service's API or its round while a replay runs (a replay
of a busy week can take minutes), so the service starts this module as a separate process and reads the
files it writes: ``progress.json`` (its phase and elapsed time, rewritten as it goes) and, at the end,
``result.json`` (the what-if's tables and each row's JCTs for the CDF) or ``error.json`` (one line). It reads
the service's history the way ``dlsched whatif`` does: the state's SQLite database opened read-only, or the
service's API with the admin's token; it never writes to the service's database.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from dlsched.core import InputError


def _write(folder: Path, name: str, data: dict[str, Any]) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, folder / name)


def jcts_by_row(result: Any) -> dict[str, list[float]]:
    """Each simulated row's job completion times (all its seeds), and the measured ones, for the CDFs."""
    jobs = (result.fidelity or {}).get("jobs") or {}
    out: dict[str, list[float]] = {"measured": [float(v["measured_jct_s"]) for v in jobs.values()]}
    for records in result.runs:
        label = str(getattr(records, "label", "") or "run")
        out.setdefault(label, []).extend(float(j.finish_s - j.submit_s) for j in records.jobs
                                         if j.finish_s is not None)
    return {k: sorted(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dlsched.service.whatif_job")
    ap.add_argument("folder", type=Path)
    ap.add_argument("--state", type=Path)
    ap.add_argument("--server")
    ap.add_argument("--policies", required=True)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--plugin", type=Path, action="append", default=[], help="the service's --plugin files")
    args = ap.parse_args(argv)
    folder: Path = args.folder
    t0 = time.monotonic()
    started = time.time()

    def phase(text: str) -> None:
        _write(folder, "progress.json", {"phase": text, "elapsed_s": time.monotonic() - t0, "started": started})

    phase(f"replaying {args.policies} on {args.seeds} seed(s): export, fit and simulate")
    try:
        from dlsched.plugins import load_plugins
        from dlsched.replay.whatif import whatif

        load_plugins(args.plugin)
        token = os.environ.get("DLSCHED_TOKEN") if args.server else None
        result = whatif(args.state, policies=args.policies, seeds=args.seeds, server=args.server, token=token)
        _write(folder, "result.json", {**result.tables(), "jcts": jcts_by_row(result),
                                       "elapsed_s": time.monotonic() - t0})
        phase("done")
        return 0
    except InputError as exc:
        _write(folder, "error.json", {"error": str(exc)})
    except Exception as exc:  # noqa: BLE001 - the view shows one line, never a traceback
        _write(folder, "error.json", {"error": f"the what-if failed: {type(exc).__name__}: {exc}"})
    phase("failed")
    return 1


if __name__ == "__main__":
    sys.exit(main())
