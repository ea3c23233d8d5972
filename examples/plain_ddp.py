"""An ordinary PyTorch DDP training script that knows nothing of dlsched.

It is what a team already runs with ``torchrun``: it reads torchrun's environment (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ...) through ``init_process_group("gloo")``, keeps its own snapshots, resumes from the
newest one, and on SIGTERM writes one and exits 0. Under ``dlsched serve`` (``examples/plain_ddp.yaml``) its
snapshots go to ``$DLSCHED_CHECKPOINT_DIR``, the job's stable folder, so a restart after a move, a resize or
a preemption resumes where it stopped; nothing else changes.

By hand:    torchrun --nproc-per-node 2 plain_ddp.py --steps 200
As a job:   dlsched submit plain_ddp.yaml
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

#: What torchrun gives every rank (and the service gives in its place).
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID")

stopping = False


def _on_term(_signum: int, _frame: object) -> None:
    global stopping
    stopping = True


def _record(folder: Path, **event: object) -> None:
    with (folder / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"time": time.time(), **event}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--snapshot-every", type=int, default=20)
    ap.add_argument("--step-s", type=float, default=0.05, help="extra seconds per step (a heavier model)")
    ap.add_argument("--snapshots", default=os.environ.get("DLSCHED_CHECKPOINT_DIR", "snapshots"))
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    folder = Path(args.snapshots)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    saved = sorted((int(p.stem.split("-")[1]), p) for p in folder.glob("snapshot-*.pt"))
    step = 0
    if saved:
        blob = torch.load(saved[-1][1], weights_only=False)
        model.module.load_state_dict(blob["model"])
        opt.load_state_dict(blob["opt"])
        step = int(blob["step"])
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    (folder / f"env-{restart}-{rank}.json").write_text(json.dumps({k: os.environ.get(k) for k in TORCHRUN_VARS}))
    if rank == 0:
        _record(folder, event="start", resumed=step, world=world)
    while step < args.steps:
        gen = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(32, 16, generator=gen)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.step_s)
        step += 1
        flag = torch.tensor([1.0 if stopping else 0.0])
        dist.all_reduce(flag)  # every rank stops at the same step
        if rank == 0 and (step % args.snapshot_every == 0 or flag.item() > 0 or step == args.steps):
            tmp = folder / f".snapshot-{step}.tmp"
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
            os.replace(tmp, folder / f"snapshot-{step}.pt")
            _record(folder, event="snapshot", step=step)
        if flag.item() > 0:
            if rank == 0:
                _record(folder, event="stopped", step=step)
            break
    # rank 0 may still be writing its last snapshot: leave together (gloo aborts a rank that tears its group
    # down while a peer is still in it: "terminate called without an active exception")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
