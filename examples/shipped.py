"""The training loop the shipped-model examples share: a user's script written with ``dlsched.train``.

``mlp.py``, ``resnet.py`` and ``transformer.py`` call ``main`` with their model's name; everything a user
writes to run under ``dlsched serve`` is here: start the session, wrap model and optimiser, build the elastic
loader, loop over the remaining epochs, report the loss. The same script runs by hand, under torchrun, or as a
job whose workers the service starts, stops and resizes.
"""

from __future__ import annotations

import argparse
import sys

import torch
from torch.utils.data import TensorDataset

import dlsched.train as dt
from dlsched.runtime.models import make_data, make_model, model_kind


def parse(name: str, argv: list[str] | None, samples: int, batch_size: int, lr: float) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=f"Train dlsched's shipped '{name}' model ({model_kind(name).description}).")
    ap.add_argument("--epochs", type=int, default=2, help="passes over the data (default 2)")
    ap.add_argument("--batch-size", type=int, default=batch_size, help="initial global batch")
    ap.add_argument("--max-batch-size", type=int, default=8 * batch_size, help="largest global batch the scheduler may pick")
    ap.add_argument("--samples", type=int, default=samples, help="size of the synthetic data set")
    ap.add_argument("--lr", type=float, default=lr, help="learning rate at the initial batch")
    ap.add_argument("--target-loss", type=float, default=None, help="stop early once the smoothed loss is this low")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint-dir", default=None, help="where to checkpoint when run by hand")
    args = ap.parse_args(argv)
    for field in ("epochs", "batch_size", "samples"):
        if getattr(args, field) < 1:
            ap.error(f"--{field.replace('_', '-')} must be >= 1")
    if args.max_batch_size < args.batch_size:
        ap.error("--max-batch-size must be >= --batch-size")
    return args


def main(name: str, argv: list[str] | None = None, *, samples: int = 2048, batch_size: int = 32,
         lr: float = 0.05) -> int:
    args = parse(name, argv, samples, batch_size, lr)
    dt.init_process_group(checkpoint_dir=args.checkpoint_dir)
    kind = model_kind(name)
    data = make_data(name, args.samples, args.seed)
    model = make_model(name, args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    model = dt.DataParallel(model, optimizer)
    loader = dt.DataLoader(TensorDataset(data.inputs, data.targets), batch_size=args.batch_size,
                           max_batch_size=args.max_batch_size, seed=args.seed)
    device = dt.device()
    reached = False
    for epoch in dt.remaining_epochs(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = kind.loss_sum(model(x), y) / len(y)  # the mean over this rank's samples
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            dt.report_loss(loss)
            smoothed = dt.smoothed_loss()  # the same on every rank, so all ranks stop at the same step
            if args.target_loss is not None and smoothed is not None and smoothed <= args.target_loss:
                reached = True
                break
        if reached:
            dt.finish()  # the step that reached the target counts before the report below
        if dt.rank() == 0:
            print(f"epoch {epoch}: step {dt.step()}, batch {loader.batch_size}, loss {dt.smoothed_loss():.4f}",
                  flush=True)
        if reached:
            break
    if dt.rank() == 0:
        why = f"target loss {args.target_loss} reached" if reached else f"{args.epochs} epochs done"
        print(f"{name}: {why} after {dt.step()} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "mlp", sys.argv[2:]))
