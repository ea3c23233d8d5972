"""``python -m dlsched``: the same as the ``dlsched`` command."""

from dlsched.cli import main

main()
