"""The real runtime: dlsched's schedulers driving real PyTorch training jobs on Ray.

Needs the ``runtime`` extra (``pip install 'dlsched[runtime]'``); nothing outside this package and the
commands that use it imports torch or ray.

=============  ================================================================================
module         purpose
=============  ================================================================================
``models``     the small real models shipped for it, on synthetic data made from a seed
``training``   one worker's data-parallel training loop (gloo): checkpoint, resume, statistics
``executor``   the service's executor: a job's worker processes on Ray nodes, watched, stopped, found again
``dry_run``    the executor's API with no processes, for measuring the service itself
=============  ================================================================================
"""
