"""Writing results without harming what is already there.

Every file dlsched writes (a run's ``--out`` folder, ``trace convert``'s target, fitted bins) goes through
here, for three reasons:

* **Check before work.** :func:`check_output_dir` and :func:`check_output_file` look at the target before a
  simulation starts, so a typo in ``--out`` costs a second, not the hour the simulation took.
* **Never over what is not ours.** A file is written to a temporary file in the target's own directory and
  renamed into place, and only over a regular file or nothing: a device (``/dev/null`` as root would become
  a regular file), a directory or a symbolic link is refused and left untouched.
* **No stale mix.** A re-used ``--out`` folder that holds an earlier run's results is refused unless the
  caller forces it; then the old result files are removed before the new ones move in, so a reader never
  sees this run's summary beside another run's per-run tables.

Files and folders get the permissions the user's umask gives ordinary files (``0o666``/``0o777`` masked),
never the private modes ``tempfile`` uses.

Problems are :class:`~dlsched.core.InputError` naming the path; the CLI prints them as one ``error:`` line.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from dlsched.core.errors import InputError

PathLike = str | os.PathLike[str]

#: Names (glob patterns) of the files a run or a comparison leaves in its ``--out`` folder. A folder holding
#: any of them holds an earlier run's results.
RESULT_PATTERNS: tuple[str, ...] = ("jobs.csv", "rounds.csv", "summary.json", "config.json", "report.html",
                                    "jobs-*.csv", "rounds-*.csv", "reports.json", "allocations.csv",
                                    "allocations-*.csv", "cluster.json", "dashboard.html", "figure-*.svg",
                                    "figure-*.pdf", "explanations.jsonl")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _kind(mode: int) -> str:
    """What a non-regular file is, in words for an error message."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _nonempty(path: PathLike, what: str) -> Path:
    text = os.fspath(path)
    if not text.strip():
        raise InputError(f"{what} is empty: give a path")
    return Path(text).expanduser()


def _check_creatable(path: Path) -> None:
    """``path`` does not exist: its nearest existing ancestor must be a writable directory."""
    parent = path.parent
    while True:
        try:
            st = parent.stat()
        except FileNotFoundError:
            if parent == parent.parent:
                break
            parent = parent.parent
            continue
        except OSError as exc:
            raise InputError(f"cannot create it: {parent}: {exc.strerror or exc}", source=str(path)) from None
        if not stat.S_ISDIR(st.st_mode):
            raise InputError(f"cannot create it: {parent} is not a directory", source=str(path))
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"cannot create it: {parent} is not writable", source=str(path))
        return
    raise InputError("cannot create it: no existing parent directory", source=str(path))


def _check_replaceable(path: Path) -> None:
    """``path`` may be written over: it is absent or a regular file (never followed if a link)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except NotADirectoryError:
        _check_creatable(path)  # names the ancestor that is a file
        raise
    except OSError as exc:
        raise InputError(f"cannot inspect it: {exc.strerror or exc}", source=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"refusing to write over {_kind(st.st_mode)}", source=str(path))


def check_output_file(path: PathLike, what: str = "output file") -> Path:
    """Check, before any work, that ``path`` can be written as a file; return it as a Path.

    It must be absent or a regular file (a device, directory or symbolic link is refused), and its folder
    must exist as a writable directory or be creatable.
    """
    target = _nonempty(path, what)
    _check_replaceable(target)
    if target.exists():
        if not os.access(target.parent, os.W_OK | os.X_OK):
            raise InputError(f"cannot write: {target.parent} is not writable", source=str(target))
    else:
        _check_creatable(target)
    return target


def earlier_results(folder: Path) -> list[str]:
    """Names in ``folder`` that an earlier run or comparison wrote (see :data:`RESULT_PATTERNS`)."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in RESULT_PATTERNS)]


def check_output_dir(path: PathLike, *, force: bool = False, what: str = "--out") -> Path:
    """Check, before any work, that ``path`` can receive a run's results; return it as a Path.

    It must be absent (and creatable), or a writable directory. A directory holding an earlier run's
    results is refused unless ``force``; even then every result name in it must be a regular file, since
    those are removed before the new results move in.
    """
    folder = _nonempty(path, what)
    where = f"{what} {folder}"
    try:
        st = folder.stat()
    except (FileNotFoundError, NotADirectoryError):
        if folder.is_symlink():
            raise InputError("is a symbolic link to nothing", source=where) from None
        try:
            _check_creatable(folder)
        except InputError as exc:
            raise InputError(str(exc).removeprefix(f"{folder}: "), source=where) from None
        return folder
    except OSError as exc:
        raise InputError(f"cannot use it: {exc.strerror or exc}", source=where) from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a regular file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise InputError(f"exists and is {kind}, not a directory", source=where)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError("directory is not writable", source=where)
    old = earlier_results(folder)
    if old and not force:
        shown = ", ".join(old[:4]) + (", ..." if len(old) > 4 else "")
        raise InputError(f"holds results of an earlier run ({shown}); choose a new folder or give --force "
                         f"to replace them", source=where)
    for name in old:
        _check_replaceable(folder / name)
    return folder


def _mkdirs(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents with the umask's modes; return those created, deepest last."""
    missing: list[Path] = []
    p = folder
    while not p.exists():
        missing.append(p)
        if p == p.parent:
            break
        p = p.parent
    created = []
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o777)
        except FileExistsError:
            if not d.is_dir():
                raise InputError("cannot create it: a file of that name appeared", source=str(d)) from None
            continue
        created.append(d)
    return created


def _temp_beside(target: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private; results are ordinary files
    return Path(tmp)


def _rename_over(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` onto ``target`` unless ``target`` turned into something other than a regular file."""
    _check_replaceable(target)
    os.replace(tmp, target)


def _os_error(exc: OSError, target: Path) -> InputError:
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0) or str(exc)
    return InputError(f"cannot write: {reason}", source=str(target))


@contextlib.contextmanager
def atomic_file(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds.

    A crash half-way through never leaves a truncated file behind. ``path`` is checked as
    :func:`check_output_file` does, and again just before the rename.
    """
    target = check_output_file(path)
    try:
        _mkdirs(target.parent)
        tmp = _temp_beside(target)
    except OSError as exc:
        raise _os_error(exc, target) from None
    try:
        yield tmp
        _rename_over(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class StagedDir:
    """Result files being written into a folder, each as a temporary file until :meth:`commit`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._staged: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        """The temporary path to write result ``name`` to (a plain file name, no folders)."""
        if not name or Path(name).name != name or name.startswith("."):
            raise ValueError(f"not a plain result file name: {name!r}")
        if name in self._staged:
            raise ValueError(f"result {name!r} staged twice")
        tmp = _temp_beside(self.folder / name)
        self._staged[name] = tmp
        return tmp

    @property
    def names(self) -> Sequence[str]:
        return tuple(self._staged)

    def commit(self, *, replace_old: bool) -> None:
        """Move every staged file into place; with ``replace_old``, remove the earlier results first."""
        for name in self._staged:
            _check_replaceable(self.folder / name)
        if replace_old:
            for name in earlier_results(self.folder):
                old = self.folder / name
                _check_replaceable(old)
                if name not in self._staged:
                    old.unlink(missing_ok=True)
        for name, tmp in self._staged.items():
            _rename_over(tmp, self.folder / name)
        self._staged.clear()

    def discard(self) -> None:
        for tmp in self._staged.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        self._staged.clear()


@contextlib.contextmanager
def staged_dir(path: PathLike, *, force: bool = False) -> Iterator[StagedDir]:
    """Write a run's result files into folder ``path``: all of them, or none.

    The folder is checked (:func:`check_output_dir`) and created with ordinary permissions; each file is
    written to a temporary file inside it and renamed into place when the block succeeds. With ``force``,
    an earlier run's results are removed first. On failure the temporary files, and the folder if this
    call created it, are removed.
    """
    folder = check_output_dir(path, force=force)
    try:
        created = _mkdirs(folder)
    except OSError as exc:
        raise _os_error(exc, folder) from None
    stage = StagedDir(folder)
    try:
        yield stage
        stage.commit(replace_old=force)
    except BaseException:
        stage.discard()
        for d in reversed(created):
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
