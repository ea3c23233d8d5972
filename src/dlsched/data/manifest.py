"""The data manifest: which public files make up each dataset of the data directory, and where they come from.

The measured traces and profiles are other groups' data under their own licences, so the package carries
only their description (``manifest.json``, written by ``scripts/data_manifest.py`` from git snapshots of the
origin repositories): per dataset the origin repository and full commit, the licence and whether it allows
redistribution, and per file the upstream URL at the pinned commit, the size and sha256 of the upstream bytes,
and the converter that turns them into the file the readers expect (when the upstream form differs, e.g. a
pickle). Files no download can reproduce are listed as ``unavailable`` with the reason, so ``dlsched data
list`` can say so rather than let a reader fail later.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from dlsched.core.errors import InputError

#: Manifest format this module reads.
FORMAT = 1
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class Source:
    """One upstream file: where to download it and what its bytes must hash to."""

    url: str
    size: int
    sha256: str


@dataclass(frozen=True)
class FileEntry:
    """One file of a dataset: its path inside the dataset folder and the upstream file(s) it is made from."""

    dest: str
    sources: tuple[Source, ...]
    convert: str | None = None
    args: dict[str, Any] | None = None

    @property
    def size(self) -> int:
        """Bytes to download for this file."""
        return sum(s.size for s in self.sources)


@dataclass(frozen=True)
class Unavailable:
    """A file of the lab copy that no download reproduces (hand-transcribed, or this project's own)."""

    dest: str
    size: int
    sha256: str
    reason: str


@dataclass(frozen=True)
class Origin:
    repository: str
    commit: str


@dataclass(frozen=True)
class Dataset:
    """A folder of the data directory (``sia``, ``gavel``, ...) and the files that fill it."""

    name: str
    title: str
    licence: str
    redistribution: bool
    redistribution_note: str
    used_by: str
    origins: tuple[Origin, ...]
    files: tuple[FileEntry, ...]
    unavailable: tuple[Unavailable, ...]

    @property
    def size(self) -> int:
        """Bytes a fetch downloads."""
        return sum(f.size for f in self.files)

    @property
    def origin_text(self) -> str:
        """``owner/repo@commit`` of each origin, or a note for this project's own measurements."""
        if not self.origins:
            return "this project (own measurements; no public upstream)"
        return ", ".join(f"{o.repository}@{o.commit}" for o in self.origins)


def _get(raw: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected an object, got {raw!r}"[:200], field=key)
    value = raw.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise InputError(f"{where}: '{key}' must be {kind.__name__}, got {value!r}", field=key)
    return value


def _safe_dest(dest: str, where: str) -> str:
    """A relative path that stays inside the dataset folder (a manifest must not write elsewhere)."""
    parts = dest.split("/")
    if not dest or dest.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in dest:
        raise InputError(f"{where}: destination {dest!r} must be a relative path inside the dataset", field="dest")
    return dest


def _source(raw: dict[str, Any], where: str) -> Source:
    url = _get(raw, "url", str, where)
    if not url.startswith(("https://", "http://", "file://")):
        raise InputError(f"{where}: url {url!r} is not http(s) or file", field="url")
    sha = _get(raw, "sha256", str, where)
    if not _SHA256.match(sha):
        raise InputError(f"{where}: sha256 {sha!r} is not 64 hex digits", field="sha256")
    return Source(url=url, size=_get(raw, "size", int, where), sha256=sha)


def _file(raw: dict[str, Any], where: str) -> FileEntry:
    dest = _safe_dest(_get(raw, "dest", str, where), where)
    where = f"{where} file {dest}"
    sources = tuple(_source(s, where) for s in _get(raw, "sources", list, where))
    if not sources:
        raise InputError(f"{where}: no sources", field="sources")
    convert = raw.get("convert")
    if convert is None and len(sources) != 1:
        raise InputError(f"{where}: several sources need a converter", field="convert")
    return FileEntry(dest=dest, sources=sources, convert=convert, args=raw.get("args") or {})


def _dataset(raw: dict[str, Any]) -> Dataset:
    name = _get(raw, "name", str, "manifest")
    if not _NAME.match(name):
        raise InputError(f"manifest: dataset name {name!r} is not a plain folder name", field="name")
    where = f"manifest dataset {name}"
    origins = []
    for o in _get(raw, "origins", list, where):
        commit = _get(o, "commit", str, where)
        if not _COMMIT.match(commit):
            raise InputError(f"{where}: commit {commit!r} is not a full 40-hex commit", field="commit")
        origins.append(Origin(repository=_get(o, "repository", str, where), commit=commit))
    unavailable = tuple(Unavailable(dest=_safe_dest(_get(u, "dest", str, where), where),
                                    size=_get(u, "size", int, where), sha256=_get(u, "sha256", str, where),
                                    reason=_get(u, "reason", str, where))
                        for u in raw.get("unavailable", []))
    redistribution = raw.get("redistribution")
    if not isinstance(redistribution, bool):
        raise InputError(f"{where}: 'redistribution' must be true or false", field="redistribution")
    return Dataset(name=name, title=_get(raw, "title", str, where), licence=_get(raw, "licence", str, where),
                   redistribution=redistribution,
                   redistribution_note=str(raw.get("redistribution_note", "")), used_by=str(raw.get("used_by", "")),
                   origins=tuple(origins), files=tuple(_file(f, where) for f in _get(raw, "files", list, where)),
                   unavailable=unavailable)


def parse_manifest(doc: dict[str, Any]) -> tuple[Dataset, ...]:
    """Datasets of a manifest document, checked (bad entries raise :class:`InputError` naming the field)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"manifest: expected format {FORMAT}", field="format")
    datasets = tuple(_dataset(d) for d in _get(doc, "datasets", list, "manifest"))
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise InputError("manifest: dataset names repeat", field="name")
    return datasets


def load_manifest(path: str | Path | None = None) -> tuple[Dataset, ...]:
    """The datasets of ``path``, or of the manifest packaged with dlsched when ``path`` is None."""
    if path is None:
        return _packaged()
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"manifest {path}: cannot read it: {exc}", field="manifest") from None
    return parse_manifest(doc)


@cache
def _packaged() -> tuple[Dataset, ...]:
    text = resources.files("dlsched.data").joinpath("manifest.json").read_text()
    return parse_manifest(json.loads(text))


def dataset_names(datasets: Iterable[Dataset] | None = None) -> list[str]:
    return [d.name for d in (_packaged() if datasets is None else datasets)]


def select(datasets: Sequence[Dataset], names: Sequence[str]) -> list[Dataset]:
    """The datasets named (``all`` or nothing = every one), in manifest order; an unknown name is an error."""
    if not names or "all" in names:
        return list(datasets)
    known = {d.name: d for d in datasets}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"unknown dataset {unknown[0]!r} (datasets: {', '.join(known)}, or all)", field="name")
    wanted = set(names)
    return [d for d in datasets if d.name in wanted]


def locate(relpath: str | os.PathLike[str]) -> tuple[Dataset, Unavailable | None] | None:
    """The packaged dataset whose folder holds ``relpath`` (its first component) and, when the path is one
    of the files no fetch brings, that file's entry; None for a path outside every dataset."""
    parts = Path(relpath).parts
    found = [d for d in _packaged() if parts and d.name == parts[0]]
    if not found:
        return None
    inner = "/".join(parts[1:])
    return found[0], next((u for u in found[0].unavailable if u.dest == inner), None)
