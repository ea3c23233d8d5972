"""The real runtime: dlsched's schedulers driving real PyTorch training jobs on Ray.

Needs the ``runtime`` extra (``pip install 'dlsched[runtime]'``); nothing outside this package and the
commands that use it imports torch or ray.

=============  ================================================================================
module         purpose
=============  ================================================================================
``models``     the small real models shipped for it, on synthetic data made from a seed
``training``   one worker's data-parallel training loop (gloo): checkpoint, resume, statistics
=============  ================================================================================
"""
