"""The packaged manifest against the lab's data directory (``DLSCHED_DATA``; skipped without it).

A mirror is built in a temporary folder from the lab copy: files the lab holds as upstream bytes are served as
they are (and gzipped traces gunzipped), so the fetch checks the manifest's pinned sizes and sha256 against
them; the files the lab holds converted (pickles, a tarball, Synergy's classes) are served in their upstream
form rebuilt from the lab records, so the converters are checked to give the same records back. Then the
readers run on the fetched directory.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import pickle
import tarfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from dlsched.data.fetch import fetch
from dlsched.data.manifest import Dataset, FileEntry, Source, load_manifest

_LAB = os.environ.get("DLSCHED_DATA")
LAB = Path(_LAB) if _LAB else None
pytestmark = pytest.mark.skipif(LAB is None or not (LAB / "gavel").is_dir() or not (LAB / "sia").is_dir(),
                                reason="lab data directory not found (set DLSCHED_DATA to it)")


def _mirror_path(mirror: Path, url: str) -> Path:
    return mirror / unquote(urlsplit(url).path).lstrip("/")


def _synergy_source(name: str, fields: dict) -> bytes:
    lines = ["import numpy as np", "", f"class {name}(object):", "    def __init__(self, name):",
             f"        super().__init__(name, {fields['gpus']!r})", "", "    def update_stats(self):"]
    for key, value in fields.items():
        if key != "gpus":
            lines.append(f"        self.{key} = " + (f"np.array({value!r})" if key == "tput" else repr(value)))
    return ("\n".join(lines) + "\n").encode()


def _upstream_form(entry: FileEntry, lab_file: Path) -> list[bytes]:
    """The upstream bytes of a converted file, rebuilt from the lab's records."""
    text = lab_file.read_bytes()
    if entry.convert == "pickle_pairs_csv":
        rows = [line.split(",") for line in text.decode().splitlines()[1:]]
        return [pickle.dumps([(float(d), int(g)) for d, g in rows])]
    if entry.convert == "pickle_ids_txt":
        return [pickle.dumps([int(x) for x in text.split()])]
    if entry.convert == "untar":
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo(str((entry.args or {})["member"]))
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
        return [buf.getvalue()]
    if entry.convert == "synergy_models":
        return [_synergy_source(n, f) for n, f in json.loads(text)["models"].items()]
    raise AssertionError(f"no fixture for converter {entry.convert}")


def _build_mirror(mirror: Path, datasets: tuple[Dataset, ...]) -> list[Dataset]:
    """Serve the lab copy laid out like upstream; the datasets to fetch from it (converted files re-pinned to
    the rebuilt fixtures, every other pin kept as packaged)."""
    assert LAB is not None
    out = []
    for d in datasets:
        files = []
        for entry in d.files:
            lab_file = LAB / d.name / entry.dest
            if entry.convert in (None, "gzip"):
                target = _mirror_path(mirror, entry.sources[0].url)
                target.parent.mkdir(parents=True, exist_ok=True)
                if entry.convert is None:
                    target.symlink_to(lab_file)
                else:
                    target.write_bytes(gzip.decompress(lab_file.read_bytes()))
                files.append(entry)
                continue
            sources = []
            for source, data in zip(entry.sources, _upstream_form(entry, lab_file), strict=True):
                target = _mirror_path(mirror, source.url)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                sources.append(Source(source.url, len(data), hashlib.sha256(data).hexdigest()))
            files.append(dataclasses.replace(entry, sources=tuple(sources)))
        out.append(dataclasses.replace(d, files=tuple(files)))
    return out


def test_fetch_from_lab_mirror_matches_lab_records(tmp_path, serve, monkeypatch):
    assert LAB is not None
    datasets = load_manifest()
    mirror, root = tmp_path / "mirror", tmp_path / "fetched"
    to_fetch = _build_mirror(mirror, datasets)
    results = fetch(to_fetch, root, mirror=serve(mirror), copy_from=LAB)
    assert all(r.unavailable == [] for r in results)
    assert sum(len(r.written) for r in results) == sum(len(d.files) for d in datasets)
    for d in datasets:
        for entry in d.files:
            got, lab = (root / d.name / entry.dest).read_bytes(), (LAB / d.name / entry.dest).read_bytes()
            if entry.convert == "gzip":
                got, lab = gzip.decompress(got), gzip.decompress(lab)
            if entry.dest.endswith(".json") and entry.convert:
                assert json.loads(got) == json.loads(lab), f"{d.name}/{entry.dest}"
            else:
                assert got == lab, f"{d.name}/{entry.dest}"
        for item in d.unavailable:
            assert (root / d.name / item.dest).read_bytes() == (LAB / d.name / item.dest).read_bytes()

    # the readers see the same jobs in the fetched directory as in the lab's
    from dlsched.traces.resolve import resolve_trace

    def jobs(spec: str, where: Path) -> list:
        monkeypatch.setenv("DLSCHED_DATA", str(where))
        return [dataclasses.replace(j, origin="") for j in resolve_trace(spec)[0]]  # origin names the path

    for spec in ("tiresias", "gavel:0e4a51:1", "sia-philly:1", "pal-philly:1", "gimbal-alibaba:seed=1"):
        assert jobs(spec, root) == jobs(spec, LAB), spec

    # and a user's first run on the fetched data works from the command line
    from typer.testing import CliRunner

    from dlsched.cli import app

    monkeypatch.setenv("DLSCHED_DATA", str(root))
    res = CliRunner().invoke(app, ["simulate", "--trace", "sia-philly:1", "--policy", "sia", "--jobs", "10",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.splitlines()[-1])["completed"] == 10
