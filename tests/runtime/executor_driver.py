"""A second driver process for the executor's tests: connects to the state folder's local Ray as a
restarted service would, then launches, or attaches and reports, as the command line says.

    python executor_driver.py STATE launch-and-hang SPEC_JSON   # launch, print "launched", wait to be killed
    python executor_driver.py STATE launch-and-exit SPEC_JSON   # launch, disconnect, exit
    python executor_driver.py STATE attach JOB INCARNATION WORLD [stop]   # attach, poll, print JSON
    python executor_driver.py STATE fresh   # print the Ray's address, then stop that Ray
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from dlsched.core import Node
from dlsched.runtime.executor import LaunchSpec, RayExecutor

NODES = [Node(0, "t4", 2, name="t4-0"), Node(1, "a100", 2, name="a100-1")]


def spec_from_json(text: str) -> LaunchSpec:
    raw = json.loads(text)
    return LaunchSpec(raw["job_id"], raw["incarnation"], raw["command"], raw["working_dir"], raw["env"],
                      tuple((node, tuple(gpus)) for node, gpus in raw["ranks"]), Path(raw["job_dir"]))


def main() -> None:
    state, action = Path(sys.argv[1]), sys.argv[2]
    executor = RayExecutor.local(state, NODES)
    if action.startswith("launch"):
        executor.launch(spec_from_json(sys.argv[3]))
        print("launched", flush=True)
        if action == "launch-and-hang":
            while True:
                time.sleep(1)
    elif action == "attach":
        job, incarnation, world = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        attached = executor.attach(job, incarnation, world)
        report = {"attached": attached, "address": executor.local_ray.address if executor.local_ray else None,
                  "before": [(s.rank, s.state.value, s.exit_code) for s in executor.poll(job)]}
        if len(sys.argv) > 6 and sys.argv[6] == "stop":
            executor.stop([job], grace_s=20)
            report["after"] = [(s.rank, s.state.value, s.exit_code) for s in executor.poll(job)]
        print(json.dumps(report), flush=True)
    elif action == "fresh":
        assert executor.local_ray is not None
        print(json.dumps({"address": executor.local_ray.address, "nodes": len(executor.nodes())}), flush=True)
        executor.close(stop_ray=True)
        return
    executor.close(stop_ray=False)


if __name__ == "__main__":
    main()
