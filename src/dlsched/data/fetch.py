"""Download datasets of the manifest into the data directory, verified, converted, never half-written.

Each upstream file is downloaded from its pinned URL (or from a mirror laid out like upstream: the URL's path
appended to the mirror's base, so ``https://raw.githubusercontent.com/OWNER/REPO/COMMIT/PATH`` is looked
for at ``<mirror>/OWNER/REPO/COMMIT/PATH``; ``http(s)://`` and ``file://`` bases both work), its size and
sha256 checked against the manifest, converted when the readers expect another form, and written into a
staging folder inside the data directory. Only when every file of the dataset is ready are they renamed into
place, so a failed download, a checksum mismatch or an interrupted fetch leaves the data directory as it was.

Files no download reproduces (``unavailable`` in the manifest: a hand transcription, this project's own
measurements) can be copied from another data directory that holds them (``copy_from``, ``--from``); they
are checked against the sha256 the manifest pins for them, like downloads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from dlsched.core.errors import InputError
from dlsched.data.convert import CONVERTERS
from dlsched.data.manifest import Dataset, FileEntry, Source, Unavailable

#: Environment variable naming a mirror base URL (used when ``--mirror`` is not given).
MIRROR_ENV = "DLSCHED_DATA_MIRROR"
#: Seconds to wait for a server before giving up on a file.
TIMEOUT_S = 60.0
#: Files downloaded at once.
WORKERS = 8

@dataclass
class FetchResult:
    """What one dataset's fetch did."""

    name: str
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    downloaded_bytes: int = 0


def mirror_url(url: str, mirror: str | None) -> str:
    """``url`` itself, or its path under the mirror base (a mirror is laid out like upstream)."""
    if not mirror:
        return url
    base = mirror.rstrip("/")
    if not base.startswith(("http://", "https://", "file://")):
        base = Path(base).expanduser().resolve().as_uri()  # a plain directory is a file:// mirror
    return base + urlsplit(url).path


def download(url: str, timeout: float = TIMEOUT_S) -> bytes:
    """The bytes at ``url`` (http, https or file); OSError when the server or file cannot give them."""
    from dlsched.version import __version__

    request = urllib.request.Request(url, headers={"User-Agent": f"dlsched/{__version__}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the scheme is checked)
        data: bytes = response.read()
        return data


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_current(entry: FileEntry, path: Path) -> bool:
    """Whether ``path`` already holds this entry: the upstream bytes for a plain file (size, then sha256);
    for a converted file, that it exists (its bytes are not the upstream ones, so there is nothing to hash)."""
    if not path.is_file():
        return False
    if entry.convert is not None:
        return True
    source = entry.sources[0]
    return path.stat().st_size == source.size and sha256_file(path) == source.sha256


def _fetch_source(name: str, entry: FileEntry, source: Source, mirror: str | None) -> bytes:
    url = mirror_url(source.url, mirror)
    try:
        data = download(url)
    except urllib.error.HTTPError as exc:
        raise InputError(f"{name}/{entry.dest}: cannot download {url}: HTTP {exc.code} {exc.reason}",
                         field="mirror" if mirror else None) from None
    except (OSError, ValueError) as exc:  # URLError is an OSError
        reason = getattr(exc, "reason", None) or exc
        raise InputError(f"{name}/{entry.dest}: cannot download {url}: {reason}", field="mirror" if mirror
                         else None) from None
    got = hashlib.sha256(data).hexdigest()
    if len(data) != source.size or got != source.sha256:
        raise InputError(f"{name}/{entry.dest}: checksum mismatch for {url} (got {len(data)} bytes, sha256 "
                         f"{got[:12]}...; expected {source.size} bytes, sha256 {source.sha256[:12]}...); "
                         f"nothing of {name} was written")
    return data


def _prepare(name: str, entry: FileEntry, mirror: str | None, staging: Path) -> int:
    """Download, verify and convert one file into the staging folder; the bytes downloaded."""
    parts = [_fetch_source(name, entry, s, mirror) for s in entry.sources]
    if entry.convert is None:
        data = parts[0]
    else:
        convert = CONVERTERS.get(entry.convert)
        if convert is None:
            raise InputError(f"{name}/{entry.dest}: unknown converter {entry.convert!r} (a newer dlsched may "
                             f"know it)", field="convert")
        try:
            data = convert(parts, dict(entry.args or {}))
        except Exception as exc:  # noqa: BLE001 (whatever breaks decoding a verified upstream file - a pickle,
            # a tarball, Python source - it is that file's problem, reported as one line naming it)
            raise InputError(f"{name}/{entry.dest}: cannot convert ({entry.convert}): {exc}") from None
    target = staging / entry.dest
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return sum(len(p) for p in parts)


def _copy_unavailable(name: str, item: Unavailable, copy_from: Path, staging: Path) -> None:
    """Copy a file no download brings from another data directory, checked against its pinned sha256."""
    path = copy_from / name / item.dest
    if not path.is_file():
        raise InputError(f"{name}/{item.dest}: not in {copy_from} (no download brings it: {item.reason})",
                         field="from")
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if len(data) != item.size or got != item.sha256:
        raise InputError(f"{name}/{item.dest}: checksum mismatch for {path} (sha256 {got[:12]}..., expected "
                         f"{item.sha256[:12]}...); nothing of {name} was written", field="from")
    target = staging / item.dest
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def fetch_dataset(dataset: Dataset, root: Path, *, mirror: str | None = None, force: bool = False,
                  copy_from: Path | None = None) -> FetchResult:
    """Fetch one dataset into ``root/<name>``; files already there and current are kept unless ``force``.

    With ``copy_from`` (a data directory), the files no download brings are copied from there too.
    Raises :class:`InputError` naming the file on a failed download, a checksum mismatch or a failed
    conversion; the data directory is then as it was before the call.
    """
    result = FetchResult(name=dataset.name)
    folder = root / dataset.name
    todo = []
    for entry in dataset.files:
        if not force and is_current(entry, folder / entry.dest):
            result.kept.append(entry.dest)
        else:
            todo.append(entry)
    copies = []
    for item in dataset.unavailable:
        target = folder / item.dest
        if not force and target.is_file() and sha256_file(target) == item.sha256:
            result.kept.append(item.dest)
        elif copy_from is not None:
            copies.append(item)
        else:
            result.unavailable.append(item)
    if not todo and not copies:
        return result
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dataset.name}.fetch-", dir=root))
    except OSError as exc:
        raise InputError(f"cannot write to the data directory {root}: {exc.strerror or exc}") from None
    try:
        for item in copies:
            assert copy_from is not None  # copies are gathered only when there is a directory to copy from
            _copy_unavailable(dataset.name, item, copy_from, staging)
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = {pool.submit(_prepare, dataset.name, e, mirror, staging): e for e in todo}
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in pending:
                future.cancel()
            for future in done:
                future.result()  # re-raises the first failure
            for future in futures:
                result.downloaded_bytes += future.result()
        for entry in todo:
            target = folder / entry.dest
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / entry.dest, target)
            result.written.append(entry.dest)
        for item in copies:
            target = folder / item.dest
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / item.dest, target)
            result.copied.append(item.dest)
    except OSError as exc:
        raise InputError(f"{dataset.name}: cannot write into {folder}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def fetch(datasets: Sequence[Dataset], root: Path, *, mirror: str | None = None, force: bool = False,
          copy_from: Path | None = None, done: Callable[[FetchResult], None] | None = None) -> list[FetchResult]:
    """Fetch several datasets in turn (each all or nothing), calling ``done`` after each; the mirror defaults
    to ``$DLSCHED_DATA_MIRROR``."""
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    if copy_from is not None and not copy_from.is_dir():
        raise InputError(f"data directory {copy_from} to copy from not found", field="from")
    results = []
    for d in datasets:
        results.append(fetch_dataset(d, root, mirror=mirror, force=force, copy_from=copy_from))
        if done is not None:
            done(results[-1])
    return results
