"""Train a small ResNet-style CNN on synthetic 3x16x16 images with dlsched.train.

By hand:       python resnet.py --epochs 2
Two ranks:     torchrun --nproc-per-node 2 resnet.py --epochs 2
As a job:      dlsched submit resnet.yaml   (the service runs it with the worker protocol's environment)
"""

import sys

from shipped import main

if __name__ == "__main__":
    sys.exit(main("resnet", samples=1024, batch_size=32, lr=0.05))
