"""Train torchvision's ResNet-18 on torchvision's FakeData with dlsched.train: a user's own model and data set.

Nothing here is dlsched's own model: the data set is a map-style ``torch.utils.data.Dataset`` read sample
by sample and collated by the loader, as with any image folder. Needs torchvision; without it the script
says so and exits 0, so a demo cluster without it reports a finished job rather than a failure.

By hand:       python torchvision_resnet18.py
As a job:      dlsched submit torchvision_resnet18.yaml
"""

from __future__ import annotations

import argparse
import sys

import torch
from torch.nn import functional as F  # noqa: N812

import dlsched.train as dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="ResNet-18 on torchvision FakeData with dlsched.train")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-batch-size", type=int, default=128)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--target-loss", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import torchvision  # type: ignore[import-not-found, unused-ignore]
        from torchvision import transforms  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        print("torchvision is not installed: this example needs it (pip install torchvision); nothing to do",
              flush=True)
        return 0

    dt.init_process_group()
    dataset = torchvision.datasets.FakeData(size=args.samples, image_size=(3, args.image_size, args.image_size),
                                            num_classes=10, transform=transforms.ToTensor(), random_offset=args.seed)
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    model = dt.DataParallel(model, optimizer)
    loader = dt.DataLoader(dataset, batch_size=args.batch_size, max_batch_size=args.max_batch_size, seed=args.seed)
    device = dt.device()
    reached = False
    for epoch in dt.remaining_epochs(args.epochs):
        for images, labels in loader:
            loss = F.cross_entropy(model(images.to(device)), labels.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            dt.report_loss(loss)
            smoothed = dt.smoothed_loss()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
