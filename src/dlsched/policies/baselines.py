"""Registration of the baseline stages and the schedulers built from them.

Presets name the compositions the papers compare against; any of them can take another ordering or
placement on the command line (``--policy fifo --placement random``).
"""

from __future__ import annotations

from dlsched.policies.allocation import RigidGang
from dlsched.policies.ordering import Fifo, Las, Sjf, Srtf, Tiresias2DLas
from dlsched.policies.placement import PackedPlacement, RandomPlacement
from dlsched.policies.registry import SchedulerEntry, register_scheduler, register_stage
from dlsched.policies.stages import AdmitAll, NoCoordination

register_stage("admission", "all", AdmitAll, "every active job takes part in every round")
register_stage("coordination", "none", NoCoordination, "each job has its GPUs to itself (no packing)")

register_stage("ordering", "fifo", Fifo, "first in, first out")
register_stage("ordering", "sjf", Sjf, "shortest (expected) job first")
register_stage("ordering", "srtf", Srtf, "shortest remaining (expected) time first")
register_stage("ordering", "las", Las, "least attained GPU-service first")
register_stage("ordering", "tiresias-2dlas", Tiresias2DLas, "Tiresias's discretised 2D-LAS priority queues")

register_stage("allocation", "gang", RigidGang, "rigid gang: each job gets exactly its requested GPUs, or none")

register_stage("placement", "packed-sticky", PackedPlacement,
               "consolidated; running jobs keep their GPUs (Tiresias)", sticky=True)
register_stage("placement", "packed", PackedPlacement, "consolidated, re-placed every round (Gandiva-style)",
               sticky=False)
register_stage("placement", "random-sticky", RandomPlacement, "random GPUs; running jobs keep theirs", sticky=True)
register_stage("placement", "random", RandomPlacement, "random GPUs, re-placed every round", sticky=False)

for _name, _ordering, _placement, _desc in (
    ("fifo", "fifo", "packed-sticky", "FIFO with rigid gangs and packed-sticky placement"),
    ("sjf", "sjf", "packed-sticky", "SJF with rigid gangs and packed-sticky placement"),
    ("srtf", "srtf", "packed-sticky", "SRTF with rigid gangs and packed-sticky placement"),
    ("las", "las", "packed-sticky", "LAS with rigid gangs and packed-sticky placement"),
    ("tiresias", "tiresias-2dlas", "packed-sticky", "Tiresias: 2D-LAS queues, packed-sticky placement"),
    ("fifo-packed", "fifo", "packed", "FIFO with rigid gangs and consolidated non-sticky placement"),
    ("random", "fifo", "random", "FIFO with random non-sticky placement"),
    ("random-sticky", "fifo", "random-sticky", "FIFO with random sticky placement"),
):
    register_scheduler(_name, SchedulerEntry(description=_desc, ordering=_ordering, allocation="gang",
                                             placement=_placement))
