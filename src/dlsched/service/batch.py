"""The global batch an adaptive job runs at on its GPUs, chosen as Pollux's job agent chooses it.

Step times come from the throughput model fitted to the job's own step-time reports, statistical efficiency
from its latest gradient statistics; the batch maximising their product (goodput) is taken among batches
between ``max(initial batch, GPUs)`` and the job's declared maximum (its memory bound, as AdaptDL's local
batch bounds are). Jobs that are not adaptive, or that have not reported gradient statistics yet, run at
their initial batch.
"""

from __future__ import annotations

import numpy as np

from dlsched.core import Cluster, JobView, Placement
from dlsched.estimators.goodput import LearnedGoodputEstimator, statistical_efficiency


def choose_batch(estimator: LearnedGoodputEstimator, job: JobView, cluster: Cluster, placement: Placement,
                 *, init_batch: int, max_batch: int, adaptive: bool, last_grad: tuple[float, float] | None,
                 current: int | None) -> int:
    """The goodput-optimal global batch for ``job`` on ``placement`` (see the module docstring)."""
    n = len(placement)
    low = max(init_batch, n)
    if not adaptive or last_grad is None or low >= max_batch:
        return min(max(init_batch, n), max(max_batch, n))
    conf = placement.configuration(cluster)
    batches = np.unique(np.geomspace(low, max_batch, 32).round().astype(int))
    local = np.ceil(batches / n)
    step = estimator.predict_step_time(job, conf.gpu_type.split("+")[0], conf.num_nodes, n, local)
    if step is None or not np.all(np.isfinite(step)) or np.any(step <= 0):
        return current or low
    sqr, var = last_grad
    goodput = batches / step * statistical_efficiency(batches, init_batch, sqr, var)
    return int(batches[int(np.argmax(goodput))])
