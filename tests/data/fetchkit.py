"""A tiny dataset made by the tests (never lab data): upstream files in a mirror folder laid out like
upstream (``OWNER/REPO/COMMIT/PATH``), one per converter, and the manifest describing them."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import tarfile
from pathlib import Path
from typing import Any

REPO = "example-lab/tiny-artifact"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
RAW = "https://raw.githubusercontent.com"


def put(mirror: Path, path: str, data: bytes, repo: str = REPO, commit: str = COMMIT) -> dict[str, Any]:
    """Write an upstream file into the mirror folder; its manifest source entry."""
    target = mirror / repo / commit / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return {"url": f"{RAW}/{repo}/{commit}/{path}", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


SYNERGY_SOURCE = '''from models.model_stats import ModelStats
import numpy as np

class toy_2(ModelStats):
    def __init__(self, name):
      super().__init__(name, 2)

    def update_stats(self):
        self.cpus = 3
        self.mem = int(62.5/3)
        self.iter_time = 0.25
        self.tput = np.array([
             [0.5, 1],
             [1, 1.5]
             ])
'''

#: What the tiny dataset's files must hold once fetched and converted.
EXPECTED = {
    "jobs.csv": b"name,time\njob-0,0\njob-1,60\n",
    "pairs.csv": b"duration_s,num_gpus\r\n60.5,1\r\n7200.0,8\r\n",
    "ids.txt": b"3\n17\n42\n",
    "trace.trace": b"ResNet-18\t1\t100\nLM\t2\t250\n",  # compared after gunzip
    "spec.csv": b"m1,V100,96,512,8\n",
    "models.json": {"note": "toy", "models": {"toy_2": {"cpus": 3, "iter_time": 0.25,
                                                        "tput": [[0.5, 1], [1, 1.5]], "gpus": 2}}},
}


def _tarball(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def tiny_manifest(mirror: Path, name: str = "tiny") -> dict[str, Any]:
    """A one-dataset manifest with one plain file and one file per converter, its upstream files in ``mirror``."""
    files = [
        {"dest": "jobs.csv", "sources": [put(mirror, "data/jobs.csv", EXPECTED["jobs.csv"])]},
        {"dest": "pairs.csv", "convert": "pickle_pairs_csv", "args": {"header": ["duration_s", "num_gpus"]},
         "sources": [put(mirror, "data/pairs.pickle", pickle.dumps([(60.5, 1), (7200.0, 8)]))]},
        {"dest": "ids.txt", "convert": "pickle_ids_txt",
         "sources": [put(mirror, "data/ids.pickle", pickle.dumps({42, 3, 17}))]},
        {"dest": "seed=1/trace.trace.gz", "convert": "gzip",
         "sources": [put(mirror, "traces/seed=1/trace.trace", EXPECTED["trace.trace"])]},
        {"dest": "spec/spec.csv", "convert": "untar", "args": {"member": "spec.csv"},
         "sources": [put(mirror, "spec.tar.gz", _tarball("spec.csv", EXPECTED["spec.csv"]))]},
        {"dest": "models.json", "convert": "synergy_models", "args": {"meta": {"note": "toy"}},
         "sources": [put(mirror, "models/toy_2.py", SYNERGY_SOURCE.encode())]},
    ]
    return {"format": 1, "datasets": [{
        "name": name, "title": "a tiny test dataset", "licence": "MIT", "redistribution": True,
        "redistribution_note": "", "used_by": "tests", "origins": [{"repository": REPO, "commit": COMMIT}],
        "files": files,
        "unavailable": [{"dest": "notes.json", "size": 2, "sha256": hashlib.sha256(b"{}").hexdigest(),
                         "reason": "written by hand"}]}]}


def check_fetched(folder: Path) -> None:
    """The tiny dataset's folder holds the expected records."""
    assert (folder / "jobs.csv").read_bytes() == EXPECTED["jobs.csv"]
    assert (folder / "pairs.csv").read_bytes() == EXPECTED["pairs.csv"]
    assert (folder / "ids.txt").read_bytes() == EXPECTED["ids.txt"]
    assert gzip.decompress((folder / "seed=1" / "trace.trace.gz").read_bytes()) == EXPECTED["trace.trace"]
    assert (folder / "spec" / "spec.csv").read_bytes() == EXPECTED["spec.csv"]
    assert json.loads((folder / "models.json").read_text()) == EXPECTED["models.json"]
