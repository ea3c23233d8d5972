"""A user's training script for the tests: a small MLP on teacher-labelled data, written with dlsched.train.

Each sample carries its index, so the tests can see exactly which samples every rank trained on. The
``--write-*-at`` options make rank 0 act as the service at a chosen step (write ``control.json`` before that
step's backward pass, where the step's exchange reads it), so a test can stop or resize a job at an exact
step without racing it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

import dlsched.train as dt


class Counter:
    """A user state: how many steps this script has seen, over all incarnations."""

    def __init__(self) -> None:
        self.steps = 0

    def state_dict(self) -> dict[str, int]:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.steps = state["steps"]


def make_data(samples: int, dtype: torch.dtype) -> torch.utils.data.TensorDataset:
    """Teacher-labelled 8-feature vectors in 4 classes, each with its index."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(samples, 8, generator=gen, dtype=dtype)
    teacher = torch.randn(8, 4, generator=gen, dtype=dtype)
    y = (x @ teacher + 0.5 * torch.randn(samples, 4, generator=gen, dtype=dtype)).argmax(dim=1)
    return torch.utils.data.TensorDataset(x, y, torch.arange(samples))


def make_net(dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dtype)


def write_control(job_dir: Path, **fields: object) -> None:
    tmp = job_dir / ".control.json.tmp"
    incarnation = int(os.environ.get("DLSCHED_INCARNATION", "0") or 0)
    tmp.write_text(json.dumps({"incarnation": incarnation, "batch_size": None, "stop": False, **fields}))
    os.replace(tmp, job_dir / "control.json")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-batch-size", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="finish after this many steps (0: run the epochs)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--smoothing", type=float, default=None, help="default: the library's")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--amp", action="store_true", help="bfloat16 autocast on the CPU with a GradScaler")
    ap.add_argument("--init-scale", type=float, default=2.0 ** 16)
    ap.add_argument("--amp-dtype", choices=["bfloat16", "float16"], default="bfloat16")
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--collate", action="store_true", help="go through a collate_fn, sample by sample")
    ap.add_argument("--loss-out", type=Path)
    ap.add_argument("--float64", action="store_true")
    ap.add_argument("--params-out", type=Path)
    ap.add_argument("--indices-dir", type=Path)
    ap.add_argument("--write-stop-at", type=int, default=0)
    ap.add_argument("--write-batch-at", default="")
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--gns-out", type=Path)
    args = ap.parse_args()

    dt.init_process_group()
    dtype = torch.float64 if args.float64 else torch.float32
    dataset = make_data(args.samples, dtype)
    net = make_net(dtype)
    optimizer: torch.optim.Optimizer = (torch.optim.Adam(net.parameters(), lr=args.lr) if args.optimizer == "adam"
                                        else torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9))
    scaler = torch.amp.GradScaler("cpu", init_scale=args.init_scale) if args.amp else None
    extra = {} if args.smoothing is None else {"smoothing": args.smoothing}
    model = dt.DataParallel(net, optimizer, scaler=scaler, **extra)
    workers = {"num_workers": args.num_workers, "persistent_workers": True, "prefetch_factor": 3} \
        if args.num_workers else {}
    collate = {"collate_fn": torch.utils.data.default_collate} if args.collate else {}
    loader = dt.DataLoader(dataset, batch_size=args.batch_size, max_batch_size=args.max_batch_size, seed=3,
                           **workers, **collate)
    if args.accumulate > 1:
        dt.accumulate(args.accumulate)
    losses: list[float] = []
    counter = Counter()
    dt.register_state("counter", counter)
    job_dir = Path(os.environ["DLSCHED_JOB_DIR"]) if os.environ.get("DLSCHED_JOB_DIR") else None
    batch_at = tuple(int(v) for v in args.write_batch_at.split(":")) if args.write_batch_at else None
    log = None
    if args.indices_dir is not None:
        args.indices_dir.mkdir(parents=True, exist_ok=True)
        log = open(args.indices_dir / f"rank{dt.rank()}-pid{os.getpid()}.txt", "a")  # noqa: SIM115
    done = False
    for _epoch in dt.remaining_epochs(args.epochs):
        for xb, yb, idx in loader:
            step = dt.step() + 1
            if log is not None:
                log.write(f"{step} {os.getpid()} {' '.join(str(int(i)) for i in idx)}\n")
                log.flush()
            if job_dir is not None and dt.rank() == 0 and not dt.accumulating():
                # as the service would, before this step's backward pass (where the step's exchange starts)
                if step == args.write_stop_at:
                    write_control(job_dir, stop=True)
                if batch_at is not None and step == batch_at[0]:
                    write_control(job_dir, batch_size=batch_at[1])
            optimizer.zero_grad()
            if scaler is not None:
                with torch.autocast("cpu", dtype=getattr(torch, args.amp_dtype)):
                    logits = model(xb)
                loss = F.cross_entropy(logits.float(), yb)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                optimizer.step()
            dt.report_loss(loss)
            if dt.accumulating():
                continue
            smoothed = dt.smoothed_loss()
            assert smoothed is not None, "smoothed_loss() is defined from the first step"
            assert dt.batch_size() >= 1 and dt.local_batch_size() >= 0
            losses.append(smoothed)
            counter.steps += 1
            if args.step_sleep:
                time.sleep(args.step_sleep)
            if args.steps and step >= args.steps:
                done = True
                break
        if done:
            dt.finish()
            break
    if args.gns_out is not None and dt.rank() == 0:
        gns = dt.current_session().gns
        assert gns is not None
        args.gns_out.write_text(json.dumps({"noise": gns.noise, "grad_sqr": gns.grad_sqr,
                                            "measurements": gns.measurements,
                                            "optimizer_steps": dt.current_session().optimizer_steps,
                                            "scale": None if scaler is None else scaler.get_scale()}))
        if args.optimizer == "adam":  # the preconditioner the statistics used at the end, for the test's truth
            state = optimizer.state
            torch.save({name: (state[p]["exp_avg_sq"].clone(), float(state[p]["step"]))
                        for name, p in net.named_parameters()}, args.gns_out.with_suffix(".adam.pt"))
    if args.loss_out is not None and dt.rank() == 0:
        args.loss_out.write_text(json.dumps(losses))
    if args.params_out is not None and dt.rank() == 0:
        torch.save({k: v.detach().cpu() for k, v in net.state_dict().items()}, args.params_out)
    print(f"rank {dt.rank()} finished at step {dt.step()} counter {counter.steps}", flush=True)


if __name__ == "__main__":
    main()
