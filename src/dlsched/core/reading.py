"""How a file that cannot be read is described: "not found" for a missing file, the system's words otherwise.

Every reader of a user file (config.json, cluster and quota files, trace files, variants, sweeps) names the
file and says why it could not be read; a missing file is the common case and must read as "not found" in
every one of them, not as ``[Errno 2] No such file or directory`` in some and ``cannot read`` in others.
"""

from __future__ import annotations

__all__ = ["unreadable"]


def unreadable(exc: OSError, what: str = "file") -> str:
    """``file not found``, ``file is a directory`` or ``cannot read file (<reason>)`` for ``exc``."""
    if isinstance(exc, FileNotFoundError):
        return f"{what} not found"
    if isinstance(exc, IsADirectoryError):
        return f"{what} is a directory, not a file"
    return f"cannot read {what} ({exc.strerror or exc})"
