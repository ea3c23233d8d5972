"""A stand-in training script for the executor's tests: prints its environment and behaves as told.

``EXEC_MODE``: ``wait`` (exit with ``EXIT_CODE`` + RANK once ``OUT_DIR/go`` exists), ``sleep`` (sleep until
SIGTERM, then say so and exit 0, as the training library does after its checkpoint) or ``stubborn``
(ignore SIGTERM and sleep on). Writes its pid to ``OUT_DIR/pid<RANK>``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES",
        "DLSCHED_GPU_TYPE", "DLSCHED_SLOWDOWN", "DLSCHED_JOB_ID", "JOB_VAR")


def main() -> None:
    out = Path(os.environ["OUT_DIR"])
    rank = int(os.environ["RANK"])
    mode = os.environ.get("EXEC_MODE", "wait")
    print("env " + json.dumps({k: os.environ.get(k) for k in KEYS}, sort_keys=True), flush=True)
    if mode == "sleep":
        def on_term(signum: int, frame: object) -> None:
            print("term: checkpointed, exiting", flush=True)
            sys.exit(0)

        signal.signal(signal.SIGTERM, on_term)
    elif mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    (out / f"pid{rank}").write_text(str(os.getpid()))
    while mode != "wait" or not (out / "go").exists():
        time.sleep(0.05)
    print("done", flush=True)
    sys.exit(int(os.environ.get("EXIT_CODE", "0")) + rank)


if __name__ == "__main__":
    main()
