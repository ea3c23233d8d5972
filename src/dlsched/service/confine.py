"""Where a job may run: ``working_dir`` confined to the folders the operator allows.

A job's command runs in its ``working_dir``; left unchecked, a user could start it in another job's folder
(and read or overwrite its reports and checkpoints), in the service's state folder (its database and
``server.json``), or in ``/etc``. So the API refuses (422, ``field 'working_dir'``) a folder that, once
resolved with ``realpath`` (every ``..`` and symbolic link followed, so neither can lead out), does not lie
under one of the allowed roots:

- ``dlsched serve --allow-dir DIR`` (repeatable), or by default the home folders of this host's login
  accounts (every account of ``pwd`` with uid 0 or a uid from 1000 up, except ``nobody``, whose home is an
  existing folder other than ``/``) and ``STATE/uploads/``;
- never the state folder (``STATE/uploads/`` aside), the jobs' folders or the checkpoint folder, even under
  an allowed root (``--allow-dir /`` allows everything else).

The check is made at submission on the service's host, and the job is stored with the resolved folder
(the API rewrites ``working_dir`` to its realpath), so a link swapped in after the check changes nothing
the job runs in (docs/security.md says what this does and does not defend).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlsched.core import InputError

#: The lowest uid of a login account (Debian's and most distributions' ``UID_MIN``).
UID_MIN = 1000
NOBODY = 65534
UPLOADS = "uploads"


def home_folders() -> list[Path]:
    """The home folders of this host's login accounts (root's and every uid >= :data:`UID_MIN` but
    ``nobody``'s) that exist, ``/`` left out."""
    homes: set[Path] = set()
    for entry in pwd.getpwall():
        if entry.pw_uid != 0 and (entry.pw_uid < UID_MIN or entry.pw_uid == NOBODY):
            continue
        home = Path(entry.pw_dir)
        if home.is_absolute() and home != Path("/") and home.is_dir():
            homes.add(Path(os.path.realpath(home)))
    return sorted(homes)


def default_roots(state: Path) -> list[Path]:
    """Where jobs may run when the operator names no ``--allow-dir``: the home folders and ``STATE/uploads``."""
    return [*home_folders(), state / UPLOADS]


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass(frozen=True)
class Confinement:
    """The allowed roots (None: anywhere) and the folders refused even under them."""

    allowed: tuple[Path, ...] | None
    protected: tuple[Path, ...] = ()
    #: folders under a protected one that are allowed all the same (``STATE/uploads``)
    exceptions: tuple[Path, ...] = ()

    @classmethod
    def of(cls, allowed: Iterable[Path] | None, protected: Sequence[Path] = (),
           exceptions: Sequence[Path] = ()) -> Confinement:
        real = tuple(Path(os.path.realpath(p)) for p in allowed) if allowed is not None else None
        return cls(real, tuple(Path(os.path.realpath(p)) for p in protected),
                   tuple(Path(os.path.realpath(p)) for p in exceptions))

    def refusal(self, working_dir: str) -> InputError | None:
        """Why a job may not run in ``working_dir`` (naming the field), None when it may."""
        real = Path(os.path.realpath(working_dir))
        shown = working_dir if str(real) == working_dir else f"{working_dir} (that is {real})"
        if not real.is_dir():
            return InputError(f"{shown} is not an existing folder on the service's host", field="working_dir")
        if any(_under(real, p) for p in self.protected) and not any(_under(real, e) for e in self.exceptions):
            return InputError(f"{shown} is inside the service's own folders (its state, the jobs' folders or "
                              "the checkpoints); run jobs from a folder of your own", field="working_dir")
        if self.allowed is not None and not any(_under(real, root) for root in self.allowed):
            roots = ", ".join(str(r) for r in self.allowed) or "none"
            return InputError(f"{shown} is not under a folder this service allows jobs to run in ({roots}; "
                              "the operator sets them with 'dlsched serve --allow-dir')", field="working_dir")
        return None
