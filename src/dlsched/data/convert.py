"""Converters from an upstream file's form to the form dlsched's readers expect.

A few files of the data directory are not the upstream bytes: Gavel ships job-id lists and the Philly
(duration, GPUs) distribution as Python pickles, the per-VC traces of seeds 1 to 4 uncompressed (the readers
take them gzipped), the PAI machine list inside a tarball, and Synergy's CPU/memory tables as Python classes.
Each converter here turns the verified upstream bytes into the same records as the lab copy. None of them runs
upstream code: pickles go through an unpickler that admits no class but ``set``, and Synergy's classes are
read with :mod:`ast` as literals.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import gzip
import io
import json
import pickle
import tarfile
from collections.abc import Callable, Sequence
from typing import Any

#: A converter: the upstream files' bytes (in manifest order) and the entry's args -> the file to write.
Converter = Callable[[Sequence[bytes], dict[str, Any]], bytes]


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles lists, tuples, numbers, strings and sets only: any other global is refused."""

    _ALLOWED = {("builtins", "set"): set, ("builtins", "frozenset"): frozenset}

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file") from None


def _unpickle(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


def _one(parts: Sequence[bytes]) -> bytes:
    if len(parts) != 1:
        raise ValueError(f"expected one upstream file, got {len(parts)}")
    return parts[0]


def gzip_file(parts: Sequence[bytes], args: dict[str, Any]) -> bytes:
    """The upstream text gzipped (mtime 0, so a fetch writes the same bytes every time)."""
    return gzip.compress(_one(parts), compresslevel=9, mtime=0)


def pickle_ids_txt(parts: Sequence[bytes], args: dict[str, Any]) -> bytes:
    """A pickled list or set of job ids -> one id per line (a set sorted, a list in its order)."""
    value = _unpickle(_one(parts))
    if isinstance(value, set | frozenset):
        ids = sorted(value)
    elif isinstance(value, list | tuple):
        ids = list(value)
    else:
        raise ValueError(f"expected a list or set of ids, got {type(value).__name__}")
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ValueError("expected whole-number job ids")
    return "".join(f"{i}\n" for i in ids).encode()


def pickle_pairs_csv(parts: Sequence[bytes], args: dict[str, Any]) -> bytes:
    """A pickled list of tuples -> CSV with ``args['header']`` (numbers written as Python writes them)."""
    header = [str(h) for h in args.get("header", [])]
    rows = _unpickle(_one(parts))
    if not isinstance(rows, list):
        raise ValueError(f"expected a list of tuples, got {type(rows).__name__}")
    text = io.StringIO()
    writer = csv.writer(text)  # the csv module's defaults (CRLF line ends), as the lab copy was written
    if header:
        writer.writerow(header)
    for row in rows:
        if not isinstance(row, tuple | list) or (header and len(row) != len(header)):
            raise ValueError(f"expected tuples of {len(header)} values, got {row!r}")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in row):
            raise ValueError(f"expected numbers, got {row!r}")
        writer.writerow(row)
    return text.getvalue().encode()


def untar(parts: Sequence[bytes], args: dict[str, Any]) -> bytes:
    """The regular file ``args['member']`` of a (gzipped) tarball."""
    member = str(args.get("member", ""))
    with tarfile.open(fileobj=io.BytesIO(_one(parts)), mode="r:*") as tar:
        try:
            info = tar.getmember(member)
        except KeyError:
            raise ValueError(f"archive has no member {member!r}") from None
        handle = tar.extractfile(info) if info.isfile() else None
        if handle is None:
            raise ValueError(f"archive member {member!r} is not a regular file")
        return handle.read()


def _literal(node: ast.expr) -> Any:
    """A literal, or the literal inside ``np.array(...)``; ValueError for anything computed."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array":
        if len(node.args) != 1:
            raise ValueError("np.array with other than one argument")
        node = node.args[0]
    return ast.literal_eval(node)


def _synergy_model(source: bytes) -> tuple[str, dict[str, Any]]:
    """(class name, fields) of one Synergy ``simulator/models/<name>.py``: the ``self.x = literal`` lines of
    ``update_stats`` in their order, then ``gpus`` from ``super().__init__(name, gpus)``.

    Values Synergy computes (``self.mem = int(62.5/3)``) are left out, as the lab transcription left them out:
    the readers take the tables, not those sizes.
    """
    tree = ast.parse(source.decode())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if len(classes) != 1:
        raise ValueError("expected one model class")
    cls = classes[0]
    fields: dict[str, Any] = {}
    gpus = None
    for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if fn.name == "update_stats" and isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    with contextlib.suppress(ValueError):
                        fields[target.attr] = _literal(node.value)
            if fn.name == "__init__" and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "__init__" and len(node.args) == 2:
                gpus = ast.literal_eval(node.args[1])
    if gpus is None or not fields:
        raise ValueError(f"model class {cls.name} has no GPU count or no update_stats values")
    fields["gpus"] = gpus
    return cls.name, fields


def synergy_models(parts: Sequence[bytes], args: dict[str, Any]) -> bytes:
    """Synergy's model classes -> ``{<args['meta']>, "models": {name: fields}}`` as JSON."""
    models = dict(_synergy_model(p) for p in parts)
    doc = {**dict(args.get("meta", {})), "models": models}
    return (json.dumps(doc, indent=1) + "\n").encode()


CONVERTERS: dict[str, Converter] = {
    "gzip": gzip_file,
    "pickle_ids_txt": pickle_ids_txt,
    "pickle_pairs_csv": pickle_pairs_csv,
    "untar": untar,
    "synergy_models": synergy_models,
}
