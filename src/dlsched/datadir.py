"""Where the measured reference data lives.

The measured profiles and traces are other groups' data with their own licences, so they are never copied
into the package: ``dlsched data fetch`` downloads them from their origin repositories at pinned commits (see
``dlsched.data`` and docs/data.md). Code that needs them (fitting scripts, fidelity checks, trace readers)
finds the directory here, in one place:

* the environment variable ``DLSCHED_DATA`` when set (CI and the lab point it at their shared copy);
* else the user's data directory, ``platformdirs.user_data_dir("dlsched")`` (``~/.local/share/dlsched`` on
  Linux), where ``dlsched data fetch`` puts the data by default.

The simulator itself runs without the data directory: everything it needs at run time is fitted into JSON
files inside the package.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

from dlsched.core.errors import InputError

#: Environment variable naming the data directory.
ENV_VAR = "DLSCHED_DATA"
#: Application name the user data directory is found under.
APP_NAME = "dlsched"


def default_dir() -> Path:
    """The user's data directory for dlsched (used when ``DLSCHED_DATA`` is not set)."""
    return Path(user_data_dir(APP_NAME))


def target_dir() -> Path:
    """The data directory, whether or not it exists yet (``dlsched data fetch`` creates it)."""
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else default_dir()


def data_dir() -> Path | None:
    """The data directory, or None when it does not exist (callers then skip or fall back)."""
    path = target_dir()
    return path.resolve() if path.is_dir() else None


def fetch_hint(relpath: str | os.PathLike[str]) -> str:
    """``; `dlsched data fetch NAME` brings it`` for a path inside a dataset the manifest knows, why not for
    a file no fetch brings, else a pointer to ``dlsched data list`` (so every missing-data message says how
    to get the data)."""
    from dlsched.data.manifest import locate

    found = locate(relpath)
    if found is None:
        return "; `dlsched data list` shows the datasets and how to fetch them"
    dataset, unavailable = found
    if unavailable is not None:
        return f"; no download brings it ({unavailable.reason})"
    return f"; `dlsched data fetch {dataset.name}` brings it"


def require_data(relpath: str | os.PathLike[str], what: str) -> Path:
    """Path of ``relpath`` inside the data directory, or an :class:`InputError` saying what is missing.

    ``what`` names the data in the message ("Sia throughput profiles"), so the one-line error tells the user
    what they were trying to read, which fetch brings it, and how to point dlsched at another directory.
    """
    base = data_dir()
    if base is None:
        raise InputError(f"{what}: data directory {target_dir()} not found (set {ENV_VAR} to the directory "
                         f"holding the measured data){fetch_hint(relpath)}")
    path = base / relpath
    if not path.exists():
        raise InputError(f"{what}: {path} not found (is {ENV_VAR}={base} the right data directory?)"
                         f"{fetch_hint(relpath)}")
    return path
