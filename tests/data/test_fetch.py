"""Fetching over real HTTP (a local server): checksums verified, conversions done, a bad file refused with
nothing left behind, and files already there kept."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import pytest
from fetchkit import EXPECTED, REPO, check_fetched, tiny_manifest

from dlsched.core import InputError
from dlsched.data.fetch import fetch, fetch_dataset, mirror_url
from dlsched.data.manifest import load_manifest, parse_manifest


def _leftovers(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith(".")] if root.exists() else []


def test_fetch_over_http_verifies_and_converts(tmp_path, serve, tiny):
    mirror, manifest = tiny
    base = serve(mirror)
    root = tmp_path / "data"
    (dataset,) = load_manifest(manifest)
    result = fetch_dataset(dataset, root, mirror=base)
    check_fetched(root / "tiny")
    assert sorted(result.written) == sorted(f.dest for f in dataset.files)
    assert [u.dest for u in result.unavailable] == ["notes.json"]
    assert result.downloaded_bytes == dataset.size
    assert _leftovers(root) == []
    again = fetch_dataset(dataset, root, mirror=base)  # everything is there: nothing downloaded
    assert again.written == [] and again.downloaded_bytes == 0 and len(again.kept) == len(dataset.files)
    forced = fetch_dataset(dataset, root, mirror=base, force=True)
    assert len(forced.written) == len(dataset.files)
    check_fetched(root / "tiny")


def test_gzip_output_is_the_same_every_time(tmp_path, serve, tiny):
    mirror, manifest = tiny
    base = serve(mirror)
    (dataset,) = load_manifest(manifest)
    first, second = tmp_path / "a", tmp_path / "b"
    fetch_dataset(dataset, first, mirror=base)
    fetch_dataset(dataset, second, mirror=base)
    rel = Path("tiny") / "seed=1" / "trace.trace.gz"
    assert (first / rel).read_bytes() == (second / rel).read_bytes()


def test_corrupted_file_is_refused_and_nothing_is_left(tmp_path, serve, tiny):
    mirror, manifest = tiny
    target = mirror / REPO
    bad = next(target.rglob("ids.pickle"))
    data = bytearray(bad.read_bytes())
    data[-2] ^= 0xFF  # same size, other bytes
    bad.write_bytes(bytes(data))
    root = tmp_path / "data"
    (dataset,) = load_manifest(manifest)
    with pytest.raises(InputError, match=r"tiny/ids\.txt: checksum mismatch .*ids\.pickle") as err:
        fetch_dataset(dataset, root, mirror=serve(mirror))
    assert "\n" not in str(err.value)
    assert not (root / "tiny").exists()  # not even the files that downloaded fine
    assert _leftovers(root) == []


def test_a_bad_file_leaves_an_earlier_copy_alone(tmp_path, serve, tiny):
    mirror, manifest = tiny
    base = serve(mirror)
    root = tmp_path / "data"
    (dataset,) = load_manifest(manifest)
    fetch_dataset(dataset, root, mirror=base)
    next(mirror.rglob("jobs.csv")).write_bytes(b"name,time\njob-0,0\njob-9,99\n")  # upstream changed
    with pytest.raises(InputError, match=r"tiny/jobs\.csv: checksum mismatch"):
        fetch_dataset(dataset, root, mirror=base, force=True)
    check_fetched(root / "tiny")
    assert _leftovers(root) == []


def test_missing_upstream_file_names_it(tmp_path, serve, tiny):
    mirror, manifest = tiny
    next(mirror.rglob("spec.tar.gz")).unlink()
    root = tmp_path / "data"
    (dataset,) = load_manifest(manifest)
    with pytest.raises(InputError, match=r"tiny/spec/spec\.csv: cannot download http://127\.0\.0\.1:\d+/.*spec"
                                         r"\.tar\.gz: HTTP 404"):
        fetch_dataset(dataset, root, mirror=serve(mirror))
    assert not (root / "tiny").exists() and _leftovers(root) == []


def test_pickle_with_code_is_refused(tmp_path, serve):
    """A pickle that would call a function when loaded is a conversion error, not code run on the machine."""
    mirror = tmp_path / "mirror"
    doc = tiny_manifest(mirror)
    evil = pickle.dumps(hashlib.sha256)  # a global other than set: refused by the plain unpickler
    ids = next(f for f in doc["datasets"][0]["files"] if f["dest"] == "ids.txt")
    ids["sources"][0].update(size=len(evil), sha256=hashlib.sha256(evil).hexdigest())
    next(mirror.rglob("ids.pickle")).write_bytes(evil)
    (dataset,) = parse_manifest(doc)
    with pytest.raises(InputError, match=r"tiny/ids\.txt: cannot convert \(pickle_ids_txt\): refusing to load "
                                         r"_hashlib\.openssl_sha256"):
        fetch_dataset(dataset, tmp_path / "data", mirror=serve(mirror))


def test_copy_from_checks_pinned_checksum(tmp_path, serve, tiny):
    mirror, manifest = tiny
    base = serve(mirror)
    datasets = load_manifest(manifest)
    other = tmp_path / "other"
    (other / "tiny").mkdir(parents=True)
    (other / "tiny" / "notes.json").write_bytes(b"{}")
    results = fetch(datasets, tmp_path / "data", mirror=base, copy_from=other)
    assert results[0].copied == ["notes.json"] and results[0].unavailable == []
    assert (tmp_path / "data" / "tiny" / "notes.json").read_bytes() == b"{}"
    (other / "tiny" / "notes.json").write_bytes(b"[]")
    with pytest.raises(InputError, match=r"tiny/notes\.json: checksum mismatch"):
        fetch(datasets, tmp_path / "fresh", mirror=base, copy_from=other)
    with pytest.raises(InputError, match="field 'from'"):
        fetch(datasets, tmp_path / "data", copy_from=tmp_path / "nowhere")


def test_mirror_from_environment_and_plain_directory(tmp_path, monkeypatch, tiny):
    mirror, manifest = tiny
    monkeypatch.setenv("DLSCHED_DATA_MIRROR", str(mirror))  # a directory: read as a file:// mirror
    results = fetch(load_manifest(manifest), tmp_path / "data")
    assert len(results[0].written) == len(EXPECTED)
    check_fetched(tmp_path / "data" / "tiny")
    url = "https://raw.githubusercontent.com/o/r/c/a%20b/x.csv"
    assert mirror_url(url, "http://host:8/base/") == "http://host:8/base/o/r/c/a%20b/x.csv"
    assert mirror_url(url, None) == url
