"""Reading and writing trace files: CSV rows with their true line numbers, gzip, atomic writes.

Only file handling lives here; what the cells mean is up to the reader that asked for them.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import os
from pathlib import Path

from dlsched.core.errors import InputError

#: Anything a trace path may be given as.
PathLike = str | os.PathLike[str]

_GZIP_MAGIC = b"\x1f\x8b"


def pyarrow_available() -> bool:
    """Whether Parquet can be read and written (pyarrow is optional, never required)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def csv_rows(path: str | os.PathLike[str], *, delimiter: str = ",") -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and ``(line, cells)`` rows of a CSV file, with the file line each row starts on.

    The csv module (not pandas) is used so every row keeps its true line number (blank lines and quoted
    newlines included) and so a row with the wrong number of cells is an error rather than padding.
    Blank lines are skipped.
    """
    source = str(path)
    try:
        fh = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise InputError(f"cannot open trace: {exc.strerror or exc}", source=source) from None
    with fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header: list[str] | None = None
        rows: list[tuple[int, list[str]]] = []
        prev = 0
        try:
            for cells in reader:
                start, prev = prev + 1, reader.line_num
                if not cells or all(not c.strip() for c in cells):
                    continue
                if header is None:
                    header = [c.strip() for c in cells]
                    if header and header[0].startswith("\ufeff"):
                        header[0] = header[0][1:]
                    continue
                if len(cells) != len(header):
                    raise InputError(f"malformed line: {len(cells)} fields, the header has {len(header)}",
                                     source=source, line=start)
                rows.append((start, cells))
        except csv.Error as exc:
            raise InputError(f"malformed CSV: {exc}", source=source, line=reader.line_num) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not a UTF-8 text file ({exc.reason})", source=source) from None
    if header is None:
        raise InputError("empty trace file (no header line)", source=source)
    return header, rows



def atomic_path(path: str | os.PathLike[str]) -> contextlib.AbstractContextManager[Path]:
    """Yield a temp path next to ``path`` and rename it over ``path`` only if the block succeeds.

    A crash or error half-way through writing never leaves a truncated trace behind (a later run would
    otherwise read a silently shorter workload), and a device, directory or symbolic link at ``path`` is
    refused rather than replaced (see :func:`dlsched.outputs.atomic_file`).
    """
    from dlsched.outputs import atomic_file

    return atomic_file(path)


def read_text(path: PathLike) -> str:
    """The whole file as text, un-gzipping when the file starts with the gzip magic bytes."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot open trace: {exc.strerror or exc}", source=source) from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(f"corrupt gzip file: {exc}", source=source) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not a UTF-8 text file ({exc.reason})", source=source) from None


def first_line(path: PathLike) -> str:
    """The first non-blank line (plain files are not read further; gzip files are small)."""
    source = str(path)
    try:
        with open(path, "rb") as fh:
            if fh.read(2) == _GZIP_MAGIC:
                lines: list[str] = read_text(path).splitlines()
            else:
                fh.seek(0)
                lines = []
                for raw in fh:
                    if raw.strip():
                        lines = [raw.decode("utf-8-sig", errors="replace")]
                        break
    except OSError as exc:
        raise InputError(f"cannot open trace: {exc.strerror or exc}", source=source) from None
    for line in lines:
        if line.strip():
            return line.rstrip("\r\n")
    raise InputError("empty trace file", source=source)
