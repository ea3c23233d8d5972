"""Admission that says no: a submission no configuration of the cluster as it stands can ever hold.

The service answers such a submission 422 with one error naming the field and what the cluster has, and
stores nothing (a job accepted only to wait forever is a silent failure, and under FIFO it would block
every job behind it). The rule is the simulator's (:func:`dlsched.core.fit.misfit`), so a trace and a
service refuse the same jobs. (Where a job may run, its ``working_dir``, is checked by
:mod:`dlsched.service.confine`.)
"""

from __future__ import annotations

from dlsched.core import Cluster, InputError
from dlsched.core.fit import misfit
from dlsched.service.launcher import torchrun_refusal
from dlsched.service.spec import JobSubmission

#: The simulator's field names as a job spec names them.
_SPEC_FIELDS = {"num_gpus": "gpus"}


def cluster_refusal(submission: JobSubmission, cluster: Cluster, *, rigid: bool) -> InputError | None:
    """Why ``cluster`` can never hold the job (naming the spec's field); None when it can."""
    found = misfit(submission.to_job_spec("submission", 0.0, "user"), cluster, rigid=rigid)
    if found is None:
        return None
    return InputError(found.message, field=_SPEC_FIELDS.get(found.field, found.field))


def command_refusal(submission: JobSubmission) -> InputError | None:
    """A torchrun command whose ranks disagree with the spec's GPUs (the service runs one rank per GPU)."""
    return torchrun_refusal(submission.command, submission.adaptivity, submission.gpus)
