"""Where the measured reference data lives.

The measured profiles and traces (``/work/shared/data`` in the lab, see its README) are other groups' data
with their own licenses, so they are never copied into the package. Code that needs them (fitting scripts,
fidelity checks, trace readers) finds the directory here, in one place:

* the environment variable ``DLSCHED_DATA`` when set;
* else ``../shared/data`` relative to the current working directory (the layout of the lab checkout).

The simulator itself runs without the data directory: everything it needs at run time is fitted into JSON
files inside the package.
"""

from __future__ import annotations

import os
from pathlib import Path

from dlsched.core.errors import InputError

#: Environment variable naming the data directory.
ENV_VAR = "DLSCHED_DATA"
#: Default location, relative to the current working directory.
DEFAULT_RELATIVE = Path("..") / "shared" / "data"


def _candidate() -> Path:
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else (Path.cwd() / DEFAULT_RELATIVE)


def data_dir() -> Path | None:
    """The data directory, or None when it does not exist (callers then skip or fall back)."""
    path = _candidate()
    return path.resolve() if path.is_dir() else None


def require_data(relpath: str | os.PathLike[str], what: str) -> Path:
    """Path of ``relpath`` inside the data directory, or an :class:`InputError` saying what is missing.

    ``what`` names the data in the message ("Sia throughput profiles"), so the one-line error tells the user
    what they were trying to read and how to point dlsched at it.
    """
    base = data_dir()
    if base is None:
        raise InputError(f"{what}: data directory {_candidate()} not found (set {ENV_VAR} to the directory "
                         f"holding the measured data)")
    path = base / relpath
    if not path.exists():
        raise InputError(f"{what}: {path} not found (is {ENV_VAR}={base} the right data directory?)")
    return path
