"""Train a three-layer perceptron on teacher-labelled vectors with dlsched.train.

By hand:       python mlp.py --epochs 2
Two ranks:     torchrun --nproc-per-node 2 mlp.py --epochs 2
As a job:      dlsched submit mlp.yaml   (the service runs it with the worker protocol's environment)
"""

import sys

from shipped import main

if __name__ == "__main__":
    sys.exit(main("mlp", samples=4096, batch_size=64, lr=0.05))
