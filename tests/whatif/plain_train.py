"""A user's training script that knows nothing of dlsched: plain PyTorch on random data, a fixed number
of steps, then exit 0. The service runs it like any other command; it reports nothing, so a what-if can
only replay the time it ran."""

import argparse
import sys

import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 64), torch.randn(256, 1)
    for _ in range(args.steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    print(f"plain: {args.steps} steps done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
