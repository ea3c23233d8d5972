"""The training library inside a user's own script: the counterpart of AdaptDL's ``adaptdl.torch``.

A script written with it runs unchanged by hand, under torchrun, or as a job of ``dlsched serve``, which talks
to it through the worker protocol of docs/service.md (environment in, ``control.json`` in, ``reports.jsonl``
and checkpoints out)::

    import dlsched.train as dt
    dt.init_process_group()
    model = dt.DataParallel(model, optimizer)
    loader = dt.DataLoader(dataset, batch_size=64, max_batch_size=1024, seed=0)
    for epoch in dt.remaining_epochs(5):
        for x, y in loader:
            loss = loss_fn(model(x.to(dt.device())), y.to(dt.device()))
            optimizer.zero_grad(); loss.backward(); optimizer.step()
            dt.report_loss(loss)

=================  ==========================================================================================
module             purpose
=================  ==========================================================================================
``env``            the protocol's environment variables, checked
``state``          the process group, the device, the checkpoint to resume from
``session``        the step boundary: agreement on stop and batch size, reports, periodic checkpoints
``parallel``       DDP with the noise-scale communication hook, AdaScale's learning rate, emulated slowdown
``gns``            gradient noise scale estimates and AdaScale's gain
``optim``          Adam's preconditioner and the square-root learning-rate rule
``data``           the elastic sampler and loader
``checkpoints``    ``step-<n>.pt`` files, written atomically and fsynced
``control``        ``control.json`` and SIGTERM
``reports``        ``reports.jsonl``
=================  ==========================================================================================
"""

from dlsched.train.api import (
    accumulate,
    accumulating,
    batch_size,
    checkpoint,
    device,
    finish,
    local_batch_size,
    rank,
    register_state,
    remaining_epochs,
    report_loss,
    smoothed_loss,
    step,
    world_size,
)
from dlsched.train.data import DataLoader, ElasticSampler
from dlsched.train.gns import GradientNoiseScale, adascale_gain
from dlsched.train.parallel import DataParallel
from dlsched.train.state import current_session, init_process_group, reset_session

__all__ = [
    "accumulate", "accumulating", "batch_size", "local_batch_size", "DataLoader", "DataParallel", "ElasticSampler", "GradientNoiseScale", "adascale_gain", "checkpoint",
    "current_session", "device", "finish", "init_process_group", "rank", "register_state", "remaining_epochs",
    "report_loss", "reset_session", "smoothed_loss", "step", "world_size",
]
