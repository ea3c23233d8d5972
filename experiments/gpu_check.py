"""dlsched.train on a machine with NVIDIA GPUs: is DDP's update exact, and does a job run through the protocol?

Three checks, each printed as one JSON object a line (name, value, pass, device, torch version, backend):

a. ``ddp_matches_single_process``: a small MLP trains 20 steps with two ranks through ``dlsched.train``
   (NCCL over two GPUs when the machine has two or more; gloo over CUDA tensors with both ranks on the one GPU
   otherwise) and once in a single process; the largest parameter difference must be at most 1e-5.
b. ``protocol_job_done``: ``examples/mlp.py`` runs as a job of the worker protocol (a temporary job folder, the
   environment the executor sets) on CUDA; it must exit 0 with ``start``, ``progress`` (with gradient
   statistics), ``checkpoint`` and ``done`` reports.
c. ``protocol_stop_and_resume``: the same job stopped by ``control.json`` at its first step boundary, then
   resumed from that checkpoint (loaded from the CPU onto the GPU), must finish with ``done``.

Without CUDA everything runs on the CPU with gloo, and every line says so (``"cuda": false``), so the script
can be tried anywhere; nothing in the test suite needs a GPU. It finishes in well under three minutes.

    python experiments/gpu_check.py            # from the repository root; prints the JSON lines
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEPS = 20
TOLERANCE = 1e-5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(rank: int, world: int, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLSCHED_")}
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def _launch(cmd: list[str], world: int, timeout: float = 120.0, **extra: str) -> list[tuple[int, str]]:
    port = _free_port()
    procs = [subprocess.Popen(cmd, env=_env(r, world, port, **extra), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    out = []
    try:
        for p in procs:
            text, _ = p.communicate(timeout=timeout)
            out.append((p.returncode, text))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def worker(out: Path, backend: str | None) -> None:
    """One rank of check (a): 20 steps of a small MLP, rank 0 saves the parameters."""
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    import dlsched.train as dt

    torch.backends.cuda.matmul.allow_tf32 = False
    dt.init_process_group(backend=backend)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4096, 32, generator=gen)
    y = (x @ torch.randn(32, 8, generator=gen)).argmax(dim=1)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    model = dt.DataParallel(net, optimizer)
    loader = dt.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64, seed=0)
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb.to(dt.device())), yb.to(dt.device()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if dt.step() + 1 >= STEPS:
            break
    dt.finish()
    if dt.rank() == 0:
        torch.save({k: v.detach().cpu() for k, v in net.state_dict().items()}, out)


def _record(name: str, value: Any, ok: bool, info: dict[str, Any], **extra: Any) -> dict[str, Any]:
    line = {"name": name, "value": value, "pass": bool(ok), **info, **extra}
    print(json.dumps(line), flush=True)
    return line


def check_ddp(info: dict[str, Any], tmp: Path) -> dict[str, Any]:
    import torch

    gpus = info["gpus"]
    backend = "nccl" if gpus >= 2 else "gloo"
    me = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    one = _launch([*me, str(tmp / "one.pt"), "--backend", backend], 1)
    two = _launch([*me, str(tmp / "two.pt"), "--backend", backend], 2)
    if any(rc != 0 for rc, _ in one + two):
        return _record("ddp_matches_single_process", None, False, info, backend=backend,
                       error=[text[-2000:] for rc, text in one + two if rc != 0])
    a, b = torch.load(tmp / "one.pt"), torch.load(tmp / "two.pt")
    moved = max(float((a[k] - b[k]).abs().max()) for k in a)
    return _record("ddp_matches_single_process", moved, moved <= TOLERANCE, info, backend=backend,
                   steps=STEPS, tolerance=TOLERANCE,
                   placement="two GPUs" if gpus >= 2 else ("both ranks on one GPU" if gpus == 1 else "CPU"))


def _reports(job_dir: Path) -> list[dict[str, Any]]:
    path = job_dir / "reports.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _job(tmp: Path, name: str, world: int, incarnation: int = 0, resume: int = 0,
         stop_first: bool = False) -> tuple[list[tuple[int, str]], list[dict[str, Any]], Path]:
    job_dir = tmp / name
    job_dir.mkdir(exist_ok=True)
    if stop_first:
        (job_dir / "control.json").write_text(json.dumps({"incarnation": incarnation, "batch_size": None,
                                                          "stop": True}))
    results = _launch([sys.executable, str(ROOT / "examples" / "mlp.py"), "--epochs", "1", "--samples", "2048"],
                      world, DLSCHED_JOB_ID=name, DLSCHED_JOB_DIR=str(job_dir),
                      DLSCHED_CHECKPOINT_DIR=str(job_dir / "checkpoints"), DLSCHED_INCARNATION=str(incarnation),
                      DLSCHED_RESUME_STEP=str(resume), DLSCHED_REPORT_S="0.2", DLSCHED_BATCH_SIZE="")
    return results, _reports(job_dir), job_dir


def check_protocol(info: dict[str, Any], tmp: Path) -> None:
    world = 2 if info["gpus"] >= 2 or not info["cuda"] else 1
    t0 = time.monotonic()
    results, reports, _ = _job(tmp, "job-done", world)
    kinds = [r["type"] for r in reports]
    progress = [r for r in reports if r["type"] == "progress"]
    ok = (all(rc == 0 for rc, _ in results) and kinds[:1] == ["start"] and kinds[-1:] == ["done"]
          and "checkpoint" in kinds and bool(progress) and progress[-1]["grad_sqr"] is not None)
    _record("protocol_job_done", kinds.count("progress"), ok, info, world_size=world,
            wall_s=round(time.monotonic() - t0, 2),
            step_time_s=progress[-1]["step_time_s"] if progress else None,
            grad_sqr=progress[-1]["grad_sqr"] if progress else None,
            grad_var=progress[-1]["grad_var"] if progress else None,
            **({} if ok else {"error": [text[-2000:] for _, text in results]}))

    first, reports, job_dir = _job(tmp, "job-stop", world, stop_first=True)
    stopped = [r for r in reports if r["type"] == "stopped"]
    step = stopped[0]["step"] if stopped else 0
    (job_dir / "control.json").write_text(json.dumps({"incarnation": 1, "batch_size": None, "stop": False}))
    second, reports, _ = _job(tmp, "job-stop", world, incarnation=1, resume=step)
    resumed = [r for r in reports if r["type"] == "start" and r["incarnation"] == 1]
    done = [r for r in reports if r["type"] == "done" and r["incarnation"] == 1]
    ok = (all(rc == 0 for rc, _ in first + second) and step >= 1 and bool(resumed)
          and resumed[0]["resumed_step"] == step and bool(done))
    _record("protocol_stop_and_resume", step, ok, info, world_size=world,
            done_step=done[0]["step"] if done else None,
            **({} if ok else {"error": [text[-2000:] for _, text in first + second]}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--backend", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker, args.backend)
        return 0
    import torch

    cuda = torch.cuda.is_available()
    info = {"cuda": cuda, "gpus": torch.cuda.device_count() if cuda else 0,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu (no CUDA: ran on the CPU with gloo)",
            "torch": torch.__version__}
    if not cuda:
        print(json.dumps({"name": "note", "value": "no CUDA device: every check ran on the CPU with gloo",
                          "pass": True, **info}), flush=True)
    with tempfile.TemporaryDirectory(prefix="dlsched-gpu-check-") as tmp:
        ddp = check_ddp(info, Path(tmp))
        check_protocol(info, Path(tmp))
    return 0 if ddp["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
