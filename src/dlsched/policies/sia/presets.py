"""Registration of Sia's stages and the ``sia`` preset.

``--set`` keys are :class:`~dlsched.policies.sia.allocation.SiaAllocation` fields, named as the thesis
names them: ``p``, ``lambda_``, ``restart_factor`` (``sia``/``on``, ``off`` or a fixed factor), ``tau``
(seconds, ``on`` for the thesis's 300 s, ``off``), ``profiling`` (``bootstrap``, ``oracle``, ``none``),
``solver`` (``auto``, ``milp``, ``lp-round``, ``incremental``), ``max_doubling``, ``keep_restarting``,
``non_preemptible`` (job ids, comma separated), ``reserve`` (``type:count``, comma separated) and a few
solver knobs. ``sia.KEY`` and ``allocation.KEY`` are accepted as well as ``KEY``.
"""

from __future__ import annotations

from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage
from dlsched.policies.sia.allocation import SiaAllocation
from dlsched.policies.sia.placement import SiaPlacement

register_stage("allocation", "sia", SiaAllocation,
               "Sia: goodput-optimised ILP over (GPU type, count) configurations (HiGHS), bootstrapped "
               "profiling, restart factor, fairness p")
register_stage("placement", "sia", SiaPlacement,
               "Sia's placer: partial-node gangs on one node, whole nodes beyond, unchanged jobs stay")

register_scheduler("sia", SchedulerEntry(
    description="Sia (thesis ch. 3): goodput-optimised, heterogeneity-aware ILP over configurations "
                "(HiGHS), bootstrapped profiling, restart factor, fairness p, Sia placer",
    ordering="fifo", allocation="sia", placement="sia", round_s=60.0))
