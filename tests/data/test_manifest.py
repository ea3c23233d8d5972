"""The packaged manifest holds what it promises: pins at full commits of the dataset's own origins, known
converters, one entry per destination, and a refusal of entries that would write outside the dataset."""

from __future__ import annotations

import copy
import json

import pytest
from fetchkit import tiny_manifest

from dlsched.core import InputError
from dlsched.data.convert import CONVERTERS
from dlsched.data.manifest import load_manifest, parse_manifest, select


def test_packaged_pins_point_at_the_datasets_origins():
    datasets = load_manifest()
    assert len({d.name for d in datasets}) == len(datasets)
    for d in datasets:
        prefixes = tuple(f"https://raw.githubusercontent.com/{o.repository}/{o.commit}/" for o in d.origins)
        dests = [f.dest for f in d.files] + [u.dest for u in d.unavailable]
        assert len(set(dests)) == len(dests), d.name
        assert d.files or d.unavailable, d.name
        for f in d.files:
            assert f.convert is None or f.convert in CONVERTERS, (d.name, f.dest)
            assert all(s.url.startswith(prefixes) for s in f.sources), (d.name, f.dest)
    assert not select(datasets, ["h200"])[0].origins  # this project's own: no upstream claimed


@pytest.mark.parametrize("dest", ["../escape.csv", "/abs.csv", "a/../../b", ""])
def test_destination_outside_the_dataset_is_refused(tmp_path, dest):
    doc = tiny_manifest(tmp_path)
    doc["datasets"][0]["files"][0]["dest"] = dest
    with pytest.raises(InputError, match="field 'dest'"):
        parse_manifest(doc)


def test_short_commit_and_bad_checksum_are_refused(tmp_path):
    doc = tiny_manifest(tmp_path)
    short = copy.deepcopy(doc)
    short["datasets"][0]["origins"][0]["commit"] = "0123456"
    with pytest.raises(InputError, match="field 'commit'.*full 40-hex"):
        parse_manifest(short)
    doc["datasets"][0]["files"][0]["sources"][0]["sha256"] = "abc"
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="field 'sha256'"):
        load_manifest(path)
