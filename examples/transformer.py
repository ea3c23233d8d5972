"""Train a two-layer causal transformer on synthetic token sequences with dlsched.train.

By hand:       python transformer.py --epochs 2
Two ranks:     torchrun --nproc-per-node 2 transformer.py --epochs 2
As a job:      dlsched submit transformer.yaml   (the service runs it with the worker protocol's environment)
"""

import sys

from shipped import main

if __name__ == "__main__":
    sys.exit(main("transformer", samples=1024, batch_size=32, lr=0.05))
