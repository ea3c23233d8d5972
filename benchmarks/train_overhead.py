"""What ``dlsched.train`` costs per step against plain DDP: the same model, batch and ranks, in one run.

Each rank holds two copies of the example's model with the same initial weights: one in plain
``DistributedDataParallel`` fed by slicing a ``DistributedSampler``-style permutation of the tensors (the
cheapest loader a plain script could have), one in ``dlsched.train.DataParallel`` fed by
``dlsched.train.DataLoader`` (its step boundary, noise-scale hook and all). The two alternate in blocks of
``--steps`` steps, in the order ABBA so that a drift of the machine's speed falls on both, and each side's
per-step time is the median over its blocks. Models: the shipped ``resnet`` and ``transformer`` of the
examples (``examples/resnet.py``, ``examples/transformer.py``), at their global batch of 32.

Output: one JSON object per model on stdout with ``model``, ``ranks``, ``plain_step_s``, ``dlsched_step_s``
and ``ratio`` (wall time per step, dlsched over plain; 1.05 is the target), plus ``plain_cpu_s``,
``dlsched_cpu_s`` and ``cpu_ratio`` (rank 0's CPU time per step, all its threads: on a shared machine less
disturbed by other load than wall time), ``blocks`` and ``steps``.

    python benchmarks/train_overhead.py [--ranks 2] [--models resnet,transformer] [--blocks 8] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(args: argparse.Namespace) -> None:
    """One rank: both loops in alternating blocks; rank 0 prints the result line."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    import dlsched.train as dt
    from dlsched.runtime.models import make_data, make_model, model_kind

    torch.set_num_threads(1)
    dt.init_process_group()
    rank, world = dt.rank(), dt.world_size()
    kind = model_kind(args.model)
    data = make_data(args.model, args.samples, 0)
    x, y = data.inputs, data.targets
    local = args.batch_size // world

    plain_model = DistributedDataParallel(make_model(args.model, 0))
    plain_opt = torch.optim.SGD(plain_model.parameters(), lr=args.lr, momentum=0.9)
    net = make_model(args.model, 0)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    model = dt.DataParallel(net, opt)
    loader = dt.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=args.batch_size, seed=0)

    def plain_batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        epoch = 0
        while True:
            perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
            mine = perm[rank::world]
            for i in range(0, len(mine) - local + 1, local):
                idx = mine[i: i + local]
                yield x[idx], y[idx]
            epoch += 1

    def dlsched_batches() -> Iterator[Any]:
        while True:
            yield from loader

    def block(batches: Iterator[Any], m: torch.nn.Module, o: torch.optim.Optimizer,
              report: bool) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            xb, yb = next(batches)
            loss = kind.loss_sum(m(xb), yb) / len(yb)
            o.zero_grad()
            loss.backward()
            o.step()
            if report:
                dt.report_loss(loss)
        return (time.perf_counter() - t0) / args.steps, (time.process_time() - c0) / args.steps

    plain_it, dl_it = plain_batches(), dlsched_batches()
    block(plain_it, plain_model, plain_opt, False)  # warm-up of both
    block(dl_it, model, opt, True)
    plain, ours = [], []
    for b in range(args.blocks):
        order = ("plain", "dlsched") if b % 2 == 0 else ("dlsched", "plain")
        for side in order:
            if side == "plain":
                plain.append(block(plain_it, plain_model, plain_opt, False))
            else:
                ours.append(block(dl_it, model, opt, True))
    if rank == 0:
        p, d = statistics.median(w for w, _ in plain), statistics.median(w for w, _ in ours)
        pc, dc = statistics.median(c for _, c in plain), statistics.median(c for _, c in ours)
        print(json.dumps({"model": args.model, "ranks": world, "plain_step_s": round(p, 6),
                          "dlsched_step_s": round(d, 6), "ratio": round(d / p, 4),
                          "plain_cpu_s": round(pc, 6), "dlsched_cpu_s": round(dc, 6), "cpu_ratio": round(dc / pc, 4),
                          "blocks": args.blocks, "steps": args.steps}), flush=True)
    # leave without the session's final checkpoint/done (nothing to finish: no job folder)
    sys.stdout.flush()
    os._exit(0)


def _launch(model: str, args: argparse.Namespace) -> str:
    port = _free_port()
    procs = []
    for rank in range(args.ranks):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DLSCHED_")}
        env.update(RANK=str(rank), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]))
        cmd = [sys.executable, __file__, "--rank-of", model, "--blocks", str(args.blocks), "--steps",
               str(args.steps), "--batch-size", str(args.batch_size), "--samples", str(args.samples)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=args.timeout)[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise SystemExit(f"error: a rank of '{model}' failed (exit codes {[p.returncode for p in procs]})")
    return outs[0].strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--models", default="resnet,transformer")
    ap.add_argument("--blocks", type=int, default=8, help="blocks per side, alternating ABBA")
    ap.add_argument("--steps", type=int, default=10, help="steps per block")
    ap.add_argument("--batch-size", type=int, default=32, help="global batch (the examples')")
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--rank-of", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    for name in ("ranks", "blocks", "steps", "batch_size", "samples"):
        if getattr(args, name) < 1:
            raise SystemExit(f"error: --{name.replace('_', '-')} must be >= 1")
    if args.rank_of is not None:
        args.model = args.rank_of
        _rank_main(args)
        return
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        print(_launch(model, args), flush=True)


if __name__ == "__main__":
    main()
