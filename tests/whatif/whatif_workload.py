"""The what-if tests' workload on a real ``dlsched serve``: the shipped examples (rigid and adaptive) and
an unmodified script, submitted through the client a few seconds apart, run to the end on ``ray-local-4``.

Shared by ``tests/whatif`` (one service run per module) and ``experiments/whatif_fidelity.py``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.append(str(Path(__file__).resolve().parents[1] / "service"))

from servicekit import EXAMPLES, client, show, start_service, stop_service, wait_for_server, wait_until  # noqa: E402

HERE = Path(__file__).resolve().parent
#: Reports every second, so even a short job leaves several step times.
ENV = {"DLSCHED_REPORT_S": "1", "DLSCHED_CHECKPOINT_S": "5"}

#: (name, fields) of each job, in submission order; GPUs total more than ray-local-4's 8, so jobs queue.
JOBS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("mlp-adaptive", {"command": "python mlp.py --epochs 30", "model": "mlp", "gpus": {"min": 1, "max": 2},
                      "adaptivity": "adaptive", "batch_size": 64, "max_batch_size": 256}),
    ("resnet-rigid", {"command": "python resnet.py --epochs 15", "model": "resnet", "gpus": 2,
                      "adaptivity": "rigid", "batch_size": 32}),
    ("plain-1", {"command": f"python {HERE / 'plain_train.py'} --steps 3000", "gpus": 1}),
    ("transformer-rigid", {"command": "python transformer.py --epochs 15", "model": "transformer", "gpus": 2,
                           "adaptivity": "rigid", "batch_size": 32}),
    ("mlp-rigid", {"command": "python mlp.py --epochs 30", "model": "mlp", "gpus": 2, "adaptivity": "rigid",
                   "batch_size": 64}),
    ("resnet-adaptive", {"command": "python resnet.py --epochs 15", "model": "resnet",
                         "gpus": {"min": 1, "max": 2}, "adaptivity": "adaptive", "batch_size": 32,
                         "max_batch_size": 128}),
    ("plain-2", {"command": f"python {HERE / 'plain_train.py'} --steps 3000", "gpus": 2}),
    ("mlp-adaptive-2", {"command": "python mlp.py --epochs 40", "model": "mlp", "gpus": {"min": 1, "max": 2},
                        "adaptivity": "adaptive", "batch_size": 64, "max_batch_size": 256}),
    ("transformer-small", {"command": "python transformer.py --epochs 15", "model": "transformer", "gpus": 1,
                           "adaptivity": "rigid", "batch_size": 32}),
)


def write_specs(folder: Path, jobs: tuple[tuple[str, dict[str, Any]], ...] = JOBS) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fields in jobs:
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"name": name, "working_dir": str(EXAMPLES), "max_failures": 2,
                                        "env": ENV, **fields}))
        paths.append(path)
    return paths


def run_workload(state: Path, policy: str = "fifo", *, round_s: float = 2.0, gap_s: float = 3.0,
                 timeout_s: float = 900.0, jobs: tuple[tuple[str, dict[str, Any]], ...] = JOBS) -> list[str]:
    """Run ``jobs`` under ``policy`` on a fresh service in ``state`` until all finished; stop the service.
    Returns the job ids; asserts every job succeeded."""
    specs = write_specs(state.parent / f"{state.name}-specs", jobs)
    proc = start_service(state, "--cluster", "ray-local-4", "--round-s", str(round_s), "--policy", policy)
    try:
        info = wait_for_server(state, proc)
        ids = []
        for spec in specs:
            ids.append(str(json.loads(client(info, "submit", str(spec), "--format", "json").stdout)["id"]))
            time.sleep(gap_s)

        def finished() -> bool:
            states = {j: show(info, j)["status"] for j in ids}
            bad = {j: s for j, s in states.items() if s in ("failed", "cancelled")}
            assert not bad, f"jobs ended badly: {bad}"
            return all(s == "succeeded" for s in states.values())

        wait_until("every job succeeded", finished, timeout_s=timeout_s, every_s=2.0)
        return ids
    finally:
        stop_service(proc)


if __name__ == "__main__":  # PYTHONPATH=src:tests python tests/whatif/whatif_workload.py STATE [POLICY]: a state folder to work with
    t0 = time.time()
    print(run_workload(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "fifo"), time.time() - t0)
