"""Registration of Pollux's stages and the ``pollux`` preset.

``--set`` keys (``pollux.KEY`` and ``allocation.KEY`` are accepted as well): ``p`` (power-mean exponent,
-1), ``restart_delay_s`` (the restart penalty's delay, 30 s), ``population`` and ``generations`` (100 each),
``max_replicas``, ``max_nodes``, ``explore``, ``speedup_base`` (``fair``: ceil(G / J) GPUs on one node, as
Sia's artifact runs Pollux; ``fair-spread``: that share over as many nodes as it needs; ``one-gpu``),
``batch_search`` (``adaptdl``: AdaptDL's batch search; ``dense``: a finer one). The search's random generator
takes the run's seed.
"""

from __future__ import annotations

from dlsched.policies.pollux.allocation import PolluxAllocation
from dlsched.policies.pollux.placement import PolluxPlacement
from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage

register_stage("allocation", "pollux", PolluxAllocation,
               "Pollux: goodput speedups (heterogeneity-unaware), power-mean fitness with restart penalty, "
               "genetic search over per-node GPU counts")
register_stage("placement", "pollux", PolluxPlacement,
               "Pollux's node-level placement: the search's per-node counts, keeping GPUs a job holds")

register_scheduler("pollux", SchedulerEntry(
    description="Pollux (OSDI'21): goodput speedups (heterogeneity-unaware), power-mean fitness p=-1 with "
                "restart penalty, genetic search over per-node GPU counts; 4-GPU virtual nodes, mixed types "
                "cut to the majority type", ordering="fifo", allocation="pollux", placement="pollux", round_s=60.0))
