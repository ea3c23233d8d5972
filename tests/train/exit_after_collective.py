"""A rank whose last act is an all-reduce of a tensor it then drops, exiting at once: the moment at which
gloo's worker may free the tensor during finalization and abort the process. ``keep`` routes the reductions
through dlsched.train's keeper and leaves the group at exit as dlsched.train does (``SentTensors.leave_group``:
wait until the workers have let go, then leave the group, joining its worker threads)."""

import atexit
import sys

import torch
import torch.distributed as dist

from dlsched.train.collectives import SentTensors

dist.init_process_group("gloo")
sent = SentTensors(gloo=True)
if sys.argv[1] == "keep":
    atexit.register(sent.leave_group)
for _ in range(50):
    x = torch.ones(1000)
    sent.all_reduce(x) if sys.argv[1] == "keep" else dist.all_reduce(x)
    assert float(x[0]) == dist.get_world_size()
del x
