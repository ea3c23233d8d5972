"""Which datasets of the manifest a data directory holds: what ``dlsched data list`` reports.

Presence is judged by the files the manifest names (a plain file must also have the upstream size, so a
truncated copy counts as missing); hashing every file would make listing slow for no gain, since a fetch
verifies what it writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlsched.data.manifest import Dataset, FileEntry


@dataclass(frozen=True)
class DatasetStatus:
    dataset: Dataset
    #: the dataset's folder, or None when there is no data directory
    folder: Path | None
    present_files: int
    #: how many of the files no fetch brings (``unavailable``) are there all the same
    present_unavailable: int = 0

    @property
    def state(self) -> str:
        """``present`` (every fetchable file there), ``partial``, ``absent``, or, for a dataset no fetch
        brings, ``present`` when its files are there and ``not fetchable`` when they are not."""
        total = len(self.dataset.files)
        if total == 0:
            unavailable = len(self.dataset.unavailable)
            return "present" if unavailable and self.present_unavailable == unavailable else "not fetchable"
        if self.present_files == total:
            return "present"
        return "partial" if self.present_files else "absent"

    def row(self) -> dict[str, Any]:
        """One JSON-ready record: the manifest facts and what the data directory holds."""
        d = self.dataset
        return {
            "name": d.name, "title": d.title, "state": self.state,
            "where": str(self.folder) if self.folder is not None else None,
            "files": len(d.files), "present_files": self.present_files, "size_bytes": d.size,
            "present_unavailable": self.present_unavailable,
            "origins": [{"repository": o.repository, "commit": o.commit} for o in d.origins],
            "licence": d.licence, "redistribution": d.redistribution,
            "redistribution_note": d.redistribution_note, "used_by": d.used_by,
            "unavailable": [{"file": f"{d.name}/{u.dest}", "reason": u.reason} for u in d.unavailable],
        }


def _present(entry: FileEntry, path: Path) -> bool:
    if not path.is_file():
        return False
    return entry.convert is not None or path.stat().st_size == entry.sources[0].size


def dataset_status(dataset: Dataset, root: Path | None) -> DatasetStatus:
    """What ``root`` (the data directory; None when there is none) holds of ``dataset``."""
    if root is None:
        return DatasetStatus(dataset, None, 0)
    folder = root / dataset.name
    if not folder.is_dir():
        return DatasetStatus(dataset, folder, 0)
    count = sum(_present(e, folder / e.dest) for e in dataset.files)
    there = sum((folder / u.dest).is_file() for u in dataset.unavailable)
    return DatasetStatus(dataset, folder, count, there)
