"""Measure two real PyTorch training processes under MPS share limits and write a curve file for the world.

For each active-thread percentage from 10 to 100 (step ``--step``), the script trains ``--model`` (a
torchvision ResNet-18 on random CIFAR-sized batches, by default) for ``--steps`` steps in a process limited
by ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (``solo``), then again next to an unrestricted second training
process on the same GPU (``pair``), and prints ``pct=P solo|pair samples_per_s=X`` per measurement.
:mod:`curve` turns the log into the curve file (``--out``, default ``mps_curve.json``) that
``dlsched simulate --set world.mps_curve=FILE`` reads, so the simulated world follows the user's GPU.

It needs an NVIDIA GPU, PyTorch with CUDA and a running MPS control daemon (``nvidia-cuda-mps-control -d``);
without a GPU it says so and exits with code 2.

    python experiments/mps/measure.py [--model resnet18] [--steps 60] [--step 10] [--out mps_curve.json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

WORKER = r"""
import os, sys, time, torch, torchvision
steps, batch, model_name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
model = getattr(torchvision.models, model_name)(num_classes=10).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(batch, 3, 32, 32, device="cuda"); y = torch.randint(0, 10, (batch,), device="cuda")
def step():
    opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); opt.step()
for _ in range(5): step()
torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(steps): step()
torch.cuda.synchronize(); print(steps * batch / (time.perf_counter() - t0))
"""


def _gpu_name() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def _train(pct: int | None, args: argparse.Namespace) -> subprocess.Popen:
    env = dict(os.environ)
    if pct is not None:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(pct)
    return subprocess.Popen([sys.executable, "-c", WORKER, str(args.steps), str(args.batch), args.model],
                            env=env, stdout=subprocess.PIPE, text=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18", help="a torchvision model name (default resnet18)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--step", type=int, default=10, help="percentage step (default 10)")
    p.add_argument("--out", type=Path, default=Path("mps_curve.json"))
    args = p.parse_args()
    if not 1 <= args.step <= 100:
        print("error: --step must be a whole number in 1..100", file=sys.stderr)
        return 2
    gpu = _gpu_name()
    if gpu is None:
        print("error: measuring MPS curves needs an NVIDIA GPU with PyTorch (CUDA) and the MPS daemon "
              "(nvidia-cuda-mps-control -d); none found", file=sys.stderr)
        return 2
    from curve import curve_file, parse_log, write

    lines = []
    for pct in range(args.step, 101, args.step) if 100 % args.step == 0 else [*range(args.step, 100, args.step), 100]:
        solo = _train(pct, args)
        out, _ = solo.communicate()
        lines.append(f"pct={pct} solo samples_per_s={float(out.strip()):.3f}")
        restricted, partner = _train(pct, args), _train(None, args)
        out, _ = restricted.communicate()
        partner.communicate()
        lines.append(f"pct={pct} pair samples_per_s={float(out.strip()):.3f}")
        print(lines[-2], lines[-1], sep="\n", flush=True)
    content = curve_file(parse_log("\n".join(lines)), gpu=gpu, model=args.model)
    write(content, args.out)
    print(f"k = {content['k']}; wrote {args.out} (use: dlsched simulate --set world.mps_curve={args.out} ...)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
